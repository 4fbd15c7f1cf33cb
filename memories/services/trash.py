"""The trash: what an operator forgets in the console waits there, out of search and
contexts, for the project's ``pruning.trash_days``; an undo puts it back as it was;
after the grace the purge (pruning's, on the beat) erases it like any delete
(memories.services.erasure: the revisions keep a SHA-256, not the words).

A trashed memory has the status ``trashed``; its ``trash`` revision keeps the status
it had, which the undo restores. Forgetting a whole user (GDPR) does not pass through
the trash: it erases at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memories.models import Memory, MemoryRevision, Project
from memories.services.concurrency import deadlock_retried, memories_lock, owners_share_lock
from memories.services.configuration import project_settings_get
from memories.services.erasure import memories_erase
from memories.services.memories import memories_status_change
from memories.services.revisions import Actor

TRASHED = Memory.Status.TRASHED.value
PURGE_CHUNK = 500  # memories erased per statement by the trash purge


def memories_trash(
    *, project: Project, ids: Iterable[uuid.UUID], actor: Actor, intent: str = ""
) -> int:
    """Move the project's memories with these pks to the trash (those not trashed
    already), each recorded as a ``trash`` revision; returns how many moved."""
    wanted = list(ids)

    def trash() -> int:
        if not owners_share_lock(project_id=project.pk):
            return 0
        queryset = Memory.objects.for_project(project).filter(pk__in=wanted)
        locked = memories_lock(queryset.exclude(status=TRASHED))
        memories = list(Memory.objects.filter(pk__in=locked).order_by("pk"))
        memories_status_change(
            memories=memories, status=TRASHED, action="trash", actor=actor, intent=intent
        )
        return len(memories)

    return deadlock_retried(trash) if wanted else 0


def memories_untrash(*, project: Project, ids: Iterable[uuid.UUID], actor: Actor) -> int:
    """Take the project's trashed memories with these pks out of the trash, each back
    to the status it had before (its last ``trash`` revision's), recorded as an update
    with the intent "undo"; returns how many came back. Only within the grace: one
    trashed longer than ``pruning.trash_days`` ago stays for the purge. Nothing else
    needs restoring: a trashed memory keeps its text, metadata and vectors."""
    wanted = list(ids)

    def untrash() -> int:
        if not owners_share_lock(project_id=project.pk):
            return 0
        queryset = Memory.objects.for_project(project).filter(
            pk__in=wanted, status=TRASHED, updated_at__gte=_cutoff(project=project)
        )
        memories = list(Memory.objects.filter(pk__in=memories_lock(queryset)).order_by("pk"))
        previous = _statuses_before_trash(project=project, memories=memories)
        by_status: dict[str, list[Memory]] = {}
        for memory in memories:
            by_status.setdefault(previous.get(memory.pk, Memory.Status.ACTIVE), []).append(memory)
        for status, group in by_status.items():
            memories_status_change(
                memories=group, status=status, action="update", actor=actor, intent="undo"
            )
        return len(memories)

    return deadlock_retried(untrash) if wanted else 0


def _statuses_before_trash(*, project: Project, memories: list[Memory]) -> dict[uuid.UUID, str]:
    """Each memory's status before its latest trash revision."""
    revisions = (
        MemoryRevision.objects.filter(
            project=project, memory_id__in=[m.pk for m in memories], action="trash"
        )
        .order_by("memory_id", "-created_at", "-pk")
        .distinct("memory_id")
        .values_list("memory_id", "before")
    )
    found = {}
    for memory_id, before in revisions:
        status = (before or {}).get("status")
        if status in Memory.Status.values and status != TRASHED:
            found[memory_id] = status
    return found


def trash_erase(*, project: Project, actor: Actor, ids: Iterable[uuid.UUID] | None = None) -> int:
    """Erase now (memories.services.erasure) the project's trashed memories with these
    pks, or all of its trash with ``ids`` None, before their grace ends: an operator's
    "erase now" or "empty the trash". Only trashed memories; returns how many."""
    wanted = None if ids is None else list(ids)

    def erase() -> int:
        if not owners_share_lock(project_id=project.pk):
            return 0
        trashed = Memory.objects.for_project(project).filter(status=TRASHED)
        if wanted is not None:
            trashed = trashed.filter(pk__in=wanted)
        locked = memories_lock(trashed)
        later = Q(pk__in=locked)
        for start in range(0, len(locked), PURGE_CHUNK):
            chunk = locked[start : start + PURGE_CHUNK]
            memories_erase(
                project_id=project.pk, ids=chunk, actor=actor, reason="delete", scope=later
            )
        return len(locked)

    return deadlock_retried(erase)


def trash_expires(*, project: Project, trashed_at: datetime) -> datetime:
    """When a memory trashed at ``trashed_at`` is erased by the purge (at the earliest)."""
    return trashed_at + timedelta(days=project_settings_get(project=project).pruning.trash_days)


def trash_due(*, project: Project) -> bool:
    """Whether the trash holds memories past the grace."""
    return _expired(project=project).exists()


def trash_expired_count(*, project: Project) -> int:
    """Memories past the grace: what the next purge erases."""
    return _expired(project=project).count()


def trash_purge(*, project: Project, actor: Actor) -> int:
    """Erase the project's memories trashed longer than ``pruning.trash_days`` ago
    (by ``updated_at``: the trash is their last change), with what derives from them
    alone; returns how many. One transaction."""
    with transaction.atomic():
        ids = memories_lock(_expired(project=project))
        later = Q(pk__in=ids)  # erased by this purge's later chunks: left to them
        for start in range(0, len(ids), PURGE_CHUNK):
            memories_erase(
                project_id=project.pk,
                ids=ids[start : start + PURGE_CHUNK],
                actor=actor,
                reason="trash purge",
                scope=later,
            )
    return len(ids)


def trash_count(*, project: Project) -> int:
    """Memories in the project's trash now."""
    return Memory.objects.for_project(project).filter(status=TRASHED).count()


def _cutoff(*, project: Project) -> datetime:
    """Memories trashed before this are past the grace."""
    return timezone.now() - timedelta(days=project_settings_get(project=project).pruning.trash_days)


def _expired(*, project: Project) -> Any:
    cutoff = _cutoff(project=project)
    return Memory.objects.for_project(project).filter(status=TRASHED, updated_at__lt=cutoff)
