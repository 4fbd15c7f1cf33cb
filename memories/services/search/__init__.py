"""Search: the ranking of memories for a query.

Modes: ``vector`` (cosine over pgvector), ``keyword`` (BM25 over PostgreSQL full
text), ``hybrid`` (reciprocal rank fusion, k = 60, over the union of both candidate
lists) and ``auto``, the default: BM25 and cosine scores normalized and averaged,
then each conversation turn raised by the scores of the turns just before and after
it in its room. Every mode is then adjusted by recency and importance (weights in
settings.RETRIEVAL, 0 by default). On LoCoMo (BENCHMARKS.md) auto finds clearly
more evidence than either signal or RRF.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.utils import timezone

from memories.embeddings import cosine_similarity, get_provider, query_cache
from memories.models import EmbeddingSpace, Memory, Project
from memories.services.embedding import embedding_space_get
from memories.services.search.candidates import (
    SearchFilters,
    collection_size_get,
    exact_scan,
    exact_vector_candidates,
    keyword_candidates,
    message_neighbours,
    neighbours_and_distances,
    vector_candidates,
)

__all__ = ["SearchFilters", "SearchHit", "SearchMode", "SearchResult", "memory_search"]


class SearchMode:
    VECTOR = "vector"
    KEYWORD = "keyword"
    HYBRID = "hybrid"
    AUTO = "auto"
    ALL = (AUTO, VECTOR, KEYWORD, HYBRID)
    FUSED = (HYBRID, AUTO)


@dataclass
class SearchHit:
    memory: Memory
    score: float
    similarity: float | None
    explain: dict[str, Any]


@dataclass
class SearchResult:
    hits: list[SearchHit]
    mode: str
    timings_ms: dict[str, float]


@dataclass
class _Candidate:
    memory_id: Any
    vector_rank: int | None = None
    distance: float | None = None
    keyword_rank: int | None = None
    keyword_score: float | None = None
    neighbours: list[Any] = field(default_factory=list)


def _recency(created_at: datetime, now: datetime) -> float:
    half_life = settings.RETRIEVAL["RECENCY_HALF_LIFE_DAYS"] * 86400
    age = max(0.0, (now - created_at).total_seconds())
    return math.pow(0.5, age / half_life) if half_life > 0 else 0.0


def memory_search(
    *,
    project: Project,
    query: str | None = None,
    embedding: list[float] | None = None,
    mode: str = SearchMode.AUTO,
    filters: SearchFilters | None = None,
    k: int = 10,
    threshold: float | None = None,
    explain: bool = False,
) -> SearchResult:
    """The k best memories of the project for a query text and/or a raw query vector.

    ``similarity`` is the cosine similarity to the query vector clipped to 0..1;
    ``threshold`` drops memories less similar than that (memories not embedded yet,
    found by keyword, are kept). ``score`` is the mode's ranking score, adjusted.
    """
    search = _Search(project, filters or SearchFilters(), mode, k, threshold)
    search.start(query, embedding)
    if query and mode != SearchMode.VECTOR:
        search.keyword(query)  # while the query is being embedded
    search.vector()
    hits = _rank(search.candidates, mode=mode, k=k, threshold=threshold, explain=explain)
    search.timings["total"] = (time.perf_counter() - search.clock) * 1000
    return SearchResult(hits=hits, mode=mode, timings_ms=search.timings)


class _Search:
    """The candidate-gathering steps of one search, in the order that hides the query
    embedding: the keyword query, the filtered count and the keyword candidates'
    neighbours run in PostgreSQL while a background thread embeds the query."""

    def __init__(
        self, project: Project, filters: SearchFilters, mode: str, k: int, threshold: float | None
    ) -> None:
        self.project, self.filters, self.mode = project, filters, mode
        self.clock = time.perf_counter()
        self.timings: dict[str, float] = {}
        self.candidates: dict[Any, _Candidate] = {}
        # fused modes, and a threshold that may drop rows, read more candidates than k
        wide = mode in SearchMode.FUSED or threshold is not None
        self.limit = int(max(k * settings.RETRIEVAL["CANDIDATE_MULTIPLIER"], k)) if wide else k
        self.space: EmbeddingSpace | None = None
        self.pending: Future[np.ndarray] | None = None
        self.size: int | None = None  # the filtered set's size (see collection_size_get)
        self.linked: set[Any] = set()
        self.submitted: float | None = None  # when the query went to be embedded
        self.embedded: list[float] = []  # when its vector was ready

    def start(self, query: str | None, embedding: list[float] | None) -> None:
        if self.mode == SearchMode.KEYWORD or (embedding is None and not query):
            return
        provider = get_provider()
        if embedding is not None:
            self.pending = Future()
            self.pending.set_result(np.asarray(embedding, dtype=np.float32))
        else:
            self.submitted = time.perf_counter()
            self.pending = query_cache.submit(provider, query or "")
            self.pending.add_done_callback(lambda _: self.embedded.append(time.perf_counter()))
        self.space = embedding_space_get(provider=provider)
        # exact up to the keyword query's budget, past it the planner's estimate, which
        # is close enough to choose between an exact scan and the index
        self.size = collection_size_get(
            self.project, self.filters, settings.RETRIEVAL["KEYWORD_MAX_MATCHES"]
        )

    def keyword(self, query: str) -> None:
        start = time.perf_counter()
        found = keyword_candidates(
            project=self.project, text=query, filters=self.filters, limit=self.limit,
            collection_size=self.size,
        )  # fmt: skip
        for rank, (memory_id, score) in enumerate(found, start=1):
            candidate = self.candidates.setdefault(memory_id, _Candidate(memory_id))
            candidate.keyword_rank, candidate.keyword_score = rank, score
        self.timings["keyword"] = (time.perf_counter() - start) * 1000
        if self.mode == SearchMode.AUTO and self.candidates:
            start = time.perf_counter()
            self._link(
                message_neighbours(
                    project=self.project, filters=self.filters, memory_ids=list(self.candidates)
                )
            )
            self.timings["neighbours"] = (time.perf_counter() - start) * 1000

    def vector(self) -> None:
        if self.pending is None or self.space is None:
            return
        start = time.perf_counter()
        query_vector = self.pending.result()
        ready = time.perf_counter()
        if self.submitted is not None:
            # the callback runs just after result() can return: rarely, it has not yet
            self.timings["embed_query"] = ((self.embedded or [ready])[0] - self.submitted) * 1000
            self.timings["embed_wait"] = (ready - start) * 1000
        start = time.perf_counter()
        auto = self.mode == SearchMode.AUTO
        unscored = [c.memory_id for c in self.candidates.values() if c.distance is None]
        if self.size is not None and exact_scan(self.size):
            found, links, distances = exact_vector_candidates(
                project=self.project, space=self.space, query=query_vector,
                filters=self.filters, limit=self.limit,
                link_known=list(self.linked) if auto else None, distance_ids=unscored,
            )  # fmt: skip
            self._add_vector(found)
        else:
            found = vector_candidates(
                project=self.project, space=self.space, query=query_vector,
                filters=self.filters, limit=self.limit, exact=False,
            )  # fmt: skip
            self._add_vector(found)
            # the vector candidates' neighbours; the neighbours' own neighbours are not wanted
            link_ids = [m for m, _ in found if m not in self.linked] if auto else []
            unscored = [c.memory_id for c in self.candidates.values() if c.distance is None]
            links, distances = (
                neighbours_and_distances(
                    project=self.project, filters=self.filters, space=self.space,
                    query=query_vector, link_ids=link_ids, distance_ids=unscored,
                )
                if link_ids or unscored
                else ({}, {})
            )  # fmt: skip
        self._link(links)
        for memory_id, distance in distances.items():
            self.candidates[memory_id].distance = distance
        self.timings["vector"] = (time.perf_counter() - start) * 1000

    def _add_vector(self, found: list[tuple[Any, float]]) -> None:
        for rank, (memory_id, distance) in enumerate(found, start=1):
            candidate = self.candidates.setdefault(memory_id, _Candidate(memory_id))
            candidate.vector_rank, candidate.distance = rank, distance

    def _link(self, links: dict[Any, list[Any]]) -> None:
        for memory_id, neighbours in links.items():
            self.candidates[memory_id].neighbours = neighbours
            self.linked.add(memory_id)
            for neighbour in neighbours:
                self.candidates.setdefault(neighbour, _Candidate(neighbour))


def _base_scores(candidates: dict[Any, _Candidate], mode: str) -> dict[Any, dict[str, float]]:
    """Each candidate's score in 0..1 before recency and importance, with its parts."""
    config = settings.RETRIEVAL
    rrf_k = config["RRF_K"]
    max_keyword = max((c.keyword_score or 0.0 for c in candidates.values()), default=0.0) or 1.0
    similarities = {
        c.memory_id: cosine_similarity(c.distance)
        for c in candidates.values()
        if c.distance is not None
    }
    low, high = min(similarities.values(), default=0.0), max(similarities.values(), default=1.0)
    parts: dict[Any, dict[str, float]] = {}
    for memory_id, candidate in candidates.items():
        similarity = similarities.get(memory_id, 0.0)
        keyword = (candidate.keyword_score or 0.0) / max_keyword
        rrf = sum(1.0 / (rrf_k + r) for r in (candidate.vector_rank, candidate.keyword_rank) if r)
        if mode == SearchMode.VECTOR:
            base = similarity
        elif mode == SearchMode.KEYWORD:
            base = keyword
        elif mode == SearchMode.HYBRID:
            base = rrf * (rrf_k + 1) / 2  # scaled so a first place in both lists is 1.0
        else:
            vector = (similarity - low) / (high - low) if high > low else 0.0
            weight = config["AUTO_KEYWORD_WEIGHT"]
            base = weight * keyword + (1 - weight) * vector
        parts[memory_id] = {"base": base, "keyword_norm": keyword, "rrf": rrf}
    if mode == SearchMode.AUTO:
        beta = config["NEIGHBOUR_WEIGHT"]
        adjacent: dict[Any, set[Any]] = {memory_id: set() for memory_id in candidates}
        for memory_id, candidate in candidates.items():
            for neighbour in candidate.neighbours:
                adjacent[memory_id].add(neighbour)
                adjacent[neighbour].add(memory_id)
        for memory_id, part in parts.items():
            bonus = beta * sum(parts[n]["base"] for n in adjacent[memory_id])
            part["neighbours"] = bonus
            part["fused"] = (part["base"] + bonus) / (1 + 2 * beta)
    return parts


def _rank(
    candidates: dict[Any, _Candidate], *, mode: str, k: int, threshold: float | None, explain: bool
) -> list[SearchHit]:
    config = settings.RETRIEVAL
    recency_weight, importance_weight = config["RECENCY_WEIGHT"], config["IMPORTANCE_WEIGHT"]
    parts = _base_scores(candidates, mode)
    adjusted = recency_weight or importance_weight
    # only the adjustments need more than ids; only the winners are loaded whole
    meta = (
        {pk: (created, importance) for pk, created, importance in Memory.objects.filter(
            pk__in=list(candidates)).values_list("pk", "created_at", "importance")}
        if adjusted or explain
        else {}
    )  # fmt: skip
    now = timezone.now()
    scored: list[tuple[float, Any, float | None, dict[str, Any]]] = []
    for memory_id, candidate in candidates.items():
        similarity = (
            cosine_similarity(candidate.distance) if candidate.distance is not None else None
        )
        if threshold is not None and similarity is not None and similarity < threshold:
            continue
        part = parts[memory_id]
        score = part.get("fused", part["base"])
        details: dict[str, Any] = {}
        if memory_id in meta:
            created_at, importance = meta[memory_id]
            recency = _recency(created_at, now)
            score = (
                (1.0 - recency_weight - importance_weight) * score
                + recency_weight * recency
                + importance_weight * importance
            )
            details = {"recency": recency, "importance": importance}
        if explain:
            details = {
                "vector_rank": candidate.vector_rank,
                "vector_similarity": similarity,
                "keyword_rank": candidate.keyword_rank,
                "keyword_score": candidate.keyword_score,
                **part,
                **details,
                "weights": {"recency": recency_weight, "importance": importance_weight},
            }
        scored.append((score, memory_id, similarity, details))
    scored.sort(key=lambda item: (-item[0], str(item[1])))
    winners = scored[: k + 5]  # a few spares for rows deleted since the candidate queries
    memories = Memory.objects.with_external_ids().in_bulk(
        [memory_id for _, memory_id, _, _ in winners]
    )
    hits = [
        SearchHit(memories[memory_id], score, similarity, details if explain else {})
        for score, memory_id, similarity, details in winners
        if memory_id in memories
    ]
    return hits[:k]
