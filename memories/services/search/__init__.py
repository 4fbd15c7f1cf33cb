"""Search: the ranking of a project's memories for a query, step by step.

Each step is a module: the filters (filters.py), the filtered set's size with the
query's words (count.py), the query's vector (query_embedding.py), keyword candidates
(keyword.py), neighbouring turns (neighbours.py; after the keyword step they come with
the vector step's statement, unless that runs in the lane, lane.py), vector candidates
(vector.py chooses the scan: exact.py, compact.py or hnsw.py; signal.py says what a scan
is asked and gives), the ranking (ranking.py, which describes the modes), the time
path when the query names a time (time_path.py, time_range.py) and the loading of the
winners (loading.py). The ranking policy is the project's search
settings; the machine knobs are settings.RETRIEVAL.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np
from django.conf import settings

from memories.config import SearchSettings
from memories.models import EmbeddingSpace, Project
from memories.services.configuration import project_settings_get
from memories.services.search.count import filtered_count
from memories.services.search.exact import neighbours_and_distances
from memories.services.search.filters import SearchFilters
from memories.services.search.keyword import QueryWords, keyword_candidates
from memories.services.search.lane import vector_lane_applies, vector_lane_submit
from memories.services.search.loading import (
    SearchHit,
    SourcesWithin,
    ranking_facts_get,
    winners_load,
)
from memories.services.search.neighbours import message_neighbours
from memories.services.search.query_embedding import QueryEmbedding, query_embedding_start
from memories.services.search.ranking import (
    CandidatePool,
    Ranked,
    SearchMode,
    candidates_rank,
    ranking_facts_wanted,
)
from memories.services.search.signal import VectorRequest, VectorSignal
from memories.services.search.slots import slotted
from memories.services.search.time_path import range_filters, time_fused, time_range_wanted
from memories.services.search.vector import vector_signal_get

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


@dataclass(frozen=True, slots=True)
class _Search:
    """What the steps of one search read: whose memories, which (the filters, a set of
    ``size`` rows), ranked how (``mode``, the project's ``policy``), how many candidates
    each signal proposes (``limit``) and how many of its first get their neighbouring
    turns looked up (``link_limit``, None: all); each step records its milliseconds in
    ``timings``."""

    project: Project
    filters: SearchFilters
    mode: str
    policy: SearchSettings
    limit: int
    link_limit: int | None
    size: int
    timings: dict[str, float]


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
    now: datetime | None = None,
) -> SearchResult:
    """The k best memories of the project for a query text and/or a raw query vector (of
    ``space``; default: the project's), in ``mode`` (None: the project's default). A hit's
    ``similarity`` is its cosine to the query clipped to 0..1, below ``threshold`` dropped
    (not yet embedded: kept); ``fields``: the only fields loaded (None: all); ``now``: what
    "last year" or "in June" is read against (default: now; time_path.py)."""
    clock = time.perf_counter()
    policy = project_settings_get(project=project).search
    mode = mode or policy.default_mode
    filters = filters or SearchFilters()
    timings: dict[str, float] = {}
    # started first: the query is embedded while PostgreSQL runs the steps before
    keyword = mode == SearchMode.KEYWORD
    started = None if keyword else query_embedding_start(query, embedding, space, project=project)
    text = query if query and mode != SearchMode.VECTOR else None  # for the keyword step
    with _timed(timings, "count"):  # for BM25 and the vector scan; with the query's words
        counted = filtered_count(project=project, filters=filters, text=text)
    search = _Search(
        project=project,
        filters=filters,
        mode=mode,
        policy=policy,
        limit=candidate_limit(mode=mode, k=k, threshold=threshold),
        link_limit=linked_limit(k),
        size=counted.size,
        timings=timings,
    )
    pool = _signals(search, started=started, text=text, words=counted.words)
    with _timed(timings, "rank"):
        ranked = _ranked(pool, mode=mode, policy=policy, threshold=threshold, explain=explain)
    ranked = _time_raised(ranked, search, _Asked(query, now, started, text, threshold, explain))
    with _timed(timings, "load"):
        hits = winners_load(ranked, k, fields, SourcesWithin(project, filters))
    timings["total"] = (time.perf_counter() - clock) * 1000
    return SearchResult(hits=hits, mode=mode, timings_ms=timings, ranked=ranked)


@dataclass(frozen=True)
class _Asked:
    """What the query asked, for the time path: its text and time, its embedding
    started, the keyword step's text, the threshold and whether to explain."""

    query: str | None
    now: datetime | None
    started: QueryEmbedding | None
    text: str | None
    threshold: float | None
    explain: bool


def _time_raised(ranked: list[Ranked], search: _Search, asked: _Asked) -> list[Ranked]:
    """``ranked`` fused with the ranking of the memories of the time the query names, if
    it names one (time_path.py): the same signals over the filters narrowed to the range."""
    policy = search.policy
    window = time_range_wanted(
        query=asked.query,
        mode=search.mode,
        filters=search.filters,
        weight=policy.time_weight,
        now=asked.now,
    )
    if window is None:
        return ranked
    with _timed(search.timings, "time"):
        filters = range_filters(search.filters, window)
        counted = filtered_count(project=search.project, filters=filters, text=asked.text)
        if not counted.size:
            return ranked
        within = replace(search, filters=filters, size=counted.size, timings={})
        pool = _signals(within, started=asked.started, text=asked.text, words=counted.words)
        in_range = _ranked(
            pool, mode=search.mode, policy=policy, threshold=asked.threshold, explain=asked.explain
        )
        return time_fused(
            ranked, in_range, window=window, weight=policy.time_weight, explain=asked.explain
        )


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


def _signals(
    search: _Search,
    *,
    started: QueryEmbedding | None,
    text: str | None,
    words: QueryWords | None,
) -> CandidatePool:
    """Every signal's candidates in one pool: the keyword step's for a ``text`` (with
    its ``words``, count.py), the vector step's once the query's vector (``started``)
    is there, and in auto mode the neighbouring turns of the first of them."""
    pool = CandidatePool()
    lane = None
    if started is not None and text and vector_lane_applies(search.size):
        # the vector step on its own thread and connection meanwhile (lane.py)
        linked: set[Any] | None = set() if search.mode == SearchMode.AUTO else None
        lane = vector_lane_submit(
            partial(_vector_signal, search, started, distance_ids=[], linked=linked)
        )
    # a vector step after the keyword step (not in the lane) reads the keyword
    # candidates' neighbouring turns in its own statement: one round trip less
    in_sequence = lane is None and started is not None
    if text:
        _keyword_signal(pool, search, text=text, words=words, neighbours=not in_sequence)
    if lane is not None and started is not None:
        _lane_join(lane, pool, search, started)
    elif started is not None:  # after the keyword step: its candidates' distances too
        with _timed(search.timings, "vector"):
            _vector_after_keyword(pool, search, started)
    return pool


def _keyword_signal(
    pool: CandidatePool,
    search: _Search,
    *,
    text: str,
    words: QueryWords | None,
    neighbours: bool = True,
) -> None:
    """The keyword candidates into the pool and, in auto mode with ``neighbours``, the
    neighbouring turns of the first ``link_limit`` of them (None: all)."""
    with _timed(search.timings, "keyword"):
        found = keyword_candidates(
            project=search.project,
            text=text,
            filters=search.filters,
            limit=search.limit,
            collection_size=search.size,
            policy=search.policy,
            words=words,
        )
        pool.add_keyword(found)
    if neighbours and search.mode == SearchMode.AUTO and pool.candidates:
        with _timed(search.timings, "neighbours"):
            first = pool.ids()[: search.link_limit]  # None: all
            pool.link(
                *message_neighbours(project=search.project, filters=search.filters, ids=first)
            )


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


def _vector_after_keyword(pool: CandidatePool, search: _Search, started: QueryEmbedding) -> None:
    """The vector step on the search's thread, after the keyword step: with the keyword
    candidates' distances and, in auto mode, the neighbouring turns of the first
    ``link_limit`` of them, in its statement."""
    auto = search.mode == SearchMode.AUTO
    signal = _vector_signal(
        search,
        started,
        distance_ids=pool.unscored(),
        linked=pool.linked if auto else None,
        link_ids=pool.ids()[: search.link_limit] if auto else [],
    )
    pool.add_signal(signal)


def _lane_join(
    lane: Future[tuple[VectorSignal, float]],
    pool: CandidatePool,
    search: _Search,
    started: QueryEmbedding,
) -> None:
    """The lane's vector candidates into the pool, then the cosine distances of the
    keyword candidates (and their neighbours) it did not find, in one statement."""
    signal, search.timings["vector"] = lane.result()
    pool.add_signal(signal)
    if unscored := pool.unscored():
        with _timed(search.timings, "distances"):
            request = _vector_request(search, started, started.wait({}), distance_ids=unscored)
            around = neighbours_and_distances(request)
        pool.add_vector([], links={}, distances=around.distances)


def _vector_signal(
    search: _Search,
    started: QueryEmbedding,
    *,
    distance_ids: list[Any],
    linked: set[Any] | None,
    link_ids: list[Any] | None = None,
) -> VectorSignal:
    """The vector step, once the query's vector is there (see vector_signal_get)."""
    query_vector = started.wait(search.timings)
    return vector_signal_get(
        _vector_request(
            search,
            started,
            query_vector,
            distance_ids=distance_ids,
            linked=linked,
            link_ids=link_ids,
        )
    )


def _vector_request(
    search: _Search,
    started: QueryEmbedding,
    query_vector: np.ndarray,
    *,
    distance_ids: list[Any],
    linked: set[Any] | None = None,
    link_ids: list[Any] | None = None,
) -> VectorRequest:
    """The search's request to a vector step (VectorRequest)."""
    return VectorRequest(
        project=search.project,
        space=started.space,
        query=query_vector,
        filters=search.filters,
        limit=search.limit,
        size=search.size,
        linked=linked,
        distance_ids=distance_ids,
        aggregate=search.policy.window_aggregate,
        link_limit=search.link_limit,
        link_ids=link_ids or [],
    )


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
