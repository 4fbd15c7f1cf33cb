"""Candidate queries of the search: vector (pgvector), keyword (BM25 over PostgreSQL
full text), cosine distances by id and neighbouring turns. memories.services.retrieval
ranks what these return."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from memories.models import SEARCH_CONFIG, EmbeddingSpace, Memory, Project


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
            params.append(json.dumps(self.metadata))
        if self.start is not None:
            clauses.append(f"{alias}.created_at >= %s")
            params.append(self.start)
        if self.end is not None:
            clauses.append(f"{alias}.created_at < %s")
            params.append(self.end)
        return " AND ".join(clauses), params


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


def distances_for(space: EmbeddingSpace, ids: list[Any], query: np.ndarray) -> dict[Any, float]:
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


def message_neighbours(
    *, project: Project, filters: SearchFilters, memory_ids: list[Any]
) -> dict[Any, list[Any]]:
    """For each message among ``memory_ids``: the previous and next message of its room
    that the filters allow. Evidence in a conversation often sits one turn away from
    the turn that matches the question (a question and its answer, say)."""
    if not memory_ids:
        return {}
    where, params = filters.sql(project, alias="x")
    neighbour_sql = f"""
        SELECT x.id FROM memories_memory x
        WHERE x.project_id = c.project_id AND x.room_id = c.room_id AND x.kind = c.kind
          AND {where} AND (x.created_at, x.id) {{op}} (c.created_at, c.id)
        ORDER BY x.created_at {{order}}, x.id {{order}} LIMIT 1
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT c.id, previous.id, following.id
            FROM memories_memory c
            LEFT JOIN LATERAL ({neighbour_sql.format(op="<", order="DESC")}) previous ON true
            LEFT JOIN LATERAL ({neighbour_sql.format(op=">", order="ASC")}) following ON true
            WHERE c.id = ANY(%s) AND c.kind = %s AND c.room_id IS NOT NULL
            """,
            [*params, *params, list(memory_ids), Memory.Kind.MESSAGE],
        )
        return {
            memory_id: [n for n in (previous, following) if n is not None]
            for memory_id, previous, following in cursor.fetchall()
        }
