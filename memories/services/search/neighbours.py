"""Neighbouring turns: the previous and next message of a message's room.

Evidence in a conversation often sits one turn away from the turn that matches the
question (a question and its answer, say); auto mode raises a turn by its
neighbours' scores (see ranking.py).
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from memories.models import Memory, Project
from memories.services.search.filters import SearchFilters, id_array

# links_sql's clause for the rows of a ``nearest`` CTE whose links are not known yet
NEAREST_UNLINKED = "c.id IN (SELECT id FROM nearest WHERE NOT id = ANY(%(link_known)s::uuid[]))"


def links_sql(
    project: Project, filters: SearchFilters, ids: str = "c.id = ANY(%(link_ids)s::uuid[])"
) -> tuple[str, dict[str, Any]]:
    """SELECT (id, previous id, next id) for the messages chosen by the ``ids`` clause
    (whose parameters the caller adds), and the filters' parameters."""
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
    return sql, params


def neighbour_ids(previous: Any, following: Any) -> list[Any]:
    return [n for n in (previous, following) if n is not None]


def message_neighbours(
    *, project: Project, filters: SearchFilters, ids: list[Any]
) -> dict[Any, list[Any]]:
    """For each message among ``ids``: the previous and next message of its room that
    the filters allow."""
    if not ids:
        return {}
    sql, params = links_sql(project, filters)
    with connection.cursor() as cursor:
        cursor.execute(sql, {**params, "link_ids": id_array(ids)})
        return {
            memory_id: neighbour_ids(previous, following)
            for memory_id, previous, following in cursor.fetchall()
        }
