"""What a user's Rooms tab and room view read: her rooms with their message counts, and
one room's buffer window, summaries chain, own settings and working memory.

One count everywhere: a room's *messages* are its ``message`` memories of every
status and every speaker (active ones are unsummarized, archived ones summarized);
the room list and the room view's header both count exactly that (the messages pages
count the same rows: console.services.user_page.room_messages_page).
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Max, Q

from console.services.user_page import NOT_SHOWN, PAGE_SIZE, Page, page_number
from memories.config import ROOM_SECTIONS, settings_as_dict
from memories.models import EndUser, Memory, Project, Room
from memories.services.buffer import BufferView, buffer_get
from memories.services.configuration import project_settings_get, room_settings_get
from memories.services.working import WorkingList, working_list
from memories.services.working_store import WorkingMemoryUnavailable

ROOMS_PAGE = 50
SUMMARIES_PAGE = 20
MESSAGE = Memory.Kind.MESSAGE
ACTIVE = Memory.Status.ACTIVE


@dataclass
class RoomRow:
    """One of the user's rooms in the list."""

    room: Room
    messages: int  # every message of the room (see the module)
    unsummarized: int  # its active messages
    summaries: int
    last_activity: datetime | None


def user_rooms_page(*, project: Project, end_user: EndUser, page: str | None) -> Page:
    """A page of the rooms the user has memories in, the most recently active first,
    each with the room's counts (two GROUP BYs and the rooms' rows)."""
    mine = (
        Memory.objects.for_project(project)
        .filter(end_user=end_user, room__isnull=False)
        .values("room_id")
        .annotate(last=Max("created_at"))
        .order_by("-last", "room_id")
    )
    count = mine.count()
    number = page_number(page, pages=max(1, math.ceil(count / ROOMS_PAGE)))
    start = (number - 1) * ROOMS_PAGE
    rows = list(mine[start : start + ROOMS_PAGE])
    ids = [row["room_id"] for row in rows]
    counts = room_counts(project=project, room_ids=ids)
    rooms = Room.objects.for_project(project).in_bulk(ids)
    items = [
        RoomRow(rooms[row["room_id"]], *counts.get(row["room_id"], (0, 0, 0)), row["last"])
        for row in rows
        if row["room_id"] in rooms
    ]
    return Page(items=items, number=number, count=count, size=ROOMS_PAGE)


def room_counts(*, project: Project, room_ids: list[int]) -> dict[int, tuple[int, int, int]]:
    """Each room's (messages, unsummarized messages, summaries), one GROUP BY."""
    rows = (
        Memory.objects.for_project(project)
        .filter(room_id__in=room_ids, kind__in=[MESSAGE, Memory.Kind.SUMMARY])
        .values("room_id")
        .annotate(
            messages=Count("id", filter=Q(kind=MESSAGE)),
            unsummarized=Count("id", filter=Q(kind=MESSAGE, status=ACTIVE)),
            summaries=Count("id", filter=Q(kind=Memory.Kind.SUMMARY)),
        )
        .order_by()
    )
    return {r["room_id"]: (r["messages"], r["unsummarized"], r["summaries"]) for r in rows}


def user_room_get(*, project: Project, end_user: EndUser, room_id: int) -> Room | None:
    """The project's room with this id if the user has memories in it, else None."""
    room = Room.objects.for_project(project).select_related("project").filter(pk=room_id).first()
    if room is None:
        return None
    if not Memory.objects.for_project(project).filter(end_user=end_user, room=room).exists():
        return None
    return room


@dataclass
class BufferPanel:
    """The room's buffer now: the window, capacity and how many turns wait unsummarized."""

    view: BufferView

    @property
    def capacity(self) -> int:
        return self.view.settings.max_size * self.view.settings.buffer_multiplier

    @property
    def over_capacity(self) -> bool:
        """More unsummarized turns than the capacity: a summary is due (work in progress)."""
        return self.view.unsummarized > self.capacity

    @property
    def fill_percent(self) -> int:
        return min(100, round(100 * self.view.unsummarized / max(1, self.capacity)))


def buffer_panel(*, room: Room) -> BufferPanel:
    return BufferPanel(buffer_get(room=room))


@dataclass
class SummaryView:
    """One summary of the room's chain."""

    memory: Memory
    turns: int  # the messages it condensed (its source ids)
    covered: int  # all the messages the chain up to it covers

    @property
    def superseded(self) -> bool:
        return self.memory.status == Memory.Status.SUPERSEDED

    @property
    def first_at(self) -> datetime | None:
        """When the first turn it condensed was said (its metadata's)."""
        return _when(self.memory.metadata.get("first_message_at"))

    @property
    def last_at(self) -> datetime | None:
        return _when(self.memory.metadata.get("last_message_at"))


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def summaries_page(*, project: Project, room: Room, page: str | None) -> Page:
    """A page of the room's summaries, newest first (superseded ones included)."""
    queryset = (
        Memory.objects.for_project(project)
        .filter(room=room, kind=Memory.Kind.SUMMARY)
        .exclude(status=Memory.Status.TRASHED)
    )
    count = queryset.count()
    number = page_number(page, pages=max(1, math.ceil(count / SUMMARIES_PAGE)))
    start = (number - 1) * SUMMARIES_PAGE
    rows = queryset.defer("search_vector", "content_json").order_by("-created_at", "-id")
    items = [
        SummaryView(
            memory=row,
            turns=len(row.source_ids or []),
            covered=int((row.metadata or {}).get("messages_covered") or len(row.source_ids or [])),
        )
        for row in rows[start : start + SUMMARIES_PAGE]
    ]
    return Page(items=items, number=number, count=count, size=SUMMARIES_PAGE)


def summary_turns(*, project: Project, room: Room, summary_id: Any) -> list[Memory] | None:
    """The messages a summary of the room condensed, oldest first; None for no such
    summary. An erased turn is simply missing."""
    summary = (
        Memory.objects.for_project(project)
        .filter(room=room, kind=Memory.Kind.SUMMARY, pk=summary_id)
        .only("source_ids")
        .first()
    )
    if summary is None:
        return None
    ids = []
    for value in summary.source_ids or []:
        try:
            ids.append(uuid.UUID(str(value)))
        except ValueError:
            continue
    return list(
        Memory.objects.for_project(project)
        .filter(public_id__in=ids, kind=MESSAGE)
        .defer(*NOT_SHOWN, "metadata")
        .order_by("created_at", "id")
    )


@dataclass
class RoomSetting:
    """One buffer or working setting of the room: effective value, the project's, and
    whether the room overrides it."""

    name: str
    value: Any
    project_value: Any
    overridden: bool


@dataclass
class RoomSettingsView:
    sections: dict[str, list[RoomSetting]] = field(default_factory=dict)


def room_settings_view(*, room: Room) -> RoomSettingsView:
    """The room's buffer and working settings (ROOM_SECTIONS): effective and the
    project's values, and which the room overrides."""
    effective = settings_as_dict(room_settings_get(room=room))
    project_values = settings_as_dict(project_settings_get(project=room.project))
    own = room.settings or {}
    view = RoomSettingsView()
    for section in ROOM_SECTIONS:
        overrides = own.get(section) or {}
        view.sections[section] = [
            RoomSetting(name, value, project_values[section][name], name in overrides)
            for name, value in effective[section].items()
        ]
    return view


@dataclass
class WorkingPanel:
    """The room's working memory, or why it cannot be read (Redis down)."""

    working: WorkingList | None
    error: str = ""


def working_panel(*, room: Room) -> WorkingPanel:
    try:
        return WorkingPanel(working_list(room=room))
    except WorkingMemoryUnavailable as error:
        return WorkingPanel(None, f"Working memory is unavailable (Redis): {error}")


def turn_page(*, project: Project, room: Room, turn_id: Any) -> int | None:
    """The page of room_messages_page (cut from the newest end) that holds this message
    of the room, or None if the room has no such message."""
    turn = (
        Memory.objects.for_project(project)
        .filter(room=room, kind=MESSAGE, pk=turn_id)
        .values("created_at", "id")
        .first()
    )
    if turn is None:
        return None
    messages = Memory.objects.for_project(project).filter(room=room, kind=MESSAGE)
    newer = messages.filter(
        Q(created_at__gt=turn["created_at"]) | Q(created_at=turn["created_at"], id__gt=turn["id"])
    ).count()
    pages = max(1, math.ceil(messages.count() / PAGE_SIZE))
    return pages - newer // PAGE_SIZE
