"""A memory that keeps an embedding run from finishing is set aside, not claimed in a loop:
after an interrupted run the head of the queue is embedded one memory at a time, and
one that failed PARKING_ATTEMPTS times gets embedding status failed and is parked; it
stays stored and found by keyword, the backfill leaves it out, a retry makes it pending
(memories/services/embedding_isolation.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
import redis
from django.contrib.postgres.search import SearchQuery

from memories import tasks as memory_tasks
from memories.models import SEARCH_CONFIG, Memory, ParkedTask, content_hash
from memories.providers.embeddings import EmbeddingError
from memories.services import embedding_isolation, embedding_spaces
from memories.services.embedding import EMBEDDING_RUN_TASK, embedding_pending_count
from memories.services.embedding_isolation import (
    embedding_failed_retry,
    embedding_isolate,
    embedding_isolation_due,
    embedding_isolation_request,
)
from memories.services.task_attempts import PREFIX
from memories.task_guard import Interruption
from tests.memories.conftest import CountingProvider

POISON = "a text this provider cannot take"


class PoisonedProvider(CountingProvider):
    def embed(self, texts: list[str]) -> np.ndarray:
        if POISON in texts:
            raise ValueError("the tokenizer broke on it")
        return super().embed(texts)


@pytest.fixture
def poisoned(
    monkeypatch: pytest.MonkeyPatch, redis_client: redis.Redis
) -> Iterator[PoisonedProvider]:
    for key in [*redis_client.scan_iter(f"{PREFIX}*"), embedding_isolation.ISOLATE_FLAG]:
        redis_client.delete(key)
    provider = PoisonedProvider()
    monkeypatch.setattr(embedding_spaces, "get_provider", lambda: provider)
    yield provider
    redis_client.delete(embedding_isolation.ISOLATE_FLAG)


def messages(project, *texts: str) -> list[Memory]:
    return Memory.objects.bulk_create(
        Memory(project=project, role="user", content=t, content_hash=content_hash(t)) for t in texts
    )


def test_a_memory_that_keeps_failing_is_parked_and_the_others_embedded(owner, poisoned, settings):
    settings.PARKING_ATTEMPTS = 3
    good, poison, later = messages(owner.project, "first words", POISON, "later words")
    embedding_isolation_request()
    assert embedding_isolation_due()
    for attempt in range(1, 4):
        done, finished = embedding_isolate(max_seconds=60)
        if attempt < 3:  # failed, not parked yet: the next run isolates it again
            assert not finished and embedding_isolation_due()
        else:
            assert finished and not embedding_isolation_due()
        assert done == (2 if attempt == 1 else 0)
        poison.refresh_from_db()
        assert poison.embedding_status == ("failed" if attempt == 3 else "pending")
    good.refresh_from_db(), later.refresh_from_db()
    assert good.embedding_status == later.embedding_status == "done"
    parked = ParkedTask.objects.get()
    assert (parked.task, parked.input_kind, parked.input_ids) == (
        EMBEDDING_RUN_TASK,
        "memory",
        [str(poison.pk)],
    )
    assert (parked.reason, parked.attempts, parked.kwargs) == (
        "failed",
        3,
        {"memory_ids": [str(poison.pk)]},
    )
    assert parked.project == owner.project
    assert "the tokenizer broke on it" in parked.last_error
    # nothing lost: stored, found by keyword; the backfill does not take it again
    assert embedding_pending_count() == 0
    found = SearchQuery("provider", config=SEARCH_CONFIG)
    assert Memory.objects.filter(pk=poison.pk, status="active", search_vector=found).exists()

    assert embedding_failed_retry(memory_ids=[poison.pk]) == 1
    poison.refresh_from_db()
    assert poison.embedding_status == "pending"


def test_a_provider_that_fails_parks_no_memory(owner, poisoned, monkeypatch, settings):
    settings.PARKING_ATTEMPTS = 1

    def down(texts: list[str]) -> np.ndarray:
        raise EmbeddingError("the endpoint is down", retryable=True)

    monkeypatch.setattr(poisoned, "embed", down)
    [memory] = messages(owner.project, "anything")
    for _ in range(3):
        with pytest.raises(EmbeddingError):
            embedding_isolate(max_seconds=60)
    memory.refresh_from_db()
    assert memory.embedding_status == "pending"
    assert not ParkedTask.objects.exists()


def test_a_worker_dying_on_a_memory_parks_it(owner, poisoned, settings):
    settings.PARKING_ATTEMPTS = 2
    [memory] = messages(owner.project, "words")
    key = embedding_isolation._memory_key(memory.pk)
    for _ in range(2):
        embedding_isolation.task_attempts.attempt_begin(key=key)  # began, and its process died
    assert embedding_isolate(max_seconds=60) == (0, True)
    memory.refresh_from_db()
    assert memory.embedding_status == "failed"
    assert ParkedTask.objects.get().reason == "worker lost"


def test_an_interrupted_run_has_the_next_isolate_first(
    owner, poisoned, monkeypatch, redis_client
) -> None:
    monkeypatch.setattr(embedding_spaces, "get_provider", lambda: poisoned)
    follow_ups: list[bool] = []
    monkeypatch.setattr(memory_tasks, "embedding_enqueue", lambda: follow_ups.append(True))
    good, poison = messages(owner.project, "some words", POISON)
    interrupted = Interruption("t1", (), {}, "time limit", "soft time limit (120 s)")
    memory_tasks._embedding_interrupted(interrupted)
    assert embedding_isolation_due()
    memory_tasks._embedding_run()  # the head one at a time; the poison not claimed again
    good.refresh_from_db(), poison.refresh_from_db()
    assert (good.embedding_status, poison.embedding_status) == ("done", "pending")
    assert embedding_isolation_due() and follow_ups  # a next run isolates the poison again

    redis_client.delete(embedding_isolation.ISOLATE_FLAG)
    down = EmbeddingError("the endpoint is down", retryable=True)
    memory_tasks._embedding_interrupted(replace(interrupted, exception=down))
    assert not embedding_isolation_due()  # the provider's failure: no memory's doing
