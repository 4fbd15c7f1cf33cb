"""Ranking: the candidates' signals fused into one score per mode, then adjusted by
recency and importance, with the parts of each score for ``explain``.

Modes: ``vector`` (cosine), ``keyword`` (BM25), ``hybrid`` (reciprocal rank fusion
over the union of both candidate lists) and ``auto``: BM25 and cosine scores
normalized and averaged, then each conversation turn of at most
``neighbour_max_bytes`` bytes raised by the scores of the turns just before and
after it in its room (fusion.py); on LoCoMo (BENCHMARKS.md) auto finds
clearly more evidence than either signal or RRF. The weights are the project's search
settings (memories.config.SearchSettings).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.utils import timezone

from memories.config import SearchSettings
from memories.providers.embeddings import cosine_similarity
from memories.services.search.fusion import neighbour_fusion
from memories.services.search.signal import VectorSignal


class SearchMode:
    VECTOR = "vector"
    KEYWORD = "keyword"
    HYBRID = "hybrid"
    AUTO = "auto"
    ALL = (AUTO, VECTOR, KEYWORD, HYBRID)
    FUSED = (HYBRID, AUTO)


@dataclass
class Candidate:
    memory_id: Any
    vector_rank: int | None = None
    distance: float | None = None
    keyword_rank: int | None = None
    keyword_score: float | None = None
    neighbours: list[Any] = field(default_factory=list)


class CandidatePool:
    """Every memory some signal proposed, with what each signal said of it."""

    def __init__(self) -> None:
        self.candidates: dict[Any, Candidate] = {}
        self.linked: set[Any] = set()  # messages whose neighbours are known
        self.sizes: dict[Any, int] = {}  # linked turns' sizes in bytes, as the links came

    def add_keyword(self, found: list[tuple[Any, float]]) -> None:
        for rank, (memory_id, score) in enumerate(found, start=1):
            candidate = self.candidates.setdefault(memory_id, Candidate(memory_id))
            candidate.keyword_rank, candidate.keyword_score = rank, score

    def add_vector(
        self,
        nearest: list[tuple[Any, float]],
        *,
        links: dict[Any, list[Any]],
        distances: dict[Any, float],
        sizes: dict[Any, int] | None = None,
    ) -> None:
        """The nearest memories, then the neighbouring turns, their sizes and the
        distances that came with them."""
        for rank, (memory_id, distance) in enumerate(nearest, start=1):
            candidate = self.candidates.setdefault(memory_id, Candidate(memory_id))
            candidate.vector_rank, candidate.distance = rank, distance
        self.link(links, sizes)
        for memory_id, distance in distances.items():
            self.candidates[memory_id].distance = distance

    def add_signal(self, signal: VectorSignal) -> None:
        """A vector step's VectorSignal (signal.py): its nearest, links and distances."""
        self.add_vector(
            signal.nearest, links=signal.links, distances=signal.distances, sizes=signal.sizes
        )

    def link(self, links: dict[Any, list[Any]], sizes: dict[Any, int] | None = None) -> None:
        """Record neighbouring turns (and their sizes); a neighbour becomes a candidate
        itself."""
        self.sizes.update(sizes or {})
        for memory_id, neighbours in links.items():
            self.candidates[memory_id].neighbours = neighbours
            self.linked.add(memory_id)
            for neighbour in neighbours:
                self.candidates.setdefault(neighbour, Candidate(neighbour))

    def ids(self) -> list[Any]:
        return list(self.candidates)

    def unscored(self) -> list[Any]:
        """Candidates with no cosine distance yet."""
        return [c.memory_id for c in self.candidates.values() if c.distance is None]


class RankingFacts(NamedTuple):
    """What the ranking reads of a candidate beside the signals (loading.py)."""

    created_at: datetime
    importance: float
    bytes: int


@dataclass
class Ranked:
    score: float
    memory_id: Any
    similarity: float | None
    explain: dict[str, Any]


def candidates_rank(
    pool: CandidatePool,
    *,
    mode: str,
    policy: SearchSettings,
    threshold: float | None,
    facts: dict[Any, RankingFacts],
    explain: bool,
) -> list[Ranked]:
    """Every candidate at or above ``threshold`` (cosine similarity; candidates with
    none are kept), best first. ``facts`` (see ``ranking_facts_wanted``) gives the
    adjustment each candidate's creation time and importance, and auto mode the turns'
    sizes (without facts, the sizes the links brought); a candidate missing from it is
    not adjusted."""
    similarities = {
        c.memory_id: cosine_similarity(c.distance)
        for c in pool.candidates.values()
        if c.distance is not None
    }
    parts = _base_scores(pool, mode, policy, facts, similarities)
    now = timezone.now()
    ranked = []
    for memory_id, candidate in pool.candidates.items():
        similarity = similarities.get(memory_id)
        if threshold is not None and similarity is not None and similarity < threshold:
            continue
        part = parts[memory_id]
        score = part.get("fused", part["base"])
        details: dict[str, Any] = {}
        if memory_id in facts:
            created_at, importance, _ = facts[memory_id]
            score, details = _adjusted(score, created_at, importance, now=now, policy=policy)
        if explain:
            details = {
                "vector_rank": candidate.vector_rank,
                "vector_similarity": similarity,
                "keyword_rank": candidate.keyword_rank,
                "keyword_score": candidate.keyword_score,
                **part,
                **details,
                "weights": {
                    "recency": policy.recency_weight,
                    "importance": policy.importance_weight,
                },
            }
        ranked.append(Ranked(score, memory_id, similarity, details if explain else {}))
    # ties in id order (a UUID orders as its text does; str() of ~1,000 ids was ~0.7 ms)
    ranked.sort(key=lambda item: (-item.score, item.memory_id))
    return ranked


def adjustment_wanted(policy: SearchSettings) -> bool:
    return bool(policy.recency_weight or policy.importance_weight)


def ranking_facts_wanted(*, policy: SearchSettings, explain: bool) -> bool:
    """Whether the ranking reads the candidates' facts: for the adjustment and for
    ``explain`` (otherwise auto mode has the linked turns' sizes from their links)."""
    return adjustment_wanted(policy) or explain


def _capped(policy: SearchSettings) -> bool:
    return bool(policy.neighbour_weight and policy.neighbour_max_bytes)


def _adjusted(
    score: float, created_at: datetime, importance: float, *, now: datetime, policy: SearchSettings
) -> tuple[float, dict[str, float]]:
    """The score with its recency and importance shares, and those two signals."""
    recency = _recency(created_at, now, policy.recency_half_life_days)
    adjusted = (
        (1.0 - policy.recency_weight - policy.importance_weight) * score
        + policy.recency_weight * recency
        + policy.importance_weight * importance
    )
    return adjusted, {"recency": recency, "importance": importance}


def _recency(created_at: datetime, now: datetime, half_life_days: float) -> float:
    half_life = half_life_days * 86400
    age = max(0.0, (now - created_at).total_seconds())
    return math.pow(0.5, age / half_life) if half_life > 0 else 0.0


def _base_scores(
    pool: CandidatePool,
    mode: str,
    policy: SearchSettings,
    facts: dict[Any, RankingFacts],
    similarities: dict[Any, float],
) -> dict[Any, dict[str, float]]:
    """Each candidate's score in 0..1 before recency and importance, with its parts
    (``similarities``: the candidates' cosine similarities, where known)."""
    candidates = pool.candidates
    rrf_k = policy.rrf_k
    max_keyword = max((c.keyword_score or 0.0 for c in candidates.values()), default=0.0) or 1.0
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
            base = policy.keyword_weight * keyword + (1 - policy.keyword_weight) * vector
        parts[memory_id] = {"base": base, "keyword_norm": keyword, "rrf": rrf}
    if mode == SearchMode.AUTO:
        adjacent = _adjacent(candidates)
        linked = [memory_id for memory_id, around in adjacent.items() if around]
        lengths: dict[Any, int] = {}
        if _capped(policy):
            # every linked turn's size came with its links (neighbours.links_sql)
            known = {memory_id: fact.bytes for memory_id, fact in facts.items()} or pool.sizes
            lengths = {memory_id: known[memory_id] for memory_id in linked if memory_id in known}
        neighbour_fusion(
            adjacent,
            parts,
            beta=policy.neighbour_weight,
            lengths=lengths,
            max_bytes=policy.neighbour_max_bytes,
        )
    return parts


def _adjacent(candidates: dict[Any, Candidate]) -> dict[Any, set[Any]]:
    """Each candidate's neighbouring candidates, whichever of them found the other."""
    adjacent: dict[Any, set[Any]] = {memory_id: set() for memory_id in candidates}
    for memory_id, candidate in candidates.items():
        for neighbour in candidate.neighbours:
            adjacent[memory_id].add(neighbour)
            adjacent[neighbour].add(memory_id)
    return adjacent
