"""Searches run below writes' priority (memories.providers.threads): on threads of
their own, SEARCH_NICE nice levels down, unless inside a transaction or turned off."""

import os
import sys
import threading

import numpy as np
import pytest

import memories.services.search as search_package
from memories.models import EndUser, Memory, content_hash
from memories.providers.embeddings import QueryEmbeddingCache
from memories.providers.threads import EMBEDDING_BELOW_SEARCH, StepThreads
from memories.services.search import SearchFilters, memory_search

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="nice levels per thread: Linux")


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def _memory(project, user, content):
    return Memory.objects.create(
        project=project, end_user=user, content=content, content_hash=content_hash(content)
    )


@pytest.fixture
def recorded_threads(monkeypatch):
    """The name and nice level of the thread each search counted its candidates on."""
    seen: list[tuple[str, int]] = []
    count = search_package.filtered_count

    def recorded(**kwargs):
        seen.append((threading.current_thread().name, _nice()))
        return count(**kwargs)

    monkeypatch.setattr(search_package, "filtered_count", recorded)
    return seen


def test_a_step_runs_lowered_on_its_own_thread_and_connection(settings, db):
    settings.SEARCH_NICE = 4
    threads = StepThreads("probe", lambda: 1)
    try:
        step = threads.submit(lambda: (threading.current_thread().name, _nice()))
        (name, nice), _ = step.result(5)
    finally:
        threads.close()

    assert name == "probe-0"
    assert nice == min(19, _nice() + 4)  # this thread is where it was


def test_a_lowered_thread_started_by_a_lowered_thread_is_not_lowered_twice(settings, db):
    # a search's thread starts the vector lane's and the query embedding's: they inherit
    # its level, and lowering them again would put them at the bottom
    settings.SEARCH_NICE = 4
    outer, inner = StepThreads("outer", lambda: 1), StepThreads("inner", lambda: 1)
    try:
        step = outer.submit(lambda: inner.submit(_nice).result(5)[0])
        nice, _ = step.result(5)
    finally:
        inner.close()
        outer.close()

    assert nice == min(19, _nice() + 4)


def test_the_query_embedding_runs_below_the_searches_threads(settings):
    """EMBEDDING_BELOW_SEARCH levels below a search's thread, however it is started."""
    settings.SEARCH_NICE = 4

    class Recording:
        name, model = "recording", "levels"
        levels: list[int] = []

        def embed(self, texts):
            self.levels.append(_nice())
            return np.zeros((len(texts), 3), dtype=np.float32)

    cache, provider = QueryEmbeddingCache(), Recording()
    outer = StepThreads("outer", lambda: 1)
    try:
        outer.submit(lambda: cache.submit(provider, "where is the ferry").result(5)).result(5)
        cache.submit(provider, "and the weather").result(5)  # from this thread, as tests do
    finally:
        outer.close()
    assert provider.levels == [min(19, _nice() + 4 + EMBEDDING_BELOW_SEARCH)] * 2


def test_a_failing_step_raises_in_the_submitting_thread(settings, db):
    threads = StepThreads("probe", lambda: 1)
    try:
        with pytest.raises(ZeroDivisionError):
            threads.submit(lambda: 1 / 0).result(5)
        assert threads.submit(lambda: "next").result(5)[0] == "next"  # the thread lives on
    finally:
        threads.close()


@pytest.mark.django_db(transaction=True)
def test_a_search_outside_a_transaction_runs_on_a_lowered_search_thread(
    owner, settings, recorded_threads
):
    settings.SEARCH_NICE, settings.SEARCH_CONCURRENCY = 10, 1
    alice = EndUser.objects.create(project=owner.project, external_id="alice")
    _memory(owner.project, alice, "Piano lessons on Monday")
    result = memory_search(
        project=owner.project, query="piano", mode="keyword",
        filters=SearchFilters(end_user_id=alice.pk),
    )  # fmt: skip

    assert [hit.memory.content for hit in result.hits] == ["Piano lessons on Monday"]
    assert recorded_threads == [("search-0", min(19, _nice() + 10))]
    assert "search_wait" in result.timings_ms


def test_inside_a_transaction_a_search_stays_on_its_thread_and_sees_its_rows(
    owner, settings, recorded_threads
):
    settings.SEARCH_NICE = 10
    alice = EndUser.objects.create(project=owner.project, external_id="alice")
    _memory(owner.project, alice, "Cello in the quartet")  # not committed: the test's transaction
    result = memory_search(project=owner.project, query="cello", mode="keyword")

    assert [hit.memory.content for hit in result.hits] == ["Cello in the quartet"]
    assert recorded_threads == [(threading.current_thread().name, _nice())]


@pytest.mark.django_db(transaction=True)
def test_with_no_nice_a_search_runs_on_the_requests_thread(owner, settings, recorded_threads):
    settings.SEARCH_NICE = 0
    memory_search(project=owner.project, query="anything", mode="keyword")

    assert recorded_threads == [(threading.current_thread().name, _nice())]
