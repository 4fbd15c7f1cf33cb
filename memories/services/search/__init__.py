"""Search: the ranking of a project's memories for a query, step by step.

Each step is a module: the filters (filters.py), the filtered set's size with the
query's words (count.py), the query's vector (query_embedding.py), keyword candidates
(keyword.py), neighbouring turns (neighbours.py; after the keyword step they come with
the vector step's statement, unless that runs in the lane, lane.py), vector candidates
(vector.py), the ranking (ranking.py, which describes the modes) and the loading of the
winners (loading.py). The ranking policy
is the project's search settings; the machine knobs are settings.RETRIEVAL.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from django.conf import settings

from memories.config import SearchSettings
from memories.models import EmbeddingSpace, Project
from memories.services.configuration import project_settings_get
from memories.services.search.count import Counted, filtered_count
from memories.services.search.filters import SearchFilters
from memories.services.search.keyword import keyword_candidates
from memories.services.search.lane import vector_lane_applies, vector_lane_submit
from memories.services.search.loading import SearchHit, ranking_facts_get, winners_load
from memories.services.search.neighbours import message_neighbours
from memories.services.search.query_embedding import QueryEmbedding, query_embedding_start
from memories.services.search.ranking import (
    CandidatePool,
    Ranked,
    SearchMode,
    candidates_rank,
    ranking_facts_wanted,
)
from memories.services.search.slots import slotted
from memories.services.search.vector import (
    VectorSignal,
    neighbours_and_distances,
    vector_signal_get,
)

__all__ = [
    "SearchFilters",
    "SearchHit",
    "SearchMode",
    "SearchResult",
    "candidate_limit",
    "memory_search",
    "search_extend",
]


@dataclass
class SearchResult:
    hits: list[SearchHit]
    mode: str
    timings_ms: dict[str, float]
    # the whole ranking the hits are the first of (search_extend reads on from it)
    ranked: list[Ranked] = field(default_factory=list, repr=False)


@slotted  # at most SEARCH_CONCURRENCY at once in a process (slots.py)
def memory_search(
    *,
    project: Project,
    query: str | None = None,
    embedding: list[float] | None = None,
    space: EmbeddingSpace | None = None,
    mode: str | None = None,
    filters: SearchFilters | None = None,
    k: int = 10,
    threshold: float | None = None,
    explain: bool = False,
    fields: tuple[str, ...] | None = None,
) -> SearchResult:
    """The k best memories of the project for a query text and/or a raw query vector
    (of ``space`` when the caller has it; default: the configured model's), in ``mode``
    (None: the project's default mode).

    ``similarity`` is the cosine similarity to the query vector clipped to 0..1;
    ``threshold`` drops memories less similar than that (memories not embedded yet,
    found by keyword, are kept). ``score`` is the mode's ranking score, adjusted.
    ``fields``: the only fields of the hits' memories loaded (None: all of them).
    """
    clock = time.perf_counter()
    policy = project_settings_get(project=project).search
    mode = mode or policy.default_mode
    filters = filters or SearchFilters()
    limit = candidate_limit(mode=mode, k=k, threshold=threshold)
    link_limit = linked_limit(k)
    timings: dict[str, float] = {}
    pool = CandidatePool()
    # started first, so the query is embedded while PostgreSQL runs the queries up to
    # the vector candidates
    started = None if mode == SearchMode.KEYWORD else query_embedding_start(query, embedding, space)
    keyword = bool(query) and mode != SearchMode.VECTOR
    with _timed(timings, "count"):  # BM25 and the choice of an exact vector scan need it
        counted = filtered_count(
            project=project, filters=filters, text=query if keyword else None
        )  # with the query's words: one statement
    size = counted.size
    lane = None
    if started is not None and keyword and vector_lane_applies(size):
        # the vector step on its own thread and connection meanwhile (lane.py)
        lane = vector_lane_submit(partial(
            _vector_signal, started=started, project=project, filters=filters, limit=limit,
            size=size, distance_ids=[], linked=set() if mode == SearchMode.AUTO else None,
            aggregate=policy.window_aggregate, timings=timings, link_limit=link_limit,
        ))  # fmt: skip
    # a vector step after the keyword step (not in the lane) reads the keyword
    # candidates' neighbouring turns in its own statement: one round trip less
    in_sequence = lane is None and started is not None
    if keyword and query:
        _keyword_signal(pool, project=project, query=query, filters=filters, limit=limit,
                        counted=counted, mode=mode, policy=policy, timings=timings,
                        link_limit=link_limit, neighbours=not in_sequence)  # fmt: skip
    if lane is not None and started is not None:
        _lane_join(lane, pool, started=started, project=project, filters=filters,
                   aggregate=policy.window_aggregate, timings=timings)  # fmt: skip
    elif started is not None:  # after the keyword step: its candidates' distances too
        with _timed(timings, "vector"):
            _vector_after_keyword(pool, started=started, project=project, filters=filters,
                                  limit=limit, size=size, mode=mode, policy=policy,
                                  timings=timings, link_limit=link_limit)  # fmt: skip
    with _timed(timings, "rank"):
        ranked = _ranked(pool, mode=mode, policy=policy, threshold=threshold, explain=explain)
    with _timed(timings, "load"):
        hits = winners_load(ranked, k, fields)
    timings["total"] = (time.perf_counter() - clock) * 1000
    return SearchResult(hits=hits, mode=mode, timings_ms=timings, ranked=ranked)


def search_extend(
    result: SearchResult, k: int, fields: tuple[str, ...] | None = None
) -> SearchResult:
    """``result`` grown to the first ``k`` hits of its ranking: the ones after its hits
    loaded, with only ``fields`` (a caller whose first hits were too few, without a
    second search: ``more`` in the timings). As many as the ranking holds: the
    candidates each signal proposed for the first search's k."""
    start = time.perf_counter()
    have = {hit.memory.pk for hit in result.hits}
    rest = [item for item in result.ranked if item.memory_id not in have]
    more = winners_load(rest, k - len(result.hits), fields) if k > len(result.hits) else []
    timings = {**result.timings_ms, "more": (time.perf_counter() - start) * 1000}
    return replace(result, hits=result.hits + more, timings_ms=timings)


def _keyword_signal(
    pool: CandidatePool,
    *,
    project: Project,
    query: str,
    filters: SearchFilters,
    limit: int,
    counted: Counted,
    mode: str,
    policy: SearchSettings,
    timings: dict[str, float],
    link_limit: int | None = None,
    neighbours: bool = True,
) -> None:
    """The keyword candidates into the pool and, in auto mode with ``neighbours``, the
    neighbouring turns of the first ``link_limit`` of them (None: all)."""
    with _timed(timings, "keyword"):
        pool.add_keyword(keyword_candidates(
            project=project, text=query, filters=filters, limit=limit,
            collection_size=counted.size, policy=policy, words=counted.words,
        ))  # fmt: skip
    if neighbours and mode == SearchMode.AUTO and pool.candidates:
        with _timed(timings, "neighbours"):
            first = pool.ids()[:link_limit]  # None: all
            pool.link(*message_neighbours(project=project, filters=filters, ids=first))


def _ranked(
    pool: CandidatePool,
    *,
    mode: str,
    policy: SearchSettings,
    threshold: float | None,
    explain: bool,
) -> list[Ranked]:
    """The pool ranked in ``mode``, with the candidates' ranking facts when the policy
    or ``explain`` reads them (loading.py)."""
    wanted = ranking_facts_wanted(policy=policy, explain=explain)
    facts = ranking_facts_get(pool.ids()) if wanted else {}
    return candidates_rank(
        pool, mode=mode, policy=policy, threshold=threshold, explain=explain, facts=facts
    )


def _vector_after_keyword(
    pool: CandidatePool,
    *,
    started: QueryEmbedding,
    project: Project,
    filters: SearchFilters,
    limit: int,
    size: int,
    mode: str,
    policy: SearchSettings,
    timings: dict[str, float],
    link_limit: int | None,
) -> None:
    """The vector step on the search's thread, after the keyword step: with the keyword
    candidates' distances and, in auto mode, the neighbouring turns of the first
    ``link_limit`` of them, in its statement."""
    auto = mode == SearchMode.AUTO
    pool.add_signal(_vector_signal(
        started=started, project=project, filters=filters, limit=limit, size=size,
        distance_ids=pool.unscored(), linked=pool.linked if auto else None,
        aggregate=policy.window_aggregate, timings=timings, link_limit=link_limit,
        link_ids=pool.ids()[:link_limit] if auto else [],
    ))  # fmt: skip


def _lane_join(
    lane: Future[tuple[VectorSignal, float]],
    pool: CandidatePool,
    *,
    started: QueryEmbedding,
    project: Project,
    filters: SearchFilters,
    aggregate: str,
    timings: dict[str, float],
) -> None:
    """The lane's vector candidates into the pool, then the cosine distances of the
    keyword candidates (and their neighbours) it did not find, in one statement."""
    signal, timings["vector"] = lane.result()
    pool.add_signal(signal)
    if unscored := pool.unscored():
        with _timed(timings, "distances"):
            around = neighbours_and_distances(
                project=project, filters=filters, space=started.space,
                query=started.wait({}), link_ids=[], distance_ids=unscored, aggregate=aggregate,
            )  # fmt: skip
        pool.add_vector([], links={}, distances=around.distances)


def _vector_signal(
    *,
    started: QueryEmbedding,
    project: Project,
    filters: SearchFilters,
    limit: int,
    size: int,
    distance_ids: list[Any],
    linked: set[Any] | None,
    aggregate: str,
    timings: dict[str, float],
    link_limit: int | None = None,
    link_ids: list[Any] | None = None,
) -> VectorSignal:
    """The vector step, once the query's vector is there (see vector_signal_get)."""
    query_vector = started.wait(timings)
    return vector_signal_get(
        project=project, space=started.space, query=query_vector, filters=filters,
        limit=limit, collection_size=size, distance_ids=distance_ids, linked=linked,
        aggregate=aggregate, link_limit=link_limit, link_ids=link_ids,
    )  # fmt: skip


def candidate_limit(*, mode: str, k: int, threshold: float | None) -> int:
    """How many candidates each signal proposes: fused modes, and a threshold that
    may drop rows, read more than k: CANDIDATE_MULTIPLIER candidates for each of the
    first CANDIDATE_MULTIPLIED_K results, one for each result past them."""
    if mode in SearchMode.FUSED or threshold is not None:
        retrieval = settings.RETRIEVAL
        head = min(k, int(retrieval["CANDIDATE_MULTIPLIED_K"]))
        return k + head * max(int(retrieval["CANDIDATE_MULTIPLIER"]) - 1, 0)
    return k


def linked_limit(k: int) -> int | None:
    """How many of each signal's first candidates get their neighbouring turns looked
    up (auto mode): k + RETRIEVAL_LINKED_BEYOND_K (None, all of them, when that is
    negative)."""
    beyond = int(settings.RETRIEVAL["LINKED_BEYOND_K"])
    return None if beyond < 0 else k + beyond


@contextmanager
def _timed(timings: dict[str, float], step: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    timings[step] = (time.perf_counter() - start) * 1000
