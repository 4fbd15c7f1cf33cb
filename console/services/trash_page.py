"""What the console's Trash page reads: the project's trashed memories, newest first,
each with who forgot it, when, and when the purge erases it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from console.services.user_page import Page, page_number
from memories.models import Memory, MemoryRevision, Project
from memories.services.configuration import project_settings_get

TRASH_PAGE = 50


@dataclass
class TrashedView:
    """One memory in the trash as the page shows it."""

    memory: Memory
    trashed_at: datetime
    trashed_by: str  # the operator (or key, or task) whose forget put it there
    erased_after: datetime


def trash_page(*, project: Project, page: str | None, user: str = "") -> Page:
    """A page of the project's trashed memories (one user's by external id), the most
    recently trashed first; ``items`` are TrashedView."""
    trashed = Memory.objects.with_external_ids().filter(project=project, status="trashed")
    if user:
        trashed = trashed.filter(end_user__external_id=user)
    count = trashed.count()
    number = page_number(page, pages=max(1, -(-count // TRASH_PAGE)))
    start = (number - 1) * TRASH_PAGE
    rows = list(trashed.order_by("-updated_at", "-pk")[start : start + TRASH_PAGE])
    days = project_settings_get(project=project).pruning.trash_days
    by = _trashed_by(project=project, ids=[row.pk for row in rows])
    items = [
        TrashedView(
            memory=row,
            trashed_at=row.updated_at,
            trashed_by=by.get(row.pk, "?"),
            erased_after=row.updated_at + timedelta(days=days),
        )
        for row in rows
    ]
    return Page(items=items, number=number, count=count, size=TRASH_PAGE)


def _trashed_by(*, project: Project, ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Who made each memory's latest trash revision."""
    latest = (
        MemoryRevision.objects.filter(project=project, memory_id__in=ids, action="trash")
        .order_by("memory_id", "-created_at", "-pk")
        .distinct("memory_id")
        .values_list("memory_id", "actor")
    )
    return dict(latest)
