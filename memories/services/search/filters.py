"""Which memories a search may return, as a WHERE clause every step shares."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memories.models import Memory, Project


def id_array(ids: Iterable[uuid.UUID]) -> str:
    """Memory ids as one array literal, for a ``%s::uuid[]`` parameter. psycopg adapts
    a list element by element (~2.4 us a UUID, then the server parses each quoted one):
    a context's search sends ~1,500 ids, ~3.5 ms of its time that this text saves."""
    return "{" + ",".join(memory_id.hex for memory_id in ids) + "}"


# the row of the agent and the rooms of the world a search names, within the project:
# an uncorrelated subquery, run once per statement (an InitPlan), whatever the scan
AGENT_SQL = (
    "SELECT filter_agent.id FROM memories_agent filter_agent"
    " WHERE filter_agent.project_id = %(filter_project)s"
    " AND filter_agent.external_id = %(filter_agent)s"
)
WORLD_ROOMS_SQL = (
    "SELECT filter_room.id FROM memories_room filter_room"
    " WHERE filter_room.project_id = %(filter_project)s"
    " AND filter_room.world_id = %(filter_world)s"
)


@dataclass
class SearchFilters:
    """Which memories a search may return. Users and rooms by internal row id; the
    agent and the world by the ids the agent platform gives them (ElizaOS ``agentId``,
    ``worldId``), resolved in the statement itself: an agent or world the project does
    not have matches nothing, and a room moved to another world is found in it at once
    (a world is no row, only the ``world_id`` of rooms; a memory's world is its room's)."""

    end_user_id: int | None = None
    room_id: int | None = None
    agent: str | None = None  # the agent's external id
    world: str | None = None  # the world_id of the memory's room
    kinds: list[str] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    start: datetime | None = None
    end: datetime | None = None
    statuses: list[str] = field(default_factory=lambda: [Memory.Status.ACTIVE])
    document_id: uuid.UUID | None = None  # the knowledge chunks of one document
    shared: bool = False  # only what belongs to no user (the project's own knowledge)

    def sql(self, project: Project, alias: str = "m") -> tuple[str, dict[str, Any]]:
        """A WHERE clause over memories_memory AS ``alias`` and its named parameters.

        The names (``filter_*``) do not depend on the alias, so one query may hold the
        clause several times, over several aliases, with one set of parameters.
        """
        clauses = [
            f"{alias}.project_id = %(filter_project)s",
            f"{alias}.status = ANY(%(filter_statuses)s)",
        ]
        params: dict[str, Any] = {"filter_project": project.pk, "filter_statuses": self.statuses}
        if self.end_user_id is not None:
            clauses.append(f"{alias}.end_user_id = %(filter_end_user)s")
            params["filter_end_user"] = self.end_user_id
        if self.shared:
            clauses.append(f"{alias}.end_user_id IS NULL")
        if self.room_id is not None:
            clauses.append(f"{alias}.room_id = %(filter_room)s")
            params["filter_room"] = self.room_id
        if self.agent is not None:
            clauses.append(f"{alias}.agent_id = ({AGENT_SQL})")
            params["filter_agent"] = self.agent
        if self.world is not None:
            clauses.append(f"{alias}.room_id IN ({WORLD_ROOMS_SQL})")
            params["filter_world"] = self.world
        if self.kinds:
            clauses.append(f"{alias}.kind = ANY(%(filter_kinds)s)")
            params["filter_kinds"] = self.kinds
        if self.metadata:
            clauses.append(f"{alias}.metadata @> %(filter_metadata)s::jsonb")
            params["filter_metadata"] = json.dumps(self.metadata)
        if self.start is not None:
            clauses.append(f"{alias}.created_at >= %(filter_start)s")
            params["filter_start"] = self.start
        if self.end is not None:
            clauses.append(f"{alias}.created_at < %(filter_end)s")
            params["filter_end"] = self.end
        if self.document_id is not None:
            clauses.append(f"{alias}.document_id = %(filter_document)s")
            params["filter_document"] = self.document_id
        return " AND ".join(clauses), params
