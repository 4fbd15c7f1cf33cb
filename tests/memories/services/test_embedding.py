"""The embedding service: claiming with SKIP LOCKED, the content-hash cache, re-runs,
updates, concurrent batches and the dimension check."""

import json
import threading

import numpy as np
import pytest
from django.db import connection

from memories.models import Embedding, EmbeddingSpace, Memory
from memories.providers.embeddings import EmbeddingDimensionMismatch, HashingEmbeddingProvider
from memories.services import embedding as pipeline
from memories.services.embedding import (
    embedding_process_batch,
    embedding_run,
    embedding_space_get,
)
from tests.memories.conftest import CountingProvider, pending, vector_of


def test_run_embeds_every_pending_memory_in_batches(owner, provider):
    memories = pending(owner, *[f"memory number {n}" for n in range(7)])
    batches = []
    assert embedding_run(batch_size=3, progress=batches.append) == 7
    assert batches == [3, 3, 1]
    space = EmbeddingSpace.objects.get(provider="hashing", model="pipeline-test")
    for memory in memories:
        memory.refresh_from_db()
        assert memory.embedding_status == "done"
        assert memory.embedded_at is not None
        expected = provider._inner.embed([memory.content])[0]
        assert np.allclose(vector_of(memory), expected, atol=1e-6)
        assert Embedding.objects.get(memory=memory).space == space


def test_a_text_already_embedded_is_not_embedded_again(owner, provider):
    pending(owner, "I like tea", "I like coffee", "I like tea")
    embedding_run()
    assert sorted(provider.texts) == ["I like coffee", "I like tea"]  # one call per text
    pending(owner, "I  like tea", "Something new")  # the same text, spaced differently
    embedding_run()
    assert sorted(provider.texts) == ["I like coffee", "I like tea", "Something new"]
    vectors = [vector_of(m) for m in Memory.objects.filter(content__contains="tea")]
    assert len(vectors) == 3
    assert all(np.allclose(v, vectors[0]) for v in vectors)


def test_a_time_boxed_run_stops_and_queues_the_rest(owner, provider, redis_client):
    pending(owner, "one", "two", "three")
    redis_client.delete(pipeline.QUEUED_FLAG)
    redis_client.delete("default")  # the Celery queue
    done = pipeline.embedding_run(batch_size=1, max_seconds=0)
    assert done == 1
    assert Memory.objects.pending_embedding().count() == 2
    # a follow-up task waits in the queue for the two left
    assert redis_client.get(pipeline.QUEUED_FLAG) == b"1"
    assert redis_client.llen("default") == 1
    message = json.loads(redis_client.lindex("default", 0))
    assert message["headers"]["task"] == "memories.tasks.embedding_run_task"
    assert pipeline.embedding_run(batch_size=1) == 2  # without a limit: drains everything


def test_a_second_run_does_nothing(owner, provider):
    pending(owner, "one", "two")
    assert embedding_run() == 2
    calls = len(provider.calls)
    assert embedding_run() == 0
    assert len(provider.calls) == calls
    assert Embedding.objects.count() == 2


def test_a_memory_marked_pending_again_is_not_duplicated(owner, provider):
    [memory] = pending(owner, "one")
    embedding_run()
    Memory.objects.filter(pk=memory.pk).update(embedding_status="pending")  # e.g. redelivered
    assert embedding_run() == 1
    assert Embedding.objects.filter(memory=memory).count() == 1
    memory.refresh_from_db()
    assert memory.embedding_status == "done"


def test_an_update_is_embedded_again(owner, provider):
    response = owner.client.post("/api/v1/memories/", {"content": "Lives in Paris"})
    memory_id = response.json()["memory"]["id"]
    embedding_run()
    before = vector_of(memory_id)

    owner.client.patch(f"/api/v1/memories/{memory_id}/", {"content": "Moved to Berlin"})
    assert Memory.objects.get(pk=memory_id).embedding_status == "pending"
    assert embedding_run() == 1
    assert provider.calls[-1] == ["Moved to Berlin"]
    after = vector_of(memory_id)
    assert not np.allclose(before, after)
    assert np.allclose(after, provider._inner.embed(["Moved to Berlin"])[0], atol=1e-6)
    assert owner.client.get(f"/api/v1/memories/{memory_id}/").json()["embedding_status"] == "done"


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_claim_different_memories(owner, provider):
    """A batch whose claim is still open (its rows locked) is skipped by the next one."""
    pending(owner, *[f"memory {n:02d}" for n in range(20)])
    space = embedding_space_get(provider=provider)
    claimed, release = threading.Event(), threading.Event()
    slow = CountingProvider()
    errors = []

    def embed_slowly(texts):
        vectors = CountingProvider.embed(slow, texts)
        claimed.set()
        release.wait(timeout=30)
        return vectors

    slow.embed = embed_slowly

    def first_worker():
        try:
            embedding_process_batch(space=space, provider=slow, size=5)
        except Exception as exc:  # noqa: BLE001 - reported to the test below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=first_worker)
    thread.start()
    try:
        assert claimed.wait(timeout=30), "the first batch never started embedding"
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '5s'")  # waiting on the lock would fail here
        try:
            assert embedding_process_batch(space=space, provider=provider, size=100) == 15
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
    finally:
        release.set()
        thread.join(timeout=30)
    assert not errors
    assert len(slow.texts) == 5
    assert len(provider.texts) == 15
    assert not set(slow.texts) & set(provider.texts)
    assert not Memory.objects.filter(embedding_status="pending").exists()
    assert Embedding.objects.count() == 20


class TestDimensionCheck:
    def test_a_space_refuses_a_model_of_another_dimension(self, db):
        EmbeddingSpace.objects.create(provider="hashing", model="resized", dimension=64)
        with pytest.raises(EmbeddingDimensionMismatch) as error:
            embedding_space_get(provider=HashingEmbeddingProvider("resized", 32))
        message = str(error.value)
        assert "64" in message and "32" in message
        assert "EMBEDDING_DIMENSION" in message
        assert error.value.retryable is False

    def test_the_worker_refuses_to_start(self, db, settings):
        EmbeddingSpace.objects.create(provider="hashing", model="resized", dimension=64)
        settings.EMBEDDING = {
            **settings.EMBEDDING,
            "PROVIDER": "hashing",
            "MODEL": "resized",
            "DIMENSION": 32,
        }
        with pytest.raises(EmbeddingDimensionMismatch):
            pipeline.embedding_model_check()

    def test_a_search_says_what_is_wrong(self, owner, settings):
        EmbeddingSpace.objects.create(provider="hashing", model="resized", dimension=64)
        settings.EMBEDDING = {
            **settings.EMBEDDING,
            "PROVIDER": "hashing",
            "MODEL": "resized",
            "DIMENSION": 32,
        }
        response = owner.client.post("/api/v1/search/", {"query": "tea", "mode": "vector"})
        assert response.status_code == 500
        assert "64-dimensional" in response.json()["detail"]
