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


def filtered_size(project: Project, filters: SearchFilters, cap: int) -> int:
    """How many memories pass the filters, counted up to ``cap + 1``."""
    where, params = filters.sql(project)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM memories_memory m WHERE {where} LIMIT %s) s",
            [*params, cap + 1],
        )
        return int(cursor.fetchone()[0])


def exact_scan_max_rows() -> int:
    return int(settings.RETRIEVAL["EXACT_SCAN_MAX_ROWS"])


def exact_scan(size: int) -> bool:
    """Whether a filtered set of ``size`` rows is scanned exactly rather than by HNSW."""
    return size <= exact_scan_max_rows()


def vector_candidates(
    *,
    project: Project,
    space: EmbeddingSpace,
    query: np.ndarray,
    filters: SearchFilters,
    limit: int,
    exact: bool | None = None,
) -> list[tuple[Any, float]]:
    """(memory id, cosine distance) of the nearest embedded memories, nearest first.

    A filtered HNSW scan can stop short of ``limit`` rows (the index yields its
    ef_search nearest rows, then the filter drops most of them). So a small filtered
    set is scanned exactly, and a large one through the index with pgvector's
    iterative scan, which keeps reading the graph until enough rows pass the filter.
    ``exact`` is that choice when the caller already made it (see ``exact_scan``).
    """
    where, params = filters.sql(project)
    dim = int(space.dimension)
    literal = _vector_literal(query)
    if exact is None:
        exact = exact_scan(
            collection_size_get(project, filters, settings.RETRIEVAL["KEYWORD_MAX_MATCHES"])
        )
    if exact:
        found, _, _ = exact_vector_candidates(
            project=project, space=space, query=query, filters=filters, limit=limit,
            link_known=None, distance_ids=[],
        )  # fmt: skip
        return found
    with transaction.atomic(), connection.cursor() as cursor:
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


def collection_size_get(project: Project, filters: SearchFilters, cap: int) -> int:
    """How many memories pass the filters: counted up to ``cap``, past it the planner's
    estimate (at least ``cap + 1``). Counting a large set exactly costs more than the
    search it serves (100 ms for 100,000 rows)."""
    size = filtered_size(project, filters, cap)
    if size <= cap:
        return size
    where, params = filters.sql(project)
    with connection.cursor() as cursor:
        cursor.execute(
            f"EXPLAIN (FORMAT JSON) SELECT 1 FROM memories_memory m WHERE {where}", params
        )
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return max(size, int(plan[0]["Plan"]["Plan Rows"]))


def _query_words(text: str) -> list[tuple[str, float | None]]:
    """The query's lexemes, each with its share of memories_memory rows per ANALYZE's
    most-common-lexeme statistics (None: not among them, so rarer than all of them)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH statistics AS (
                SELECT s.most_common_elems::text::text[] AS lexemes,
                       s.most_common_elem_freqs AS frequencies
                FROM pg_stats s
                WHERE s.schemaname = current_schema() AND s.tablename = 'memories_memory'
                  AND s.attname = 'search_vector'
            )
            SELECT w.lexeme, st.frequencies[array_position(st.lexemes, w.lexeme)]
            FROM unnest(tsvector_to_array(to_tsvector('{SEARCH_CONFIG}', %s))) AS w(lexeme)
            LEFT JOIN statistics st ON true
            """,
            [text],
        )
        return [(lexeme, frequency) for lexeme, frequency in cursor.fetchall()]


def _tsquery(lexemes: list[str], operator: str) -> str:
    return f" {operator} ".join("'" + lexeme.replace("'", "''") + "'" for lexeme in lexemes)


def keyword_candidates(
    *,
    project: Project,
    text: str,
    filters: SearchFilters,
    limit: int,
    collection_size: int | None = None,
) -> list[tuple[Any, float]]:
    """(memory id, BM25 score) of memories sharing words with ``text``, best first.

    PostgreSQL's ts_rank has no inverse document frequency, so a word found in half
    the memories (a speaker's name, say) counts as much as a rare one. BM25 is
    computed here over the filtered set of ``collection_size`` rows (as
    ``collection_size_get`` gives it, by the caller or here), with OR semantics (a
    question rarely has all its words in one memory), lengths in distinct lexemes.

    A filtered set of up to KEYWORD_MAX_MATCHES rows gets exact BM25 over every row
    holding a query word. In a larger one only that many rows are read: every row
    holding the rarest words, taken while their estimated rows (ANALYZE's lexeme
    statistics) fit that budget, plus the first rows holding all the words and the
    first holding the rarest of the rest. The rest's document frequencies are the
    estimates. The best BM25 scores come from the rare words; reading every row
    holding a common word is what made a search of a large project slow.
    """
    config = settings.RETRIEVAL
    words = _query_words(text)
    if not words:
        return []
    where, params = filters.sql(project)
    size = collection_size
    if size is None:
        size = collection_size_get(project, filters, config["KEYWORD_MAX_MATCHES"])
    budget = config["KEYWORD_MAX_MATCHES"]
    estimates = {lexeme: (frequency or 0.0) * size for lexeme, frequency in words}
    # the rarest words are read whole while their estimated rows fit the budget
    selective: list[str] = []
    for lexeme in sorted(estimates, key=estimates.__getitem__):
        if size > budget and sum(estimates[w] for w in [*selective, lexeme]) > budget:
            break
        selective.append(lexeme)
    common = [lexeme for lexeme in estimates if lexeme not in selective]
    matching = (
        "SELECT m.id, m.search_vector FROM memories_memory m "
        f"WHERE m.search_vector @@ %s::tsquery AND {where} LIMIT %s"
    )
    branches, branch_params = [], []
    if selective:
        branches.append(f"({matching})")
        branch_params += [_tsquery(selective, "|"), *params, budget]
    if common:  # the first rows holding every word, then the rarest common word's
        for query in (_tsquery(list(estimates), "&"), _tsquery(common[:1], "|")):
            branches.append(f"({matching})")
            branch_params += [query, *params, limit]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH docs AS MATERIALIZED (
                SELECT DISTINCT ON (id) id, search_vector AS sv, length(search_vector) AS dl
                FROM ({" UNION ALL ".join(branches)}) found
            ),
            lengths AS MATERIALIZED (SELECT greatest(avg(dl), 1)::float8 AS avgdl FROM docs),
            terms AS MATERIALIZED (
                SELECT d.id, d.dl, t.lexeme, coalesce(array_length(t.positions, 1), 1) AS tf
                FROM docs d CROSS JOIN LATERAL unnest(d.sv) t
                WHERE t.lexeme = ANY(%s)
            ),
            estimated AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS e(lexeme, df)),
            frequencies AS (
                SELECT t.lexeme, least(coalesce(max(e.df), count(*)), %s)::float8 AS df
                FROM terms t LEFT JOIN estimated e USING (lexeme)
                GROUP BY t.lexeme
            )
            SELECT t.id, sum(
                ln(1 + (%s - f.df + 0.5) / (f.df + 0.5))
                * t.tf * (%s + 1) / (t.tf + %s * (1 - %s + %s * t.dl / l.avgdl))
            ) AS score
            FROM terms t JOIN frequencies f USING (lexeme), lengths l
            GROUP BY t.id
            ORDER BY score DESC
            LIMIT %s
            """,
            [
                *branch_params, list(estimates),
                common, [estimates[w] for w in common], size, size,
                config["BM25_K1"], config["BM25_K1"], config["BM25_B"], config["BM25_B"],
                limit,
            ],
        )  # fmt: skip
        return [(memory_id, float(score)) for memory_id, score in cursor.fetchall()]


def _links_sql(
    project: Project, filters: SearchFilters, ids: str = "c.id = ANY(%s)"
) -> tuple[str, list[Any]]:
    """SELECT (id, previous id, next id) for the messages chosen by the ``ids`` clause,
    whose parameters are bound after the ones returned."""
    where, params = filters.sql(project, alias="x")
    neighbour_sql = f"""
        SELECT x.id FROM memories_memory x
        WHERE x.project_id = c.project_id AND x.room_id = c.room_id AND x.kind = c.kind
          AND {where} AND (x.created_at, x.id) {{op}} (c.created_at, c.id)
        ORDER BY x.created_at {{order}}, x.id {{order}} LIMIT 1
    """
    sql = f"""
        SELECT c.id, previous.id AS previous, following.id AS following
        FROM memories_memory c
        LEFT JOIN LATERAL ({neighbour_sql.format(op="<", order="DESC")}) previous ON true
        LEFT JOIN LATERAL ({neighbour_sql.format(op=">", order="ASC")}) following ON true
        WHERE c.kind = '{Memory.Kind.MESSAGE}' AND c.room_id IS NOT NULL AND {ids}
    """
    return sql, [*params, *params]


def message_neighbours(
    *, project: Project, filters: SearchFilters, memory_ids: list[Any]
) -> dict[Any, list[Any]]:
    """For each message among ``memory_ids``: the previous and next message of its room
    that the filters allow. Evidence in a conversation often sits one turn away from
    the turn that matches the question (a question and its answer, say)."""
    if not memory_ids:
        return {}
    sql, params = _links_sql(project, filters)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, list(memory_ids)])
        return {
            memory_id: [n for n in (previous, following) if n is not None]
            for memory_id, previous, following in cursor.fetchall()
        }


def neighbours_and_distances(
    *,
    project: Project,
    filters: SearchFilters,
    space: EmbeddingSpace,
    query: np.ndarray,
    link_ids: list[Any],
    distance_ids: list[Any],
) -> tuple[dict[Any, list[Any]], dict[Any, float]]:
    """``message_neighbours`` of ``link_ids``, and the cosine distances of
    ``distance_ids`` and of those neighbours, in one round trip."""
    links_sql, params = _links_sql(project, filters)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH links AS MATERIALIZED ({links_sql}),
            wanted AS (
                SELECT unnest(%s::uuid[]) AS id
                UNION SELECT previous FROM links UNION SELECT following FROM links
            )
            SELECT true, id, previous, following, NULL::float8 FROM links
            UNION ALL
            SELECT false, e.memory_id, NULL, NULL, e.vector <=> %s::vector
            FROM memories_embedding e JOIN wanted w ON w.id = e.memory_id
            WHERE e.space_id = {int(space.pk)}
            """,
            [*params, list(link_ids), list(distance_ids), _vector_literal(query)],
        )
        links: dict[Any, list[Any]] = {}
        distances: dict[Any, float] = {}
        for is_link, memory_id, previous, following, distance in cursor.fetchall():
            if is_link:
                links[memory_id] = [n for n in (previous, following) if n is not None]
            else:
                distances[memory_id] = float(distance)
        return links, distances


def exact_vector_candidates(
    *,
    project: Project,
    space: EmbeddingSpace,
    query: np.ndarray,
    filters: SearchFilters,
    limit: int,
    link_known: list[Any] | None,
    distance_ids: list[Any],
) -> tuple[list[tuple[Any, float]], dict[Any, list[Any]], dict[Any, float]]:
    """``vector_candidates`` by an exact scan of a small filtered set, together with
    ``neighbours_and_distances`` for the result, in one round trip.

    The untyped operator cannot use the (cast) HNSW index: an exact scan by design.
    It computes every filtered row's distance anyway, so the distances the
    ranking needs (keyword candidates', neighbours') come from it for free. Links are
    looked up for the nearest rows not in ``link_known``; ``None``: no links.
    """
    where, params = filters.sql(project)
    links, links_params = _links_sql(
        project, filters, ids="c.id IN (SELECT id FROM nearest WHERE NOT id = ANY(%s))"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH candidates AS MATERIALIZED (SELECT m.id FROM memories_memory m WHERE {where}),
            scored AS MATERIALIZED (
                SELECT e.memory_id AS id, e.vector <=> %s::vector AS distance
                FROM memories_embedding e JOIN candidates c ON c.id = e.memory_id
                WHERE e.space_id = {int(space.pk)}
            ),
            nearest AS MATERIALIZED (SELECT id, distance FROM scored ORDER BY distance LIMIT %s),
            links AS MATERIALIZED ({links} AND %s),
            wanted AS (
                SELECT unnest(%s::uuid[]) AS id
                UNION SELECT previous FROM links UNION SELECT following FROM links
            )
            SELECT 0, id, distance, NULL::uuid, NULL::uuid FROM nearest
            UNION ALL SELECT 1, id, NULL, previous, following FROM links
            UNION ALL SELECT 2, s.id, s.distance, NULL, NULL FROM scored s JOIN wanted USING (id)
            """,
            [
                *params, _vector_literal(query), limit,
                *links_params, list(link_known or []), link_known is not None,
                list(distance_ids),
            ],
        )  # fmt: skip
        nearest: list[tuple[Any, float]] = []
        neighbours: dict[Any, list[Any]] = {}
        distances: dict[Any, float] = {}
        for part, memory_id, distance, previous, following in cursor.fetchall():
            if part == 0:
                nearest.append((memory_id, float(distance)))
            elif part == 1:
                neighbours[memory_id] = [n for n in (previous, following) if n is not None]
            else:
                distances[memory_id] = float(distance)
    nearest.sort(key=lambda row: row[1])
    return nearest, neighbours, distances
