"""Vector candidates: the memories nearest the query vector (cosine, pgvector), by an
exact scan of a small filtered set or by the space's HNSW index with an iterative
scan; the neighbours of the nearest turns and the distances of other candidates come
with them. A memory's distance comes from its windows' (a long text is embedded as
several windows, memories.models.Embedding) and its windows' distances aggregated
(the project's search.window_aggregate); each memory comes back once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction

from memories.models import EmbeddingSpace, Project
from memories.services.search.count import collection_size_get
from memories.services.search.filters import SearchFilters, id_array
from memories.services.search.neighbours import (
    LINK_SIZES,
    NEAREST_UNLINKED,
    NO_LINK_SIZES,
    link_read,
    links_sql,
)
from memories.services.search.prepared import local_settings, prepared_cursor
from memories.services.vector_index import hnsw_ef_search


@dataclass
class VectorSignal:
    nearest: list[tuple[Any, float]]  # (memory id, cosine distance), nearest first
    links: dict[Any, list[Any]]  # message id -> its neighbouring turns' ids
    distances: dict[Any, float]  # memory id -> cosine distance
    # the linked turns' and their neighbours' sizes in bytes (neighbours.links_sql)
    sizes: dict[Any, int] = field(default_factory=dict)


def window_sql(aggregate: str) -> str:
    """The SQL aggregate of a memory's window distances: the mean similarity is the
    mean distance, the max similarity the min distance."""
    return {"mean": "avg", "max": "min"}[aggregate]


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


def exact_scan_max_rows() -> int:
    return int(settings.RETRIEVAL["EXACT_SCAN_MAX_ROWS"])


def exact_scan(size: int) -> bool:
    """Whether a filtered set of ``size`` rows is scanned exactly rather than by HNSW."""
    return size <= exact_scan_max_rows()


def vector_signal_get(
    *,
    project: Project,
    space: EmbeddingSpace,
    query: np.ndarray,
    filters: SearchFilters,
    limit: int,
    collection_size: int,
    linked: set[Any] | None,
    distance_ids: list[Any],
    aggregate: str = "mean",
    link_limit: int | None = None,
    link_ids: list[Any] | None = None,
) -> VectorSignal:
    """The ``limit`` nearest memories; the neighbours of those of the first
    ``link_limit`` (None: all) not in ``linked`` (None: no neighbours wanted), and of
    ``link_ids`` (another signal's candidates: their links come in the same statement);
    the distances of ``distance_ids`` and of those
    neighbours. An exact scan does it in one round trip, the index in two or three.
    A memory's distance is the ``aggregate`` (mean or max similarity) of its windows'.
    One user's set of more than a few rows goes through the compact scan (compact.py)
    unless it is too large for that too; other sets by the float exact scan up to
    EXACT_SCAN_MAX_ROWS, past it by the index."""
    # compact.py builds on this module's VectorSignal: imported here, not at the top
    from memories.services.search.compact import compact_scan_applies, compact_vector_candidates

    link_known = list(linked) if linked is not None else None
    if compact_scan_applies(filters, collection_size):
        signal = compact_vector_candidates(
            project=project, space=space, query=query, filters=filters, limit=limit,
            link_known=link_known, distance_ids=distance_ids, size=collection_size,
            aggregate=aggregate, link_limit=link_limit, link_ids=link_ids or [],
        )  # fmt: skip
        if signal is not None:
            return signal
        collection_size = 0  # the filters dropped most of the user's rows: scan exactly
    if exact_scan(collection_size):
        return exact_vector_candidates(
            project=project, space=space, query=query, filters=filters, limit=limit,
            link_known=link_known, distance_ids=distance_ids, aggregate=aggregate,
            link_limit=link_limit, link_ids=link_ids or [],
        )  # fmt: skip
    nearest = index_vector_candidates(
        project=project, space=space, query=query, filters=filters, limit=limit,
        aggregate=aggregate, size=collection_size,
    )  # fmt: skip
    found = {memory_id for memory_id, _ in nearest}
    # the nearest rows' neighbours; the neighbours' own neighbours are not wanted
    first = nearest[:link_limit]  # None: all
    unlinked = [m for m, _ in first if m not in linked] if linked is not None else []
    wanted = list(dict.fromkeys([*(link_ids or []), *unlinked]))
    unscored = [memory_id for memory_id in distance_ids if memory_id not in found]
    if not (wanted or unscored):
        return VectorSignal(nearest, {}, {})
    around = neighbours_and_distances(
        project=project, filters=filters, space=space, query=query,
        link_ids=wanted, distance_ids=unscored, aggregate=aggregate,
    )  # fmt: skip
    return VectorSignal(nearest, around.links, around.distances, around.sizes)


def vector_candidates(
    *,
    project: Project,
    space: EmbeddingSpace,
    query: np.ndarray,
    filters: SearchFilters,
    limit: int,
    aggregate: str = "mean",
) -> list[tuple[Any, float]]:
    """(memory id, cosine distance) of the nearest embedded memories, nearest first,
    by the scan ``vector_signal_get`` chooses for the filtered set."""
    return vector_signal_get(
        project=project, space=space, query=query, filters=filters, limit=limit,
        collection_size=collection_size_get(project=project, filters=filters), linked=None,
        distance_ids=[], aggregate=aggregate,
    ).nearest  # fmt: skip


def index_vector_candidates(
    *,
    project: Project,
    space: EmbeddingSpace,
    query: np.ndarray,
    filters: SearchFilters,
    limit: int,
    size: int,
    aggregate: str = "mean",
) -> list[tuple[Any, float]]:
    """``vector_candidates`` through the space's HNSW index (``size``: the filtered
    set's rows, for the candidate list: ``hnsw_ef_search``).

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
    wanted = limit if aggregate == "max" else limit * WINDOW_RERANK
    windows = wanted * 2
    while True:
        read, nearest = _nearest_windows(
            project=project, space=space, query=query, filters=filters, limit=windows,
            with_mean=aggregate == "mean", ef_search=hnsw_ef_search(size, windows),
        )  # fmt: skip
        if len(nearest) >= wanted or read < windows or windows >= MAX_WINDOWS_READ:
            break
        windows = min(windows * 4, MAX_WINDOWS_READ)
    if aggregate == "max":
        return [(memory_id, best) for memory_id, best, _ in nearest[:limit]]
    by_mean = sorted(nearest[:wanted], key=lambda row: row[2])
    return [(memory_id, mean) for memory_id, _, mean in by_mean[:limit]]


# mean aggregate through the index: memories re-ranked by their mean, per memory wanted
WINDOW_RERANK = 4

# the most windows one index search reads looking for enough distinct memories
MAX_WINDOWS_READ = 10_000

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
    *,
    project: Project,
    space: EmbeddingSpace,
    query: np.ndarray,
    filters: SearchFilters,
    limit: int,
    with_mean: bool,
    ef_search: int,
) -> tuple[int, list[tuple[Any, float, float]]]:
    """How many windows were read (the ``limit`` nearest), and each memory among them
    once: (memory id, its nearest window's distance, the mean distance of all its
    windows when ``with_mean``, else that nearest one's), nearest window first. One
    round trip."""
    where, params = filters.sql(project)
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
            {**params, "query_vector": vector_literal(query), "limit": limit,
             "with_mean": with_mean},
        )  # fmt: skip
        rows = cursor.fetchall()
    # relaxed_order may return rows slightly out of order: sorted here
    nearest = sorted(
        ((memory_id, float(best), float(best if mean is None else mean))
         for _, memory_id, best, mean in rows),
        key=lambda row: row[1],
    )  # fmt: skip
    return (int(rows[0][0]) if rows else 0), nearest


def neighbours_and_distances(
    *,
    project: Project,
    filters: SearchFilters,
    space: EmbeddingSpace,
    query: np.ndarray,
    link_ids: list[Any],
    distance_ids: list[Any],
    aggregate: str = "mean",
) -> VectorSignal:
    """The neighbouring turns of ``link_ids`` (with their sizes), and the cosine
    distances of ``distance_ids`` and of those neighbours, in one round trip: a
    VectorSignal without nearest memories."""
    links_select, params = links_sql(project, filters)
    with prepared_cursor() as cursor:
        cursor.execute(
            f"""
            WITH links AS MATERIALIZED ({links_select}),
            wanted AS (
                SELECT unnest(%(distance_ids)s::uuid[]) AS id
                UNION SELECT previous FROM links UNION SELECT following FROM links
            )
            SELECT true, NULL::float8, id, previous, following, {LINK_SIZES} FROM links
            UNION ALL
            SELECT false, {window_sql(aggregate)}(e.vector <=> %(query_vector)s::vector),
                   e.memory_id, NULL, NULL, {NO_LINK_SIZES}
            FROM memories_embedding e JOIN wanted w ON w.id = e.memory_id
            WHERE e.space_id = {int(space.pk)}
            GROUP BY e.memory_id
            """,
            {
                **params,
                "link_ids": id_array(link_ids),
                "distance_ids": id_array(distance_ids),
                "query_vector": vector_literal(query),
            },
        )
        signal = VectorSignal([], {}, {})
        for is_link, distance, *row in cursor.fetchall():
            if is_link:
                link_read(signal.links, signal.sizes, row)
            else:
                signal.distances[row[0]] = float(distance)
        return signal


EXACT_SQL = """
WITH candidates AS MATERIALIZED (SELECT m.id FROM memories_memory m WHERE {where}),
window_distances AS MATERIALIZED (
    SELECT e.memory_id AS id, e.vector <=> %(query_vector)s::vector AS distance
    FROM memories_embedding e JOIN candidates c ON c.id = e.memory_id
    WHERE e.space_id = {space_id}
),
scored AS MATERIALIZED (
    SELECT id, {aggregate}(distance) AS distance FROM window_distances GROUP BY id
),
nearest AS MATERIALIZED (SELECT id, distance FROM scored ORDER BY distance, id LIMIT %(limit)s),
links AS MATERIALIZED ({links} AND %(with_links)s),
wanted AS (
    SELECT unnest(%(distance_ids)s::uuid[]) AS id
    UNION SELECT previous FROM links UNION SELECT following FROM links
)
SELECT 0, id, distance, NULL::uuid, NULL::uuid, {no_sizes} FROM nearest
UNION ALL SELECT 1, id, NULL, previous, following, {sizes} FROM links
UNION ALL SELECT 2, s.id, s.distance, NULL, NULL, {no_sizes} FROM scored s JOIN wanted USING (id)
"""


def exact_vector_candidates(
    *,
    project: Project,
    space: EmbeddingSpace,
    query: np.ndarray,
    filters: SearchFilters,
    limit: int,
    link_known: list[Any] | None,
    distance_ids: list[Any],
    aggregate: str = "mean",
    link_limit: int | None = None,
    link_ids: list[Any] | None = None,
) -> VectorSignal:
    """The nearest memories by an exact scan of a small filtered set, with
    ``neighbours_and_distances`` for the result, in one round trip.

    The untyped operator cannot use the (cast) HNSW index: an exact scan by design.
    The windows' distances are computed before they are grouped by memory, so the
    grouping sorts ids and numbers, not 1.5 KB vectors (which spilled to disk at 10,000
    rows with the default work_mem).
    It computes every filtered row's distance anyway, so the distances the ranking
    needs (keyword candidates', neighbours') come from it for free. Links are looked
    up for the nearest rows not in ``link_known`` and for ``link_ids``; ``None``: no
    links.
    """
    where, params = filters.sql(project)
    links, links_params = links_sql(project, filters, ids=NEAREST_UNLINKED)
    with prepared_cursor() as cursor:
        cursor.execute(
            EXACT_SQL.format(
                where=where, space_id=int(space.pk), links=links, aggregate=window_sql(aggregate),
                sizes=LINK_SIZES, no_sizes=NO_LINK_SIZES,
            ),
            {
                **params, **links_params, "query_vector": vector_literal(query), "limit": limit,
                "link_known": id_array(link_known or []), "with_links": link_known is not None,
                "distance_ids": id_array(distance_ids), "link_limit": link_limit,
                "link_ids": id_array(link_ids or []),
            },
        )  # fmt: skip
        signal = VectorSignal([], {}, {})
        for part, memory_id, distance, *link in cursor.fetchall():
            if part == 0:
                signal.nearest.append((memory_id, float(distance)))
            elif part == 1:
                link_read(signal.links, signal.sizes, [memory_id, *link])
            else:
                signal.distances[memory_id] = float(distance)
    signal.nearest.sort(key=lambda row: row[1])
    return signal
