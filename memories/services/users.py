"""End users and rooms: idempotent create by external id, update, delete with memories."""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any

from django.db import transaction

from memories.models import Agent, EndUser, Project, Room
from memories.services.memories import memories_delete
from memories.services.revisions import Actor
from memories.services.working import WorkingMemoryUnavailable, working_clear


def end_user_get_or_create(
    *, project: Project, external_id: str, name: str = "", metadata: dict[str, Any] | None = None
) -> tuple[EndUser, bool]:
    """The user with this external id; created (with name/metadata) if it is new."""
    return EndUser.objects.get_or_create(
        project=project,
        external_id=external_id,
        defaults={"name": name, "metadata": metadata or {}},
    )


def end_user_update(*, end_user: EndUser, changes: dict[str, Any]) -> EndUser:
    """Change a user's name and/or metadata."""
    for name in ("name", "metadata"):
        if name in changes:
            setattr(end_user, name, changes[name])
    end_user.save()
    return end_user


@transaction.atomic
def end_user_delete(*, end_user: EndUser, actor: Actor) -> int:
    """Delete a user and all its memories (each recorded); returns the memory count."""
    count = memories_delete(project=end_user.project, end_user=end_user, actor=actor)
    end_user.delete()
    return count


def room_get_or_create(
    *,
    project: Project,
    external_id: str,
    name: str = "",
    agent: str | None = None,
    world_id: str = "",
    metadata: dict[str, Any] | None = None,
) -> tuple[Room, bool]:
    """The room with this external id; created if it is new."""
    agent_row = (
        Agent.objects.get_or_create(project=project, external_id=agent)[0] if agent else None
    )
    return Room.objects.get_or_create(
        project=project,
        external_id=external_id,
        defaults={
            "name": name,
            "agent": agent_row,
            "world_id": world_id,
            "metadata": metadata or {},
        },
    )


def room_update(*, room: Room, changes: dict[str, Any]) -> Room:
    """Change a room's name, world id and/or metadata."""
    for name in ("name", "world_id", "metadata"):
        if name in changes:
            setattr(room, name, changes[name])
    room.save()
    return room


@transaction.atomic
def room_delete(*, room: Room, actor: Actor) -> int:
    """Delete a room and all its memories (each recorded), and after the commit its
    working memory; returns the memory count."""
    count = memories_delete(project=room.project, room=room, actor=actor)
    transaction.on_commit(partial(_working_clear, Room(pk=room.pk, project_id=room.project_id)))
    room.delete()
    return count


def _working_clear(room: Room) -> None:
    # Redis down: the beat task clears the working memory of rooms that no longer exist
    with contextlib.suppress(WorkingMemoryUnavailable):
        working_clear(room=room)
