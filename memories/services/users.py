"""End users and rooms: idempotent create by external id, update, delete with memories."""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction

from memories.models import Agent, EndUser, Memory, Project, Room, Synopsis
from memories.providers.kept import Kept
from memories.services.concurrency import deadlock_retried, owners_share_lock
from memories.services.erasure import ErasureReceipt, admin_log_erase
from memories.services.erasure_synopsis import synopsis_caches_drop
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


def end_user_delete(*, end_user: EndUser, actor: Actor) -> ErasureReceipt:
    """Erase a user: its memories (memories.services.erasure), its documents, synopsis
    and synopsis history, and after the commit the working memory of every room it
    wrote in and its cached synopsis; returns the receipt (counts per table).

    The user's row is locked first (the lock order: concurrency.py): a worker writing
    beneath the user (a summary, a fact, a document's chunks) has committed by then, or
    waits and then finds the user gone; nothing of the user's is left behind. A user
    deleted meanwhile: an empty receipt."""
    return deadlock_retried(lambda: _owner_delete(end_user, actor))


def _owner_delete(row: EndUser | Room, actor: Actor) -> ErasureReceipt:
    """Erase a user or a room and its memories, its project held (FOR KEY SHARE) and
    its row locked (FOR UPDATE) first; an empty receipt if it is gone."""
    if not owners_share_lock(project_id=row.project_id):
        return ErasureReceipt()
    manager: Any = type(row).objects
    locked = manager.select_for_update().filter(pk=row.pk).first()
    if locked is None:
        return ErasureReceipt()
    if isinstance(locked, Room):
        rooms = [locked.pk]
        receipt = memories_delete(project=row.project, actor=actor, room=locked)
        receipt.counts["rooms"] += 1
    else:
        rooms = _rooms_written(locked)
        receipt = memories_delete(project=row.project, actor=actor, end_user=locked)
        receipt.add(_user_rows(locked))
    receipt.counts["working_memory_rooms"] += len(rooms)
    transaction.on_commit(partial(_working_clear, row.project_id, rooms))
    locked.delete()
    return receipt


def _rooms_written(end_user: EndUser) -> list[int]:
    """The rooms the user wrote in: their working memory may hold its words."""
    rows = Memory.objects.filter(project_id=end_user.project_id, end_user=end_user)
    return sorted(set(rows.filter(room_id__isnull=False).values_list("room_id", flat=True)))


def _user_rows(end_user: EndUser) -> ErasureReceipt:
    """What the user's own delete takes beyond its memories (the foreign keys cascade),
    counted for the receipt; its cached synopsis goes at commit."""
    receipt = ErasureReceipt()
    receipt.counts["users"] += 1
    documents = list(end_user.documents.values_list("pk", flat=True))
    receipt.counts["documents"] += len(documents)
    receipt.counts["admin_log_entries"] += admin_log_erase(
        "memories.enduser", [end_user.pk]
    ) + admin_log_erase("ingestion.document", documents)
    receipt.counts["synopses"] += Synopsis.objects.filter(end_user=end_user).count()
    receipt.counts["synopsis_revisions"] += end_user.synopsis_revisions.count()
    transaction.on_commit(partial(synopsis_caches_drop, [end_user.pk]))
    return receipt


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


def room_delete(*, room: Room, actor: Actor) -> ErasureReceipt:
    """Erase a room and all its memories (memories.services.erasure), and after the
    commit its working memory; returns the receipt. Locked first, as a user is
    (end_user_delete); a room deleted meanwhile: an empty receipt."""
    return deadlock_retried(lambda: _owner_delete(room, actor))


def _working_clear(project_id: int, room_ids: list[int]) -> None:
    # a user's rooms lose their whole working memory (the room's scratchpad may hold the
    # user's words); Redis down: the beat's trim clears rooms that no longer exist, the
    # others' notes expire with their TTL (the README says so)
    for room_id in room_ids:
        with contextlib.suppress(WorkingMemoryUnavailable):
            working_clear(room=Room(pk=room_id, project_id=project_id))
