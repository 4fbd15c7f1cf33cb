"""Tasks sent from requests and signals (memories/providers/task_sending.py): tried once
against a broker that is down, then not at all for PAUSE_SECONDS, so a write during a
Redis outage answers without waiting on it, and its work is left to the sweeps.

The broker is a real TCP listener that counts the connections it gets and drops each at
once (a Redis that has gone away), or one that never answers (a Redis that hangs)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from celery import current_app

from memories.models import Memory
from memories.providers import redis_client
from memories.providers.task_sending import TaskNotSent, sending_paused, task_send
from synopsis.models import FactExtraction

TASK = "memories.tasks.embedding_run_task"


class Listener:
    """A TCP server on 127.0.0.1 that counts the connections made to it; it closes each
    at once, or, with ``silent``, keeps it open and never answers."""

    def __init__(self, silent: bool = False) -> None:
        self.silent = silent
        self.accepted = 0
        self.held: list[socket.socket] = []
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(50)
        self.port = int(self.server.getsockname()[1])
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:  # closed
                return
            self.accepted += 1
            if self.silent:
                self.held.append(connection)
            else:
                connection.close()

    def close(self) -> None:
        self.server.close()
        for connection in self.held:
            connection.close()


def _producers_reset() -> None:
    """Celery keeps its producer pool for the broker it first connected to."""
    current_app._pool = None
    current_app.amqp._producer_pool = None


@contextmanager
def broker_at(url: str) -> Iterator[None]:
    before = current_app.conf.broker_url
    current_app.conf.broker_url = url
    _producers_reset()
    try:
        yield
    finally:
        current_app.conf.broker_url = before
        _producers_reset()


@pytest.fixture
def gone() -> Iterator[Listener]:
    listener = Listener()
    with broker_at(f"redis://127.0.0.1:{listener.port}/0"):
        yield listener
    listener.close()


def test_a_failed_send_is_tried_once_then_sends_pause(gone):
    with pytest.raises(TaskNotSent, match="Connection"):
        task_send(TASK)
    tried = gone.accepted
    assert tried >= 1 and sending_paused()

    # within the pause: refused at once, the broker is not asked
    for _ in range(5):
        with pytest.raises(TaskNotSent, match="not sent"):
            task_send(TASK, args=["x"])
    assert gone.accepted == tried

    # after it: tried again
    redis_client._paused_until = 0.0  # the pause over (the conftest resets it after a test)
    with pytest.raises(TaskNotSent):
        task_send(TASK)
    assert gone.accepted > tried


def test_a_send_is_not_retried_against_a_broker_that_is_down(gone):
    """Celery's default publish retries (three more connections, 0.6 s of sleeps) and
    kombu's connection retries (up to broker_connection_timeout) are off for these sends:
    without settings.CELERY_BROKER_TRANSPORT_OPTIONS["max_retries"] the listener sees
    more than one connection."""
    with pytest.raises(TaskNotSent):
        task_send(TASK)
    assert gone.accepted == 1


def test_a_broker_that_hangs_fails_the_send_instead_of_holding_it(settings):
    """kombu waits forever on a Redis that accepts and never answers unless the broker
    has a socket timeout (settings: 5 s)."""
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["socket_timeout"] > 1  # BRPOP's 1 s
    listener = Listener(silent=True)
    current_app.conf.broker_transport_options = {
        **settings.CELERY_BROKER_TRANSPORT_OPTIONS, "socket_timeout": 0.3,
    }  # fmt: skip
    try:
        with (
            broker_at(f"redis://127.0.0.1:{listener.port}/0"),
            pytest.raises(TaskNotSent, match="Timeout"),
        ):
            task_send(TASK)
    finally:
        current_app.conf.broker_transport_options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
        _producers_reset()
        listener.close()
    assert listener.accepted == 1 and sending_paused()


@pytest.mark.django_db(transaction=True)
def test_writes_while_the_broker_is_down_ask_it_once_and_the_sweep_mines_them(owner, gone):
    """The first write's embedding task fails and pauses sends: its fact extraction and
    the writes after it do not ask the broker again. Every write is stored; the facts
    sweep finds the user messages no task was sent for."""
    for n in range(4):
        reply = owner.client.post(
            "/api/v1/memories/",
            {"user": "alice", "room": "chat", "role": "user", "content": f"I walk my dog {n}"},
            format="json",
        )
        assert reply.status_code == 201, reply.content
        if n == 0:
            tried = gone.accepted
            assert tried >= 1
    assert gone.accepted == tried
    assert Memory.objects.filter(project=owner.project, content__startswith="I walk").count() == 4

    from synopsis.services.facts import facts_unmined

    unmined = set(facts_unmined())
    written = set(Memory.objects.filter(content__startswith="I walk").values_list("pk", flat=True))
    assert written <= unmined
    assert not FactExtraction.objects.filter(message_id__in=written).exists()
