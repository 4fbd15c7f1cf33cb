"""Neighbouring turns: the previous and next message of a message's room.

Evidence in a conversation often sits one turn away from the turn that matches the
question (a question and its answer, say); auto mode raises a turn by its
neighbours' scores (see ranking.py).
"""

from __future__ import annotations

from typing import Any

from memories.models import Memory, Project
from memories.services.search.filters import SearchFilters, id_array
from memories.services.search.prepared import prepared_cursor

# links_sql's clause for the rows of a ``nearest`` CTE whose links are not known yet,
# among its first ``link_limit`` rows (NULL: all of them), and the rows given in
# ``link_ids`` (another signal's: the keyword candidates' links come with the vector
# step's statement instead of one of their own)
NEAREST_UNLINKED = (
    "c.id IN (SELECT unnest(%(link_ids)s::uuid[]) UNION SELECT id FROM ("
    "SELECT id FROM nearest ORDER BY distance, id LIMIT %(link_limit)s"
    ") first WHERE NOT id = ANY(%(link_known)s::uuid[]))"
)
# links_sql's size columns, and as many NULLs for the other rows of a UNION beside them
LINK_SIZES = "bytes, previous_bytes, following_bytes"
NO_LINK_SIZES = "NULL::int, NULL::int, NULL::int"


def links_sql(
    project: Project, filters: SearchFilters, ids: str = "c.id = ANY(%(link_ids)s::uuid[])"
) -> tuple[str, dict[str, Any]]:
    """SELECT (id, previous id, next id, then LINK_SIZES: the three turns' sizes in bytes)
    for the messages chosen by the ``ids`` clause (whose parameters the caller adds), and
    the filters' parameters. The sizes are what auto mode's neighbour fusion reads of a
    linked turn (fusion.py): read here from the rows the lookup reads anyway (the stored
    value's header), they cost no statement of their own."""
    where, params = filters.sql(project, alias="x")
    neighbour_sql = f"""
        SELECT x.id, octet_length(x.content) AS bytes FROM memories_memory x
        WHERE x.project_id = c.project_id AND x.room_id = c.room_id AND x.kind = c.kind
          AND {where} AND (x.created_at, x.id) {{op}} (c.created_at, c.id)
        ORDER BY x.created_at {{order}}, x.id {{order}} LIMIT 1
    """
    sql = f"""
        SELECT c.id, previous.id AS previous, following.id AS following,
               octet_length(c.content) AS bytes, previous.bytes AS previous_bytes,
               following.bytes AS following_bytes
        FROM memories_memory c
        LEFT JOIN LATERAL ({neighbour_sql.format(op="<", order="DESC")}) previous ON true
        LEFT JOIN LATERAL ({neighbour_sql.format(op=">", order="ASC")}) following ON true
        WHERE c.kind = '{Memory.Kind.MESSAGE}' AND c.room_id IS NOT NULL AND {ids}
    """
    return sql, params


def neighbour_ids(previous: Any, following: Any) -> list[Any]:
    return [n for n in (previous, following) if n is not None]


def link_read(
    links: dict[Any, list[Any]], sizes: dict[Any, int], row: tuple[Any, ...] | list[Any]
) -> None:
    """One row of links_sql (id, previous, following, the three sizes) into ``links``
    and ``sizes``."""
    memory_id, previous, following, *row_sizes = row
    links[memory_id] = neighbour_ids(previous, following)
    for turn, size in zip((memory_id, previous, following), row_sizes, strict=True):
        if turn is not None and size is not None:
            sizes[turn] = int(size)


def message_neighbours(
    *, project: Project, filters: SearchFilters, ids: list[Any]
) -> tuple[dict[Any, list[Any]], dict[Any, int]]:
    """For each message among ``ids``: the previous and next message of its room that
    the filters allow; and the sizes of those turns in bytes."""
    links: dict[Any, list[Any]] = {}
    sizes: dict[Any, int] = {}
    if not ids:
        return links, sizes
    sql, params = links_sql(project, filters)
    with prepared_cursor() as cursor:
        cursor.execute(sql, {**params, "link_ids": id_array(ids)})
        for row in cursor.fetchall():
            link_read(links, sizes, row)
    return links, sizes
