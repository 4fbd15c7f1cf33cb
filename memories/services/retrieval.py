"""Search: vector (pgvector HNSW, cosine), keyword (PostgreSQL full text) and hybrid.

Hybrid fuses both candidate lists with reciprocal rank fusion (RRF) over their
union, then adjusts by recency and importance (weights in settings.RETRIEVAL).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from memories.embeddings import cosine_similarity, get_provider, query_cache
from memories.models import SEARCH_CONFIG, EmbeddingSpace, Memory, Project
from memories.services.embedding import embedding_space_get


class SearchMode:
    VECTOR = "vector"
    KEYWORD = "keyword"
    HYBRID = "hybrid"
    ALL = (VECTOR, KEYWORD, HYBRID)


@dataclass
class SearchFilters:
    """Which memories a search may return; ids are internal row ids."""

    end_user_id: int | None = None
    room_id: int | None = None
    kinds: list[str] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    start: datetime | None = None
    end: datetime | None = None
    statuses: list[str] = field(default_factory=lambda: [Memory.Status.ACTIVE])

    def sql(self, project: Project, alias: str = "m") -> tuple[str, list[Any]]:
        """A WHERE clause over memories_memory AS ``alias`` and its parameters."""
        clauses = [f"{alias}.project_id = %s", f"{alias}.status = ANY(%s)"]
        params: list[Any] = [project.pk, self.statuses]
        if self.end_user_id is not None:
            clauses.append(f"{alias}.end_user_id = %s")
            params.append(self.end_user_id)
        if self.room_id is not None:
            clauses.append(f"{alias}.room_id = %s")
            params.append(self.room_id)
        if self.kinds:
            clauses.append(f"{alias}.kind = ANY(%s)")
            params.append(self.kinds)
        if self.metadata:
            clauses.append(f"{alias}.metadata @> %s::jsonb")
            params.append(_json(self.metadata))
        if self.start is not None:
            clauses.append(f"{alias}.created_at >= %s")
            params.append(self.start)
        if self.end is not None:
            clauses.append(f"{alias}.created_at < %s")
            params.append(self.end)
        return " AND ".join(clauses), params


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


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


def _vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


def _filtered_count(project: Project, filters: SearchFilters, cap: int) -> int:
    where, params = filters.sql(project)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM memories_memory m WHERE {where} LIMIT %s) s",
            [*params, cap + 1],
        )
        return int(cursor.fetchone()[0])


def vector_candidates(
    *,
    project: Project,
    space: EmbeddingSpace,
    query: np.ndarray,
    filters: SearchFilters,
    limit: int,
) -> list[tuple[Any, float]]:
    """(memory id, cosine distance) of the nearest embedded memories, nearest first.

    A filtered HNSW scan can stop short of ``limit`` rows (the index yields its
    ef_search nearest rows, then the filter drops most of them). So a small filtered
    set is scanned exactly, and a large one through the index with pgvector's
    iterative scan, which keeps reading the graph until enough rows pass the filter.
    """
    where, params = filters.sql(project)
    dim = int(space.dimension)
    literal = _vector_literal(query)
    exact = (
        _filtered_count(project, filters, settings.RETRIEVAL["EXACT_SCAN_MAX_ROWS"])
        <= (settings.RETRIEVAL["EXACT_SCAN_MAX_ROWS"])
    )
    with transaction.atomic(), connection.cursor() as cursor:
        if exact:
            # the untyped operator cannot use the (cast) index: an exact scan by design
            cursor.execute(
                f"""
                WITH candidates AS MATERIALIZED (SELECT m.id FROM memories_memory m WHERE {where})
                SELECT e.memory_id, e.vector <=> %s::vector AS distance
                FROM memories_embedding e JOIN candidates c ON c.id = e.memory_id
                WHERE e.space_id = {int(space.pk)}
                ORDER BY distance LIMIT %s
                """,
                [*params, literal, limit],
            )
        else:
            ef_search = max(settings.RETRIEVAL["HNSW_EF_SEARCH"], limit)
            cursor.execute(f"SET LOCAL hnsw.ef_search = {int(min(ef_search, 1000))}")
            cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            cursor.execute(
                f"""
                SELECT e.memory_id, (e.vector::vector({dim})) <=> %s::vector({dim}) AS distance
                FROM memories_embedding e JOIN memories_memory m ON m.id = e.memory_id
                WHERE e.space_id = {int(space.pk)} AND {where}
                ORDER BY distance LIMIT %s
                """,
                [literal, *params, limit],
            )
        rows = cursor.fetchall()
    rows.sort(key=lambda row: row[1])  # relaxed_order may return rows slightly out of order
    return [(memory_id, float(distance)) for memory_id, distance in rows]


# OR semantics: a natural-language question rarely has all its words in one memory.
# plainto_tsquery handles stemming and stop words; its '&' become '|'.
TSQUERY_SQL = f"replace(plainto_tsquery('{SEARCH_CONFIG}', %s)::text, ' & ', ' | ')::tsquery"


def keyword_candidates(
    *, project: Project, text: str, filters: SearchFilters, limit: int
) -> list[tuple[Any, float]]:
    """(memory id, BM25 score) of memories sharing words with ``text``, best first.

    PostgreSQL's ts_rank has no inverse document frequency, so a word found in half
    the memories (a speaker's name, say) counts as much as a rare one. BM25 is
    computed here over the filtered set: document frequencies from the matching
    rows (every row holding a query word matches, up to KEYWORD_MAX_MATCHES), the
    collection size from the filtered count, lengths in distinct lexemes.
    """
    where, params = filters.sql(project)
    config = settings.RETRIEVAL
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH query AS (
                SELECT {TSQUERY_SQL} AS q,
                       tsvector_to_array(to_tsvector('{SEARCH_CONFIG}', %s)) AS lexemes
            ),
            docs AS MATERIALIZED (
                SELECT m.id, m.search_vector AS sv, length(m.search_vector) AS dl
                FROM memories_memory m, query
                WHERE m.search_vector @@ query.q AND {where}
                LIMIT %s
            ),
            collection AS MATERIALIZED (
                SELECT count(*)::float8 AS n FROM (
                    SELECT 1 FROM memories_memory m WHERE {where} LIMIT %s
                ) capped
            ),
            lengths AS MATERIALIZED (SELECT greatest(avg(dl), 1)::float8 AS avgdl FROM docs),
            terms AS MATERIALIZED (
                SELECT d.id, d.dl, t.lexeme, coalesce(array_length(t.positions, 1), 1) AS tf
                FROM docs d CROSS JOIN LATERAL unnest(d.sv) t, query
                WHERE t.lexeme = ANY(query.lexemes)
            ),
            frequencies AS (SELECT lexeme, count(*)::float8 AS df FROM terms GROUP BY lexeme)
            SELECT t.id, sum(
                ln(1 + (c.n - f.df + 0.5) / (f.df + 0.5))
                * t.tf * (%s + 1) / (t.tf + %s * (1 - %s + %s * t.dl / l.avgdl))
            ) AS score
            FROM terms t JOIN frequencies f USING (lexeme), collection c, lengths l
            GROUP BY t.id
            ORDER BY score DESC
            LIMIT %s
            """,
            [
                text, text, *params, config["KEYWORD_MAX_MATCHES"],
                *params, config["KEYWORD_COLLECTION_CAP"],
                config["BM25_K1"], config["BM25_K1"], config["BM25_B"], config["BM25_B"],
                limit,
            ],
        )  # fmt: skip
        return [(memory_id, float(score)) for memory_id, score in cursor.fetchall()]


def _distances_for(space: EmbeddingSpace, ids: list[Any], query: np.ndarray) -> dict[Any, float]:
    if not ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT memory_id, vector <=> %s::vector FROM memories_embedding
            WHERE space_id = {int(space.pk)} AND memory_id = ANY(%s)
            """,
            [_vector_literal(query), ids],
        )
        return {memory_id: float(distance) for memory_id, distance in cursor.fetchall()}


def _recency(created_at: datetime, now: datetime) -> float:
    half_life = settings.RETRIEVAL["RECENCY_HALF_LIFE_DAYS"] * 86400
    age = max(0.0, (now - created_at).total_seconds())
    return math.pow(0.5, age / half_life) if half_life > 0 else 0.0


def memory_search(
    *,
    project: Project,
    query: str | None = None,
    embedding: list[float] | None = None,
    mode: str = SearchMode.HYBRID,
    filters: SearchFilters | None = None,
    k: int = 10,
    threshold: float | None = None,
    explain: bool = False,
) -> SearchResult:
    """The k best memories of the project for a query text and/or a raw query vector.

    ``similarity`` is the cosine similarity to the query vector clipped to 0..1;
    ``threshold`` drops memories less similar than that (memories not embedded yet,
    found by keyword, are kept). ``score`` is the fused, adjusted ranking score.
    """
    filters = filters or SearchFilters()
    config = settings.RETRIEVAL
    timings: dict[str, float] = {}
    clock = time.perf_counter()
    limit = int(max(k * config["CANDIDATE_MULTIPLIER"], k)) if mode == SearchMode.HYBRID else k

    space = None
    query_vector = None
    if mode in (SearchMode.VECTOR, SearchMode.HYBRID):
        provider = get_provider()
        space = embedding_space_get(provider=provider)
        if embedding is not None:
            query_vector = np.asarray(embedding, dtype=np.float32)
        elif query:
            query_vector = query_cache.embed(provider, query)
        timings["embed_query"] = (time.perf_counter() - clock) * 1000

    candidates: dict[Any, _Candidate] = {}
    if query_vector is not None and space is not None:
        start = time.perf_counter()
        # a threshold can drop rows: read more so k can still be filled
        vector_limit = (
            limit if threshold is None else max(limit, k * config["CANDIDATE_MULTIPLIER"])
        )
        for rank, (memory_id, distance) in enumerate(
            vector_candidates(
                project=project,
                space=space,
                query=query_vector,
                filters=filters,
                limit=vector_limit,
            ),
            start=1,
        ):
            candidates[memory_id] = _Candidate(memory_id, vector_rank=rank, distance=distance)
        timings["vector"] = (time.perf_counter() - start) * 1000
    if query and mode in (SearchMode.KEYWORD, SearchMode.HYBRID):
        start = time.perf_counter()
        for rank, (memory_id, score) in enumerate(
            keyword_candidates(project=project, text=query, filters=filters, limit=limit), start=1
        ):
            candidate = candidates.setdefault(memory_id, _Candidate(memory_id))
            candidate.keyword_rank, candidate.keyword_score = rank, score
        timings["keyword"] = (time.perf_counter() - start) * 1000

    if query_vector is not None and space is not None:
        unscored = [c.memory_id for c in candidates.values() if c.distance is None]
        for memory_id, distance in _distances_for(space, unscored, query_vector).items():
            candidates[memory_id].distance = distance

    hits = _rank(candidates, mode=mode, k=k, threshold=threshold, explain=explain)
    timings["total"] = (time.perf_counter() - clock) * 1000
    return SearchResult(hits=hits, mode=mode, timings_ms=timings)


def _rank(
    candidates: dict[Any, _Candidate], *, mode: str, k: int, threshold: float | None, explain: bool
) -> list[SearchHit]:
    config = settings.RETRIEVAL
    rrf_k = config["RRF_K"]
    recency_weight, importance_weight = config["RECENCY_WEIGHT"], config["IMPORTANCE_WEIGHT"]
    memories = Memory.objects.select_related("end_user", "room", "agent").in_bulk(list(candidates))
    max_keyword = max((c.keyword_score or 0.0 for c in candidates.values()), default=0.0) or 1.0
    now = timezone.now()
    scored: list[tuple[float, SearchHit]] = []
    for candidate in candidates.values():
        memory = memories.get(candidate.memory_id)
        if memory is None:  # deleted since the candidate query
            continue
        similarity = (
            cosine_similarity(candidate.distance) if candidate.distance is not None else None
        )
        if threshold is not None and similarity is not None and similarity < threshold:
            continue
        rrf = sum(
            1.0 / (rrf_k + rank) for rank in (candidate.vector_rank, candidate.keyword_rank) if rank
        )
        if mode == SearchMode.VECTOR:
            base = similarity or 0.0
        elif mode == SearchMode.KEYWORD:
            base = (candidate.keyword_score or 0.0) / max_keyword
        else:
            base = rrf * (rrf_k + 1) / 2  # scaled so a first place in both lists is 1.0
        recency = _recency(memory.created_at, now)
        score = (
            (1.0 - recency_weight - importance_weight) * base
            + recency_weight * recency
            + importance_weight * memory.importance
        )
        details: dict[str, Any] = {}
        if explain:
            details = {
                "vector_rank": candidate.vector_rank,
                "vector_similarity": similarity,
                "keyword_rank": candidate.keyword_rank,
                "keyword_score": candidate.keyword_score,
                "rrf": rrf,
                "base": base,
                "recency": recency,
                "importance": memory.importance,
                "weights": {"recency": recency_weight, "importance": importance_weight},
            }
        scored.append((score, SearchHit(memory, score, similarity, details)))
    scored.sort(key=lambda item: (-item[0], item[1].memory.created_at), reverse=False)
    return [hit for _, hit in scored[:k]]
