"""Vector candidates through the space's HNSW index, with an iterative scan: for filtered
sets too large for an exact scan (vector.py chooses)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memories.services.search.prepared import local_settings, prepared_cursor
from memories.services.search.signal import VectorRequest, vector_literal
from memories.services.vector_index import hnsw_ef_search

# mean aggregate through the index: memories re-ranked by their mean, per memory wanted
WINDOW_RERANK = 4

# the most windows one index search reads looking for enough distinct memories
MAX_WINDOWS_READ = 10_000


def index_vector_candidates(request: VectorRequest, *, size: int) -> list[tuple[Any, float]]:
    """(memory id, cosine distance) of the ``request.limit`` nearest embedded memories,
    nearest first, through the space's HNSW index (``size``: the filtered set's rows,
    for the candidate list: ``hnsw_ef_search``).

    The index holds windows (a long memory has several): the nearest windows are read
    until enough distinct memories are among them, ``limit`` of them by their nearest
    window (``aggregate`` max) or, for the mean, WINDOW_RERANK times as many, then
    ranked by the mean of all their windows. A filtered HNSW scan can stop short of
    the rows asked for (the index yields its ef_search nearest rows, then the filter
    drops most of them): pgvector's iterative scan keeps reading the graph until
    enough rows pass the filter. The cast to the space's dimension and the space id
    written into the SQL are what let the planner match the space's partial
    expression index.
    """
    limit, aggregate = request.limit, request.aggregate
    wanted = limit if aggregate == "max" else limit * WINDOW_RERANK
    windows = wanted * 2
    while True:
        read, nearest = _nearest_windows(
            request, windows=windows, ef_search=hnsw_ef_search(size, windows)
        )
        if len(nearest) >= wanted or read < windows or windows >= MAX_WINDOWS_READ:
            break
        windows = min(windows * 4, MAX_WINDOWS_READ)
    if aggregate == "max":
        return [(memory_id, best) for memory_id, best, _ in nearest[:limit]]
    by_mean = sorted(nearest[:wanted], key=lambda row: row[2])
    return [(memory_id, mean) for memory_id, _, mean in by_mean[:limit]]


NEAREST_WINDOWS_SQL = """
WITH nearest AS MATERIALIZED (
    SELECT e.memory_id,
           (e.vector::vector({dim})) <=> %(query_vector)s::vector({dim}) AS distance
    FROM memories_embedding e JOIN memories_memory m ON m.id = e.memory_id
    WHERE e.space_id = {space_id} AND {where}
    ORDER BY distance LIMIT %(limit)s
),
memories AS (SELECT memory_id, min(distance) AS best FROM nearest GROUP BY memory_id)
SELECT (SELECT count(*) FROM nearest), n.memory_id, n.best, CASE WHEN %(with_mean)s THEN (
    SELECT avg(w.vector <=> %(query_vector)s::vector) FROM memories_embedding w
    WHERE w.memory_id = n.memory_id AND w.space_id = {space_id}
) END
FROM memories n
"""


def _nearest_windows(
    request: VectorRequest, *, windows: int, ef_search: int
) -> tuple[int, list[tuple[Any, float, float]]]:
    """How many windows were read (the ``windows`` nearest), and each memory among them
    once: (memory id, its nearest window's distance, the mean distance of all its
    windows when the request's aggregate is the mean, else that nearest one's), nearest
    window first. One round trip."""
    where, params = request.filters.sql(request.project)
    space = request.space
    with transaction.atomic(), prepared_cursor() as cursor:
        local_settings(
            f"SET LOCAL hnsw.ef_search = {ef_search}",
            "SET LOCAL hnsw.iterative_scan = relaxed_order",
        )
        sql = NEAREST_WINDOWS_SQL.format(
            dim=int(space.dimension), space_id=int(space.pk), where=where
        )
        cursor.execute(
            sql,
            {
                **params,
                "query_vector": vector_literal(request.query),
                "limit": windows,
                "with_mean": request.aggregate == "mean",
            },
        )
        rows = cursor.fetchall()
    # relaxed_order may return rows slightly out of order: sorted here
    nearest = sorted(
        (
            (memory_id, float(best), float(best if mean is None else mean))
            for _, memory_id, best, mean in rows
        ),
        key=lambda row: row[1],
    )
    return (int(rows[0][0]) if rows else 0), nearest
