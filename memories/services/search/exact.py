"""Vector candidates by an exact scan: every window of the filtered set compared with the
query (the float vectors, cosine), for a small set; and the neighbouring turns and
distances a vector step asks for when its nearest memories came otherwise."""

from __future__ import annotations

from memories.services.search.filters import id_array
from memories.services.search.neighbours import (
    LINK_SIZES,
    NEAREST_UNLINKED,
    NO_LINK_SIZES,
    link_read,
    links_sql,
)
from memories.services.search.prepared import prepared_cursor
from memories.services.search.signal import (
    VectorRequest,
    VectorSignal,
    scan_params,
    signal_read,
    vector_literal,
    window_sql,
)


def neighbours_and_distances(request: VectorRequest) -> VectorSignal:
    """The neighbouring turns of ``request.link_ids`` (with their sizes), and the cosine
    distances of ``request.distance_ids`` and of those neighbours, in one round trip: a
    VectorSignal without nearest memories."""
    links_select, params = links_sql(request.project, request.filters)
    aggregate = window_sql(request.aggregate)
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
            SELECT false, {aggregate}(e.vector <=> %(query_vector)s::vector),
                   e.memory_id, NULL, NULL, {NO_LINK_SIZES}
            FROM memories_embedding e JOIN wanted w ON w.id = e.memory_id
            WHERE e.space_id = {int(request.space.pk)}
            GROUP BY e.memory_id
            """,
            {
                **params,
                "link_ids": id_array(request.link_ids),
                "distance_ids": id_array(request.distance_ids),
                "query_vector": vector_literal(request.query),
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


def exact_vector_candidates(request: VectorRequest) -> VectorSignal:
    """The nearest memories by an exact scan of a small filtered set, with their
    neighbouring turns and the distances asked for (VectorRequest), in one round trip.

    The untyped operator cannot use the (cast) HNSW index: an exact scan by design.
    The windows' distances are computed before they are grouped by memory, so the
    grouping sorts ids and numbers, not 1.5 KB vectors (which spilled to disk at 10,000
    rows with the default work_mem).
    It computes every filtered row's distance anyway, so the distances the ranking
    needs (keyword candidates', neighbours') come from it for free.
    """
    where, params = request.filters.sql(request.project)
    links, links_params = links_sql(request.project, request.filters, ids=NEAREST_UNLINKED)
    sql = EXACT_SQL.format(
        where=where,
        space_id=int(request.space.pk),
        links=links,
        aggregate=window_sql(request.aggregate),
        sizes=LINK_SIZES,
        no_sizes=NO_LINK_SIZES,
    )
    with prepared_cursor() as cursor:
        cursor.execute(sql, scan_params(request, {**params, **links_params}))
        signal, _, _ = signal_read(cursor.fetchall())
    return signal
