"""Vector candidates of one user's memories by a compact exact scan: every window of the
user is compared with the query by the Hamming distance of their binary quantizations
(pgvector ``binary_quantize``, one bit per dimension), read from the covering index
``embedding_owner_bits`` of memories_embedding_bits (migration 0011, kept by triggers),
where a user's windows sit side by side; the
nearest windows' memories (a shortlist) are checked against the filters and re-ranked
by their float vectors, each memory by its windows' aggregate.

Why: at 1,000,000 memories a user of 10,000 is 1% of the table. The float exact scan
reads 10,000 rows spread over the whole table (one index probe and one heap page each),
the HNSW index with that filter reads about k/1% of its tuples, and both take tens of
milliseconds; the user's bits are ~100 contiguous index pages. The float re-rank of a
shortlist of ``shortlist_size`` windows keeps recall@10 against the float exact scan at
~0.99 (measured in bench at 1M, see BENCHMARKS.md).

A user of at least RETRIEVAL_CODES_MIN_ROWS rows has their codes kept in the web
process (codes.py): the Hamming distances are computed there in numpy, and the query
sends the database the shortlist's memories (with the nearest of the rows written
since the codes were loaded) instead of scanning the index (at 1M memories, a user of
100,000 windows: vector step ~26-34 -> ~11-16 ms in process; BENCHMARKS.md).

The scan covers the user's windows whatever the other filters (status, kinds, room,
dates, metadata); they are applied to the shortlist, nearest first. If fewer than ``limit`` memories
of a full shortlist pass them, the caller falls back to the float exact scan (None).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction

from memories.models import EmbeddingSpace
from memories.services.search.codes import (
    DELTA_RELOAD_ROWS,
    OwnerCodes,
    codes_apply,
    owner_codes_get,
    owner_codes_stale,
)
from memories.services.search.filters import SearchFilters
from memories.services.search.neighbours import (
    LINK_SIZES,
    NEAREST_UNLINKED,
    NO_LINK_SIZES,
    links_sql,
)
from memories.services.search.prepared import local_settings, prepared_cursor
from memories.services.search.signal import (
    VectorRequest,
    VectorSignal,
    scan_params,
    signal_read,
    window_sql,
)

# name of the covering index the scan reads (migration 0011_embedding_owner_bits)
OWNER_BITS_INDEX = "embedding_owner_bits"


def compact_scan_applies(filters: SearchFilters, size: int) -> bool:
    """Whether the filtered set is one user's (or the project's shared memories) and
    of a size the compact scan serves: above RETRIEVAL_COMPACT_SCAN_MIN_ROWS (at 1M
    memories it was as fast as the float exact scan at 1,000 rows, 3x faster at 2,500
    and 5x at 5,000), up to RETRIEVAL_COMPACT_SCAN_MAX_ROWS (past it, the HNSW index)."""
    keyed = filters.end_user_id is not None or filters.shared
    retrieval = settings.RETRIEVAL
    return keyed and int(retrieval["COMPACT_SCAN_MIN_ROWS"]) < size <= int(
        retrieval["COMPACT_SCAN_MAX_ROWS"]
    )


def shortlist_size(limit: int, *, cached: bool = False) -> int:
    """How many windows are re-ranked by float vectors: BITS_SHORTLIST_PER_RESULT per
    result asked for, at least BITS_SHORTLIST_MIN and at most BITS_SHORTLIST_MAX, the
    nearest by Hamming distance: a context's search asks for up to 320 candidates, whose
    tail the fused ranking hardly uses, and each shortlisted window costs an index
    probe. At a user of 100,000 windows and 168 candidates asked for, against the float
    exact scan: 1,200 windows kept recall@40 0.990 (recall@168 0.939) in 26.7 ms, 2,000
    windows 0.996 (0.976) in 32.4 ms (BENCHMARKS.md). From the process's codes
    (``cached``), ranked by the asymmetric score, CODES_SHORTLIST_* instead: 8 per
    result, 200 to 600, found more of the float scan's nearest than 20 per result, 400
    to 1,200, by Hamming distance (codes.py)."""
    retrieval = settings.RETRIEVAL
    prefix = "CODES_SHORTLIST" if cached else "BITS_SHORTLIST"
    wanted = limit * int(retrieval[f"{prefix}_PER_RESULT"])
    return max(int(retrieval[f"{prefix}_MIN"]), min(wanted, int(retrieval[f"{prefix}_MAX"])))


# the shortlist found by the database: the owner's nearest windows by Hamming distance
SCANNED = """
WITH windows AS MATERIALIZED (
    SELECT b.memory_id FROM memories_embedding_bits b
    WHERE b.space_id = {space_id} AND b.project_id = %(filter_project)s AND {owner}
    ORDER BY b.bits <~> binary_quantize(%(query_vector)s::vector) LIMIT %(shortlist)s
),"""
# the shortlist found in the process's codes (codes.py), with the nearest of the rows
# written since they were loaded
CACHED = """
WITH delta AS MATERIALIZED (
    SELECT b.memory_id, b.bits FROM memories_embedding_bits b
    WHERE b.space_id = {space_id} AND b.project_id = %(filter_project)s AND {owner}
        AND b.xid >= %(xmin)s::xid8
),
windows AS MATERIALIZED (
    SELECT unnest(%(cached)s::uuid[]) AS memory_id
    UNION ALL (
        SELECT memory_id FROM delta
        ORDER BY bits <~> binary_quantize(%(query_vector)s::vector) LIMIT %(shortlist)s
    )
),"""

# the rest: re-rank the shortlist by float vectors, check the filters, read the links and
# the distances asked for; a CACHED shortlist adds DELTA_COUNT
COMPACT_SQL = """
window_distances AS MATERIALIZED (
    SELECT e.memory_id AS id, e.vector <=> %(query_vector)s::vector AS distance
    FROM memories_embedding e
    WHERE e.memory_id IN (SELECT memory_id FROM windows) AND e.space_id = {space_id}
),
ranked AS MATERIALIZED (
    SELECT id, {aggregate}(distance) AS distance FROM window_distances
    GROUP BY id ORDER BY distance, id
),
nearest AS MATERIALIZED (
    SELECT r.id, r.distance FROM ranked r
    WHERE (SELECT true FROM memories_memory m WHERE m.id = r.id AND {where})
    LIMIT %(limit)s
),
links AS MATERIALIZED ({links} AND %(with_links)s),
wanted AS (
    SELECT unnest(%(distance_ids)s::uuid[]) AS id
    UNION SELECT previous FROM links UNION SELECT following FROM links
)
SELECT 0, id, distance, NULL::uuid, NULL::uuid, {no_sizes} FROM nearest
UNION ALL SELECT 1, id, NULL, previous, following, {sizes} FROM links
UNION ALL
SELECT 2, e.memory_id, {aggregate}(e.vector <=> %(query_vector)s::vector), NULL, NULL, {no_sizes}
FROM memories_embedding e JOIN wanted w ON w.id = e.memory_id
WHERE e.space_id = {space_id}
GROUP BY e.memory_id
UNION ALL SELECT 3, NULL, (SELECT count(*) FROM windows), NULL, NULL, {no_sizes}
"""
DELTA_COUNT = f"UNION ALL SELECT 4, NULL, (SELECT count(*) FROM delta), NULL, NULL, {NO_LINK_SIZES}"


# The filters are checked memory by memory in ``ranked``'s order (a scalar subquery, which
# PostgreSQL does not turn into a join, over the materialized CTE read in the order it
# was written) until ``limit`` pass: ~limit primary-key probes instead of one per
# shortlisted memory (800 probes were 15 of the 40 ms of an auto search on a busy machine).


def compact_vector_candidates(request: VectorRequest) -> VectorSignal | None:
    """The ``request.limit`` nearest memories of the user the filters name, with the
    neighbouring turns and the distances asked for (VectorRequest), in one round trip: a
    VectorSignal, or None when the shortlist was full and fewer than ``limit`` of its
    memories passed the filters. An owner of ``request.size`` rows whose codes the
    process holds (codes.py) has its shortlist found here and sent with the query."""
    project, space, filters, limit = request.project, request.space, request.filters, request.limit
    where, params = filters.sql(project)
    links, links_params = links_sql(project, filters, ids=NEAREST_UNLINKED)
    shortlist = shortlist_size(limit)
    key = (int(space.pk), int(project.pk), filters.end_user_id)
    codes = owner_codes_get(key, request.size) if codes_apply(request.size) else None
    sql = _compact_sql(
        space,
        filters,
        where=where,
        links=links,
        aggregate=request.aggregate,
        cached=codes is not None,
    )
    codes_shortlist = shortlist_size(limit, cached=True)
    cached, read = (
        _codes_shortlist(codes, request.query, codes_shortlist) if codes is not None else ({}, 0)
    )
    given = {**params, **links_params, **cached, "shortlist": shortlist}
    with transaction.atomic(), prepared_cursor() as cursor:
        # one process: parallel workers made a user of 100,000 windows slower (17 ms
        # alone, 22-25 ms with two workers) and take the other core from other requests
        local_settings("SET LOCAL max_parallel_workers_per_gather = 0")
        cursor.execute(sql, scan_params(request, given))
        signal, scanned, delta = signal_read(cursor.fetchall())
    if delta >= DELTA_RELOAD_ROWS:
        owner_codes_stale(key)  # too many rows read again since the codes' load
    full = scanned >= shortlist or (codes is not None and read >= codes_shortlist)
    if len(signal.nearest) < limit and full:
        return None  # the filters dropped too much of the shortlist: scan exactly
    return signal


def _compact_sql(
    space: EmbeddingSpace,
    filters: SearchFilters,
    *,
    where: str,
    links: str,
    aggregate: str,
    cached: bool,
) -> str:
    """The statement: the shortlist SCANNED in the database or sent (CACHED), then the
    rest."""
    if filters.end_user_id is None:
        owner = "b.end_user_id IS NULL"
    else:
        owner = "b.end_user_id = %(filter_end_user)s"
    template = CACHED + COMPACT_SQL + DELTA_COUNT if cached else SCANNED + COMPACT_SQL
    return template.format(
        space_id=int(space.pk),
        owner=owner,
        where=where,
        links=links,
        aggregate=window_sql(aggregate),
        sizes=LINK_SIZES,
        no_sizes=NO_LINK_SIZES,
    )


def _codes_shortlist(
    codes: OwnerCodes, query: np.ndarray, shortlist: int
) -> tuple[dict[str, Any], int]:
    """The CACHED query's parameters for the ``shortlist`` windows nearest in the
    process's codes, and how many windows they are."""
    nearest = codes.nearest(query, shortlist)
    # one array literal: psycopg adapting 1,200 UUIDs one by one took longer than the scan
    ids = "{" + ",".join(memory_id.hex() for memory_id in nearest) + "}"
    # the ids are distinct memories; the windows were min(shortlist, all)
    return {"cached": ids, "xmin": str(codes.xmin)}, min(shortlist, len(codes.ids))
