"""End users and rooms: idempotent create by external id, update, delete with memories."""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction

from memories.models import Agent, EndUser, Project, Room
from memories.providers.kept import Kept
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


# the row ids of users and rooms by (model, project, external id), for
# LOOKUP_CACHE_SECONDS: an agent searches the same user turn after turn. A deleted user
# or room is forgotten at once in the process that deleted it (apps.py); elsewhere a
# search by its stale id finds nothing, as it should, for that long.
_row_ids: Kept[int] = Kept(settings.LOOKUP_CACHE_SECONDS)


def external_row_id(
    model: type[EndUser] | type[Room], project: Project, external_id: str
) -> int | None:
    """The row id of the project's user or room with this external id, None if none."""
    cache_key = (model.__name__, project.pk, external_id)
    row_id = _row_ids.get(cache_key)
    if row_id is None:
        row_id = (
            model.objects.for_project(project)
            .by_external_id(external_id)
            .values_list("pk", flat=True)
            .first()
        )
        if row_id is not None:
            _row_ids.put(cache_key, row_id)
    return row_id


def external_row_ids_forget(**_: object) -> None:
    """Forget the kept row ids (a user or room was deleted; connected in apps.py)."""
    _row_ids.clear()


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
