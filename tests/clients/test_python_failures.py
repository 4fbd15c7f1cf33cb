"""What the client does when things go wrong, against a live hub: 503/429 with
Retry-After retried with one Idempotency-Key (one memory stored), an answer lost after
the hub wrote replayed by that key, the hub's own 429, a 5xx with its request id,
connection refused, a server that never answers (bounded by timeout x attempts), and a
missing configuration."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from memoryhub_client import (
    ConfigurationError,
    ConnectionFailed,
    MemoryHub,
    RateLimited,
    ServerError,
    Timeout,
)

from memories.models import Memory as StoredMemory

pytestmark = pytest.mark.django_db(transaction=True)


class Flaky(httpx.BaseTransport):
    """Between the client and the live hub: answers ``status`` (with ``headers``) to the
    first ``times`` requests, before (``reach=False``) or after forwarding them to the
    hub; records every request it saw."""

    def __init__(self, status: int, times: int, *, reach: bool = False, **headers: str):
        self.status, self.times, self.reach, self.headers = status, times, reach, headers
        self.inner = httpx.HTTPTransport()
        self.seen: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        if len(self.seen) > self.times:
            return self.inner.handle_request(request)
        if self.reach:
            self.inner.handle_request(request).read()  # the hub did it; the answer is lost
        body = {"detail": "try later", "request_id": "req-123"}
        return httpx.Response(self.status, headers=self.headers, json=body)

    def close(self) -> None:
        # its keep-alive connections hold a server thread, and that thread a database session
        self.inner.close()


@pytest.fixture
def flaky_hub(live_server: Any, owner: Any) -> Iterator[Callable[[Flaky], MemoryHub]]:
    made: list[MemoryHub] = []

    def make(transport: Flaky, **options: Any) -> MemoryHub:
        options = {"retries": 3, "backoff": 0.01, **options}
        made.append(MemoryHub(live_server.url, owner.raw_key, transport=transport, **options))
        return made[-1]

    yield make
    for client in made:
        client.close()


@pytest.mark.parametrize("status", [503, 429])
def test_a_refusal_is_retried_after_retry_after_with_one_key(flaky_hub, status: int) -> None:
    flaky = Flaky(status, 2, **{"Retry-After": "0.3"})
    started = time.monotonic()
    created = flaky_hub(flaky).memories.add("I adopted a cat", user="alice")
    assert time.monotonic() - started >= 0.6  # waited Retry-After, twice
    keys = {request.headers["Idempotency-Key"] for request in flaky.seen}
    assert len(flaky.seen) == 3 and len(keys) == 1
    assert created.created and StoredMemory.objects.count() == 1


def test_an_answer_lost_after_the_write_is_replayed_by_the_key(flaky_hub) -> None:
    flaky = Flaky(504, 1, reach=True)
    created = flaky_hub(flaky).memories.add("I adopted a cat", user="alice")
    assert len(flaky.seen) == 2
    assert flaky.seen[0].headers["Idempotency-Key"] == flaky.seen[1].headers["Idempotency-Key"]
    assert StoredMemory.objects.count() == 1  # the hub replayed its first answer
    assert created.created is True and created.memory.content == "I adopted a cat"


def test_a_note_whose_answer_was_lost_is_kept_once(flaky_hub, hub: MemoryHub) -> None:
    hub.rooms.create("chat-1")
    flaky = Flaky(504, 1, reach=True)
    note = flaky_hub(flaky).working.add("a note", room="chat-1")
    assert len(flaky.seen) == 2 and note.content == "a note"
    assert hub.working.list(room="chat-1").count == 1  # the hub replayed its first answer


def test_a_delete_whose_answer_was_lost_is_done(flaky_hub, hub: MemoryHub) -> None:
    memory = hub.memories.add("forget me", user="alice").memory
    flaky = Flaky(504, 1, reach=True)
    assert flaky_hub(flaky).memories.delete(memory.id) is None  # the retry's 404: done
    assert len(flaky.seen) == 2 and not StoredMemory.objects.exists()


def test_a_server_error_is_not_retried_and_names_its_request(flaky_hub) -> None:
    flaky = Flaky(500, 5)
    with pytest.raises(ServerError) as failed:
        flaky_hub(flaky).memories.count()
    assert len(flaky.seen) == 1
    assert (failed.value.status, failed.value.request_id) == (500, "req-123")
    assert "req-123" in str(failed.value)


def test_retries_are_bounded(flaky_hub) -> None:
    flaky = Flaky(503, 10, **{"Retry-After": "0"})
    with pytest.raises(ServerError) as unavailable:
        flaky_hub(flaky, retries=2).memories.count()
    assert unavailable.value.status == 503 and len(flaky.seen) == 3


def test_the_hubs_own_429_comes_with_retry_after(hub_for, owner) -> None:
    owner.project.settings = {"limits": {"writes_per_minute": 1}}
    owner.project.save(update_fields=["settings"])
    answers: list[httpx.Response] = []

    class Recording(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            answers.append(super().handle_request(request))
            return answers[-1]

    hub = hub_for(owner.raw_key, retries=3, max_retry_wait=1.0, transport=Recording())
    hub.memories.add("one", user="alice")
    with pytest.raises(RateLimited) as limited:
        hub.memories.add("two", user="alice")
    # a Retry-After over max_retry_wait is raised at once, never slept on and sent again:
    # the last answer is the first such one (a shorter wait, near a window's edge, is
    # waited for and tried again)
    waits = [float(a.headers["Retry-After"]) for a in answers if a.status_code == 429]
    assert answers[-1].status_code == 429 and waits[-1] > 1.0
    assert all(wait <= 1.0 for wait in waits[:-1])
    assert limited.value.status == 429 and limited.value.retry_after == waits[-1]
    assert StoredMemory.objects.count() == 1


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_connection_refused_is_retried_then_raised(owner) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    hub = MemoryHub(url, owner.raw_key, retries=2, backoff=0.01)
    with hub, pytest.raises(ConnectionFailed) as refused:
        hub.memories.add("x", user="alice")
    assert refused.value.status is None and "3 attempts" in str(refused.value)


@pytest.fixture
def silent_server() -> Iterator[tuple[str, list[socket.socket]]]:
    """A server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    listener.close()
    for connection in accepted:
        connection.close()


def test_a_server_that_never_answers_times_out_within_the_bound(silent_server, owner) -> None:
    url, accepted = silent_server
    with MemoryHub(url, owner.raw_key, timeout=0.3, retries=2, backoff=0.01) as hub:
        started = time.monotonic()
        with pytest.raises(Timeout) as silent:
            hub.memories.get("00000000-0000-0000-0000-000000000000")
        elapsed = time.monotonic() - started
        assert 0.9 <= elapsed < 0.9 + 1.0  # timeout x 3 attempts, plus the short backoff
        assert len(accepted) == 3 and "3 attempts" in str(silent.value)
        started = time.monotonic()
        with pytest.raises(Timeout):
            hub.working.add("note", room="chat-1")  # a POST too: its key makes it safe
        assert time.monotonic() - started < 0.9 + 1.0 and len(accepted) == 6


def test_a_missing_url_or_key_says_how_to_give_it(monkeypatch, live_server, owner) -> None:
    monkeypatch.delenv("MEMORYHUB_URL", raising=False)
    monkeypatch.delenv("MEMORYHUB_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="MEMORYHUB_URL"):
        MemoryHub()
    with pytest.raises(ConfigurationError, match="MEMORYHUB_API_KEY"):
        MemoryHub("http://127.0.0.1:8000")
    with pytest.raises(ConfigurationError, match="http://"):
        MemoryHub("127.0.0.1:8000", "mh_x")
    monkeypatch.setenv("MEMORYHUB_URL", live_server.url + "/api/v1/")
    monkeypatch.setenv("MEMORYHUB_API_KEY", owner.raw_key)
    with MemoryHub() as hub:  # from the environment; a trailing /api/v1/ is fine
        assert hub.url == live_server.url
        assert hub.memories.count() == 0
