"""Read-side queries of the console's user page: what is remembered about one user.

Every list is one page read in SQL (LIMIT/OFFSET on an index order) and every count
comes from one GROUP BY of the user's memories, so the page costs the same few queries
for a user of ten memories or of ten thousand.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, F, Max, Q, Sum

from memories.models import (
    EndUser,
    Memory,
    MemoryQuerySet,
    MemoryRevision,
    MemoryTally,
    Project,
    Room,
)
from memories.services.memories import RESTORED_FIELDS

PAGE_SIZE = 50
HISTORY_LIMIT = 100
# what the lists never show: a row's tsvector alone is as long as its text, and the
# JSON fields are decoded row by row
NOT_SHOWN = ("search_vector", "content_json", "source_ids")


@dataclass
class UserSummary:
    """A user's memory counts by kind and status, and the newest memory's time."""

    counts: dict[tuple[str, str], int]  # (kind, status) -> memories
    last_activity: datetime | None
    pending: int  # memories waiting for their embedding

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def by_kind(self) -> list[tuple[str, int, str]]:
        """(kind, count, what to call that many) of every kind the user has, in the
        kinds' declared order."""
        totals = dict.fromkeys(Memory.Kind.values, 0)
        for (kind, _status), count in self.counts.items():
            totals[kind] = totals.get(kind, 0) + count
        return [(kind, n, kind_label(kind, n)) for kind, n in totals.items() if n]

    def count(self, *, kind: str = "", status: str = "") -> int:
        """Memories of this kind and status ('' = any), without another query."""
        return sum(
            n
            for (k, s), n in self.counts.items()
            if (not kind or k == kind) and (not status or s == status)
        )


KIND_PLURALS = {"summary": "summaries", "knowledge": "knowledge chunks"}


def kind_label(kind: str, count: int) -> str:
    """'1 fact', '2 facts', '2 summaries': the kind's name for ``count`` of them."""
    if count == 1:
        return "knowledge chunk" if kind == "knowledge" else kind
    return KIND_PLURALS.get(kind, f"{kind}s")


def user_summary_get(*, project: Project, end_user: EndUser) -> UserSummary:
    """The user's counts by kind and status and last activity: one GROUP BY query."""
    rows = (
        Memory.objects.for_project(project)
        .filter(end_user=end_user)
        .values("kind", "status")
        .annotate(
            n=Count("id"),
            last=Max("created_at"),
            pending=Count("id", filter=Q(embedding_status=Memory.EmbeddingStatus.PENDING)),
        )
        .order_by()
    )
    counts: dict[tuple[str, str], int] = {}
    last: datetime | None = None
    pending = 0
    for row in rows:
        counts[(row["kind"], row["status"])] = row["n"]
        pending += row["pending"]
        if last is None or row["last"] > last:
            last = row["last"]
    return UserSummary(counts=counts, last_activity=last, pending=pending)


@dataclass
class RoomActivity:
    room: Room
    memories: int  # the user's memories in the room
    last_activity: datetime


def user_rooms_get(*, project: Project, end_user: EndUser) -> list[RoomActivity]:
    """The rooms the user has memories in, most recently active first (two queries)."""
    rows = (
        Memory.objects.for_project(project)
        .filter(end_user=end_user, room__isnull=False)
        .values("room_id")
        .annotate(n=Count("id"), last=Max("created_at"))
        .order_by("-last")
    )
    activity = {row["room_id"]: row for row in rows}
    rooms = Room.objects.for_project(project).only("external_id", "name").in_bulk(list(activity))
    return [
        RoomActivity(rooms[room_id], row["n"], row["last"])
        for room_id, row in activity.items()
        if room_id in rooms
    ]


RECENT_ROOMS = 20  # the rooms the context preview suggests


def user_recent_rooms(
    *, project: Project, end_user: EndUser, limit: int = RECENT_ROOMS
) -> list[Room]:
    """The rooms she has memories in, most recently written first, at most ``limit``
    (from her memories' tallies: milliseconds whatever her number of rooms)."""
    rows = (
        MemoryTally.objects.filter(project_id=project.pk, end_user_id=end_user.pk, room_id__gt=0)
        .values("room_id")
        .annotate(total=Sum("n"), last=Max("last_at"))
        .filter(total__gt=0)
        .order_by(F("last").desc(nulls_last=True), "room_id")[:limit]
    )
    ids = [row["room_id"] for row in rows]
    rooms = Room.objects.for_project(project).only("external_id", "name").in_bulk(ids)
    return [rooms[room_id] for room_id in ids if room_id in rooms]


def user_room_find(*, project: Project, end_user: EndUser, external_id: str) -> Room | None:
    """The project's room ``external_id`` if she has memories in it."""
    room = Room.objects.for_project(project).filter(external_id=external_id).first()
    if room is None or not room.memories.filter(end_user=end_user).exists():
        return None
    return room


@dataclass
class Page:
    """One page of a list; ``number`` counts from 1."""

    items: list[Any]
    number: int
    count: int
    size: int = PAGE_SIZE

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.count / self.size))

    @property
    def previous(self) -> int | None:
        return self.number - 1 if self.number > 1 else None

    @property
    def next(self) -> int | None:
        return self.number + 1 if self.number < self.pages else None

    @property
    def numbers(self) -> list[int | None]:
        """The page numbers worth a link: the first, the last and those near this one;
        None where numbers are left out."""
        near = range(max(1, self.number - 2), min(self.pages, self.number + 2) + 1)
        shown: list[int | None] = []
        for number in sorted({1, self.pages, *near}):
            if shown and number - (shown[-1] or 0) > 1:
                shown.append(None)
            shown.append(number)
        return shown


def page_number(raw: str | None, *, pages: int, default: int = 1) -> int:
    """A page number from a query parameter, clipped to 1..pages (junk: ``default``)."""
    try:
        number = int(raw) if raw else default
    except ValueError:
        number = default
    return min(max(1, number), pages)


def room_messages_page(*, project: Project, room: Room, page: str | None) -> Page:
    """A page of the room's messages, oldest first on the page; the newest page is the
    last and the default, and it is always full (page 1 holds the remainder): pages
    are cut from the newest end, read newest first with the room index and reversed."""
    queryset = Memory.objects.for_project(project).filter(room=room, kind=Memory.Kind.MESSAGE)
    count = queryset.count()
    pages = max(1, math.ceil(count / PAGE_SIZE))
    number = page_number(page, pages=pages, default=pages)
    offset = (pages - number) * PAGE_SIZE
    rows = list(
        queryset.annotate(user_external_id=F("end_user__external_id"))
        .defer(*NOT_SHOWN, "metadata")
        .order_by("-created_at", "-id")[offset : offset + PAGE_SIZE]
    )
    rows.reverse()
    return Page(items=rows, number=number, count=count)


@dataclass
class MemoryFilters:
    """The memory list's filters; '' and None mean any."""

    kind: str = ""
    status: str = ""
    start: datetime | None = None  # created_at >= start
    end: datetime | None = None  # created_at < end

    def apply(self, queryset: MemoryQuerySet) -> MemoryQuerySet:
        if self.kind:
            queryset = queryset.filter(kind=self.kind)
        if self.status:
            queryset = queryset.filter(status=self.status)
        if self.start is not None:
            queryset = queryset.filter(created_at__gte=self.start)
        if self.end is not None:
            queryset = queryset.filter(created_at__lt=self.end)
        return queryset


def user_memories_page(
    *,
    project: Project,
    end_user: EndUser,
    filters: MemoryFilters,
    page: str | None,
    summary: UserSummary | None = None,
) -> Page:
    """A page of the user's memories, newest first. Without a date filter the count
    comes from ``summary`` (no COUNT query); with one, one COUNT."""
    queryset = filters.apply(Memory.objects.for_project(project).filter(end_user=end_user))
    if summary is not None and filters.start is None and filters.end is None:
        count = summary.count(kind=filters.kind, status=filters.status)
    else:
        count = queryset.count()
    pages = max(1, math.ceil(count / PAGE_SIZE))
    number = page_number(page, pages=pages)
    offset = (number - 1) * PAGE_SIZE
    rows = list(
        queryset.with_external_ids()
        .defer(*NOT_SHOWN)
        .order_by("-created_at", "-id")[offset : offset + PAGE_SIZE]
    )
    return Page(items=rows, number=number, count=count)


def memory_for_console(*, project: Project, end_user: EndUser, memory_id: Any) -> Memory | None:
    """One of the user's memories as the console shows it (with its room's external id),
    or None if the user has no such memory."""
    return (
        Memory.objects.for_project(project)
        .filter(end_user=end_user, pk=memory_id)
        .with_external_ids()
        .first()
    )


# --- history -------------------------------------------------------------------------


@dataclass
class FieldChange:
    name: str
    before: Any
    after: Any

    @property
    def before_text(self) -> str:
        return _value_text(self.before)

    @property
    def after_text(self) -> str:
        return _value_text(self.after)


def _value_text(value: Any) -> str:
    """A snapshot value as the history shows it: text as is, the rest as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@dataclass
class RevisionView:
    """A revision as the history shows it: what changed, and whether its version (the
    state after it) can be restored."""

    revision: MemoryRevision
    changes: list[FieldChange] = field(default_factory=list)
    restorable: bool = False

    @property
    def actor_kind(self) -> str:
        """Who made the change, as a person reads it: 'API key', 'operator', 'system'."""
        return _ACTOR_KINDS.get(self.revision.actor_type, self.revision.actor_type)


_ACTOR_KINDS = {"api_key": "API key", "operator": "operator", "system": "system task"}


def memory_history_get(*, project: Project, memory: Memory) -> list[RevisionView]:
    """The memory's revisions, newest first, each with its changed fields; every version
    but the current one is restorable while the memory exists (one query, by its public
    id: the index's)."""
    revisions = list(
        MemoryRevision.objects.filter(
            project=project, memory_public_id=memory.public_id, memory_id=memory.pk
        ).order_by("-created_at", "-pk")[:HISTORY_LIMIT]
    )
    views = []
    for index, revision in enumerate(revisions):
        views.append(
            RevisionView(
                revision=revision,
                changes=revision_changes(revision.before, revision.after),
                restorable=index > 0
                and revision.after is not None
                and "content" in revision.after  # an erased one keeps no words
                and revisions[0].after is not None
                and any(
                    revision.after.get(n) != revisions[0].after.get(n) for n in RESTORED_FIELDS
                ),
            )
        )
    return views


# row ids say nothing to a person; shown only when an update changes them
_ID_FIELDS = ("end_user_id", "room_id")


def revision_changes(
    before: dict[str, Any] | None, after: dict[str, Any] | None
) -> list[FieldChange]:
    """The fields whose value differs between two snapshots; for a create or a delete
    (one side missing), the other side's fields that hold something."""
    whole = before is None or after is None
    before, after = before or {}, after or {}
    changes = []
    for name in Memory.SNAPSHOT_FIELDS:
        old, new = before.get(name), after.get(name)
        if old == new or (whole and (name in _ID_FIELDS or (old or new) in ("", [], {}))):
            continue
        changes.append(FieldChange(name, old, new))
    return changes
