"""Embedding lanes (EMBEDDING_LANES): a worker's claims run on several threads at
once, each on its own connection, and every memory is still embedded exactly once."""

import threading

import pytest

from memories.models import Embedding, Memory
from memories.services import embedding as pipeline
from memories.services.embedding import embedding_run
from tests.conftest import Tenant
from tests.memories.conftest import pending


@pytest.fixture
def lanes(settings, monkeypatch):
    """Three lanes; returns the names of the threads that claimed batches."""
    settings.EMBEDDING = {**settings.EMBEDDING, "LANES": 3}
    names: set[str] = set()
    claim = pipeline.embedding_process_batch

    def recording(**kwargs):
        names.add(threading.current_thread().name)
        return claim(**kwargs)

    monkeypatch.setattr(pipeline, "embedding_process_batch", recording)
    return names


def test_lanes_embed_every_memory_once_on_threads_of_their_own(
    transactional_db, provider, lanes
) -> None:
    tenant = Tenant("lanes")  # committed: the lanes' own connections see the rows
    memories = pending(tenant, *[f"memory number {n}" for n in range(60)])
    counted: list[int] = []
    assert embedding_run(batch_size=4, progress=counted.append) == 60
    assert sum(counted) == 60
    assert Memory.objects.filter(embedding_status="done").count() == 60
    assert Embedding.objects.count() == 60  # one window each, none written twice
    assert sorted(provider.texts) == sorted(memory.content for memory in memories)
    assert "MainThread" in lanes
    assert len([name for name in lanes if name.startswith("embedding-lane")]) == 2


def test_inside_a_transaction_one_lane_runs_in_it(owner, provider, lanes) -> None:
    # the test's rows are not committed: another connection would find nothing
    pending(owner, *[f"memory number {n}" for n in range(10)])
    assert embedding_run(batch_size=4) == 10
    assert lanes == {"MainThread"}
    assert Memory.objects.filter(embedding_status="done").count() == 10
