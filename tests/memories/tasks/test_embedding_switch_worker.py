"""A model switch carried out by real Celery workers (tests/memories/tasks/workers.py):
started through the API, a worker killed in the middle of the job, the switch found
stalled by the sweep and finished by another worker, where the first one stopped. The
target is the OpenAI-compatible endpoint of the tests (hashing vectors over HTTP, slowed
down so that the job is still running when its worker dies)."""

from __future__ import annotations

import os
import signal
from datetime import timedelta

import pytest
import redis
from celery import current_app
from django.conf import settings

from memories.models import Embedding, EmbeddingSwitch, Memory
from memories.services import embedding_switch as switching
from memories.services.embedding_spaces import project_space_read
from memories.services.embedding_switch import SWITCH_TASK, embedding_switch_sweep
from tests.conftest import embed_pending, wait_until
from tests.memories.api.memory_calls import batch
from tests.memories.embedding_server import EmbeddingServer
from tests.memories.tasks.workers import worker_running

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]
QUEUE = "switch-test"  # only these workers take it
MEMORIES = 24


@pytest.fixture
def endpoint(settings):
    server = EmbeddingServer(dimension=32).start()
    server.delay = 0.25  # a batch of 2 a quarter of a second: ~3 s for the job
    config = {"API_URL": server.base_url, "API_MODEL": "stub-embedder", "API_DIMENSION": 32}
    settings.EMBEDDING = {**settings.EMBEDDING, **config, "SWITCH_BATCH": 2}
    yield server
    server.stop()


@pytest.fixture
def sent_to_test_queue(monkeypatch):
    """The switch's jobs go to this test's queue, not to the session worker's."""

    def send(switch_id, countdown=None):
        current_app.send_task(SWITCH_TASK, args=[switch_id], queue=QUEUE, countdown=countdown)

    monkeypatch.setattr(switching, "_job_send", send)


def unacked_forget(task: str) -> None:
    """Forget the killed worker's unacknowledged message of ``task``, as the broker
    would after its visibility timeout (an hour): the later tests wait for a quiet
    broker (tests/races/harness.py). The sweep, not the redelivery, resumes the switch."""
    broker = redis.Redis.from_url(settings.REDIS_URL)
    for tag, message in broker.hgetall("unacked").items():
        if task.encode() in message:
            broker.hdel("unacked", tag)
            broker.zrem("unacked_index", tag)


def worker_env(server: EmbeddingServer) -> dict[str, str]:
    return {
        "EMBEDDING_API_URL": server.base_url,
        "EMBEDDING_API_MODEL": "stub-embedder",
        "EMBEDDING_API_DIMENSION": "32",
        "EMBEDDING_SWITCH_BATCH": "2",
    }


def test_a_worker_killed_mid_switch_is_resumed_by_another(
    owner, endpoint, sent_to_test_queue, monkeypatch
):
    items = [
        {"content": f"Memory number {n}: I like item {n}.", "user": "alice"}
        for n in range(MEMORIES)
    ]
    assert batch(owner, items, format="json").status_code in (200, 201)
    embed_pending()

    with worker_running(queues=[QUEUE], env=worker_env(endpoint)) as first:
        response = owner.client.post(
            "/api/v1/embedding/switch/", {"model": "openai"}, format="json"
        )
        assert response.status_code == 202, response.content
        switch_id = response.json()["id"]
        wait_until(lambda: EmbeddingSwitch.objects.get(pk=switch_id).done >= 4, timeout=120)
        os.killpg(first.pid, signal.SIGKILL)
    unacked_forget(SWITCH_TASK)
    switch = EmbeddingSwitch.objects.get(pk=switch_id)
    assert switch.status == "running" and 4 <= switch.done < MEMORIES
    assert project_space_read(owner.project.pk).dimension == 384  # still serving the old
    shown = owner.client.get("/api/v1/embedding/").json()
    assert shown["model"] == "minilm-l6" and shown["switch"]["done"] == switch.done

    monkeypatch.setattr(switching, "STALLED_AFTER", timedelta(0))
    assert embedding_switch_sweep()["requeued"] == 1
    with worker_running(queues=[QUEUE], env=worker_env(endpoint)):
        wait_until(
            lambda: EmbeddingSwitch.objects.get(pk=switch_id).status != "running", timeout=120
        )
    switch = EmbeddingSwitch.objects.get(pk=switch_id)
    assert switch.status == "completed", switch.error
    assert switch.done == MEMORIES  # each memory embedded by the job once, across both
    memories = Memory.objects.filter(project=owner.project)
    assert Embedding.objects.filter(memory__in=memories, space=switch.target).count() == MEMORIES
    shown = owner.client.get("/api/v1/embedding/").json()
    assert shown["model"] == "openai" and shown["dimension"] == 32
    found = owner.client.post(
        "/api/v1/search/",
        {"query": "I like item 7", "user": "alice", "mode": "vector"},
        format="json",
    ).json()
    assert found["results"][0]["memory"]["content"] == "Memory number 7: I like item 7."
