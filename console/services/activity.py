"""The project's activity log: every recorded change, newest first, from four tables
merged by time: memory revisions, settings revisions (the project's and its rooms'),
synopsis revisions and the team's changes (the admin's LogEntry on the project, as
console.services.team writes them).

The log pages by keyset (memories.api.pagination's Ordering: created_at, then the
table's rank, then the row's pk, all descending): each table is read from the cursor on
with its own index, at most a page of each, and the page is the newest of those. A
page deep in a table of millions costs what the first one does; no total is counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import F, IntegerField, Q, QuerySet, Value
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from console.services.team import TEAM_NOTE
from console.services.user_page import FieldChange
from memories.api.pagination import DATETIME, INTEGER, Key, Ordering
from memories.models import EndUser, Memory, MemoryRevision, Project, SettingsRevision
from memories.models.synopsis import SynopsisRevision

ACTIVITY_PAGE = 50

# the merged order; rank tells the tables apart within one instant
ORDERING = Ordering(
    keys=(Key("created_at", DATETIME), Key("rank", INTEGER), Key("pk", INTEGER)),
    descending=True,
)
SOURCES = ("memory", "settings", "synopsis", "team")  # rank = index
# the admin's log of the project: the team's changes and the admin's edits of the project
TEAM_ACTION, ADMIN_ACTION, SETTINGS_ACTION = "team", "admin", "settings"
ACTIONS = (
    *MemoryRevision.Action.values,
    SETTINGS_ACTION,
    *SynopsisRevision.Action.values,
    TEAM_ACTION,
    ADMIN_ACTION,
)
# what an erased revision keeps besides kind, status...: shown apart, not as changes
REDACTION_FIELDS = ("redacted", "content_sha256", "words_sha256")
INTENTS = ("restore", "undo", "bulk", "review")
ACTOR_TYPES = tuple(MemoryRevision.ActorType.values)


class Change(FieldChange):
    """A field's before and after, as the diff table shows them."""

    @property
    def sides(self) -> list[tuple[str, Any, str]]:
        """(text, value, side) of the value before, then after."""
        return [(self.before_text, self.before, "before"), (self.after_text, self.after, "after")]


@dataclass
class ActivityFilters:
    """What the log is narrowed to ('' or None: any)."""

    actor: str = ""
    actor_type: str = ""
    action: str = ""
    intent: str = ""
    kind: str = ""  # a memory kind: memory revisions alone
    user: str = ""  # an end user's external id: memory and synopsis revisions
    since: date | None = None
    until: date | None = None  # inclusive
    end_user: EndUser | None = None  # the user found for ``user``

    @property
    def any(self) -> bool:
        return any([self.actor, self.actor_type, self.action, self.intent, self.kind, self.user])


def _date(raw: str, name: str, errors: list[str]) -> date | None:
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        errors.append(f"{name}: not a date (YYYY-MM-DD).")
        return None


def _choice(raw: str, name: str, choices: tuple[str, ...], errors: list[str]) -> str:
    if raw and raw not in choices:
        errors.append(f"{name}: one of {', '.join(choices)}.")
        return ""
    return raw


def activity_filters_read(*, project: Project, params: Any) -> tuple[ActivityFilters, list[str]]:
    """The filters of a query (a QueryDict) and the errors, each naming its parameter
    (a bad one is left out: the log is shown without it)."""
    errors: list[str] = []
    text = {name: str(params.get(name, "")).strip()[:255] for name in ("actor", "user")}
    filters = ActivityFilters(
        actor=text["actor"],
        actor_type=_choice(params.get("actor_type", ""), "actor_type", ACTOR_TYPES, errors),
        action=_choice(params.get("action", ""), "action", ACTIONS, errors),
        intent=_choice(params.get("intent", ""), "intent", INTENTS, errors),
        kind=_choice(params.get("kind", ""), "kind", tuple(Memory.Kind.values), errors),
        since=_date(params.get("since", ""), "since", errors),
        until=_date(params.get("until", ""), "until", errors),
    )
    if text["user"]:
        filters.end_user = EndUser.objects.filter(project=project, external_id=text["user"]).first()
        if filters.end_user is None:
            errors.append("user: no user of this project has this external id.")
        else:
            filters.user = text["user"]
    if filters.since and filters.until and filters.since > filters.until:
        errors.append("until: before since.")
        filters.until = None
    return filters, errors


@dataclass
class Entry:
    """One change as the log shows it."""

    source: str  # one of SOURCES
    pk: int
    rank: int
    created_at: datetime
    actor_type: str
    actor: str
    action: str
    intent: str = ""
    subject: str = ""  # what changed, in words: "fact of maria", "room r1's settings"
    changes: list[Change] = field(default_factory=list)
    erased: bool = False  # a memory's words erased: only their SHA-256 kept
    content_sha256: str = ""
    note: str = ""  # the team's change, in words
    memory_id: Any = None  # the memory, if it still exists (its history's link)
    end_user_id: int | None = None


@dataclass
class ActivityPage:
    entries: list[Entry]
    next_cursor: str | None


def _window(rows: QuerySet[Any], filters: ActivityFilters, moment: str) -> QuerySet[Any]:
    if filters.since:
        start = timezone.make_aware(datetime.combine(filters.since, time.min))
        rows = rows.filter(**{f"{moment}__gte": start})
    if filters.until:
        end = timezone.make_aware(datetime.combine(filters.until + timedelta(days=1), time.min))
        rows = rows.filter(**{f"{moment}__lt": end})
    return rows


def _memory_rows(project: Project, filters: ActivityFilters) -> QuerySet[Any] | None:
    if filters.action in (
        SETTINGS_ACTION,
        TEAM_ACTION,
        ADMIN_ACTION,
        *SynopsisRevision.Action.values,
    ):
        return None
    rows = MemoryRevision.objects.filter(project=project)
    if filters.action:
        rows = rows.filter(action=filters.action)
    if filters.intent:
        rows = rows.filter(intent=filters.intent)
    if filters.kind:
        rows = rows.filter(Q(after__kind=filters.kind) | Q(before__kind=filters.kind))
    if filters.end_user is not None:
        user_id = filters.end_user.pk
        rows = rows.filter(Q(after__end_user_id=user_id) | Q(before__end_user_id=user_id))
    return rows


def _settings_rows(project: Project, filters: ActivityFilters) -> QuerySet[Any] | None:
    if filters.action not in ("", SETTINGS_ACTION) or filters.intent or filters.kind:
        return None
    if filters.user:
        return None
    return SettingsRevision.objects.filter(project=project).select_related("room")


def _synopsis_rows(project: Project, filters: ActivityFilters) -> QuerySet[Any] | None:
    if filters.action not in ("", *SynopsisRevision.Action.values) or filters.intent:
        return None
    if filters.kind:
        return None
    rows = SynopsisRevision.objects.filter(project=project).select_related("end_user")
    if filters.action:
        rows = rows.filter(action=filters.action)
    if filters.end_user is not None:
        rows = rows.filter(end_user=filters.end_user)
    return rows


def _team_rows(project: Project, filters: ActivityFilters) -> QuerySet[Any] | None:
    if filters.action not in ("", TEAM_ACTION, ADMIN_ACTION) or filters.intent or filters.kind:
        return None
    if filters.user or filters.actor_type not in ("", "operator"):
        return None
    rows = (
        LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(Project), object_id=str(project.pk)
        )
        .select_related("user")
        .annotate(created_at=F("action_time"))
    )
    if filters.actor:
        rows = rows.filter(user__username=filters.actor)
    if filters.action == TEAM_ACTION:
        rows = rows.filter(change_message__startswith=TEAM_NOTE)
    elif filters.action == ADMIN_ACTION:
        rows = rows.exclude(change_message__startswith=TEAM_NOTE)
    return rows


Reader = Callable[[Project, ActivityFilters], QuerySet[Any] | None]
READERS: tuple[Reader, ...] = (_memory_rows, _settings_rows, _synopsis_rows, _team_rows)


def activity_page(
    *, project: Project, filters: ActivityFilters, cursor: str = "", size: int = ACTIVITY_PAGE
) -> ActivityPage:
    """A page of the project's changes, newest first, after ``cursor`` (a
    ``next_cursor``; ValueError when it is not one)."""
    after = _cursor_read(cursor) if cursor else None
    found: list[Any] = []
    for rank, reader in enumerate(READERS):
        rows = reader(project, filters)
        if rows is None:
            continue
        rows = _window(rows, filters, "created_at")
        if SOURCES[rank] != "team":  # the team's rows are filtered by their reader
            rows = rows.filter(actor=filters.actor) if filters.actor else rows
            rows = rows.filter(actor_type=filters.actor_type) if filters.actor_type else rows
        rows = rows.annotate(rank=Value(rank, output_field=IntegerField()))
        if after is not None:
            # the implied bound first: an index range, not a scan from the newest row
            rows = rows.filter(created_at__lte=after[0]).filter(ORDERING.after(after))
        found += list(rows.order_by("-created_at", "-pk")[: size + 1])
    found.sort(key=lambda row: (row.created_at, row.rank, row.pk), reverse=True)
    page = found[:size]
    next_cursor = ORDERING.cursor_of(page[-1]) if len(found) > size else None
    return ActivityPage(entries=_entries(project, page), next_cursor=next_cursor)


def _cursor_read(cursor: str) -> list[Any]:
    try:
        return ORDERING.cursor_read(cursor)
    except ValidationError:
        raise ValueError("cursor: not a page of this log.") from None


def _entries(project: Project, rows: list[Any]) -> list[Entry]:
    memory_ids = [row.memory_id for row in rows if row.rank == 0]
    existing = dict(
        Memory.objects.filter(project=project, pk__in=memory_ids).values_list("pk", "end_user_id")
    )
    users = _user_names(project, rows)
    builders = (_memory_entry, _settings_entry, _synopsis_entry, _team_entry)
    entries = []
    for row in rows:
        entry = builders[row.rank](row, users)
        if row.rank == 0 and row.memory_id in existing and existing[row.memory_id]:
            entry.memory_id, entry.end_user_id = row.memory_id, existing[row.memory_id]
        entries.append(entry)
    return entries


def _user_names(project: Project, rows: list[Any]) -> dict[int, str]:
    """External ids of the end users the page's memory revisions name."""
    ids: set[int] = {
        snapshot["end_user_id"]
        for row in rows
        if row.rank == 0
        for snapshot in (row.before or {}, row.after or {})
        if isinstance(snapshot.get("end_user_id"), int)
    }
    found = EndUser.objects.filter(project=project, pk__in=ids).values_list("pk", "external_id")
    return dict(found)


def _base(row: Any, action: str) -> Entry:
    return Entry(
        source=SOURCES[row.rank],
        pk=row.pk,
        rank=row.rank,
        created_at=row.created_at,
        actor_type=getattr(row, "actor_type", "operator"),
        actor=getattr(row, "actor", ""),
        action=action,
    )


def _memory_entry(row: MemoryRevision, users: dict[int, str]) -> Entry:
    entry = _base(row, row.action)
    entry.intent = row.intent
    snapshot = {**(row.before or {}), **(row.after or {})}
    user = users.get(snapshot.get("end_user_id") or 0, "")
    entry.subject = f"{snapshot.get('kind', 'memory')}{f' of {user}' if user else ''}"
    redacted = (row.before or {}).get("redacted") or (row.after or {}).get("redacted")
    if redacted:
        entry.erased = True
        entry.content_sha256 = (row.before or row.after or {}).get("content_sha256", "")
    entry.changes = snapshot_diff(row.before, row.after, skip=REDACTION_FIELDS)
    return entry


def _settings_entry(row: SettingsRevision, users: dict[int, str]) -> Entry:
    entry = _base(row, SETTINGS_ACTION)
    entry.subject = f"room {row.room.external_id}'s settings" if row.room else "project settings"
    entry.changes = snapshot_diff(row.before, row.after)
    return entry


def _synopsis_entry(row: SynopsisRevision, users: dict[int, str]) -> Entry:
    entry = _base(row, row.action)
    entry.subject = f"synopsis {row.part} of {row.end_user.external_id}"
    entry.changes = snapshot_diff(row.before, row.after)
    return entry


def _team_entry(row: LogEntry, users: dict[int, str]) -> Entry:
    team = row.change_message.startswith(TEAM_NOTE)
    entry = _base(row, TEAM_ACTION if team else ADMIN_ACTION)
    entry.actor = row.user.get_username()
    entry.subject = "team" if team else f"project {row.object_repr} in the admin"
    entry.note = row.change_message.removeprefix(TEAM_NOTE) if team else str(row)
    return entry


def _flat(snapshot: Any, prefix: str = "") -> dict[str, Any]:
    """A snapshot's values by dotted name, one level of nesting flattened (settings'
    sections, a memory's metadata keys)."""
    if not isinstance(snapshot, dict):
        return {}
    flat: dict[str, Any] = {}
    for name, value in snapshot.items():
        if isinstance(value, dict) and value and not prefix:
            flat |= _flat(value, f"{name}.")
        else:
            flat[f"{prefix}{name}"] = value
    return flat


def snapshot_diff(before: Any, after: Any, *, skip: tuple[str, ...] = ()) -> list[Change]:
    """The fields whose value differs between two snapshots (nested dicts as dotted
    names), in the order they appear; the rest is left out."""
    old, new = _flat(before), _flat(after)
    names = [*old, *(name for name in new if name not in old)]
    return [
        Change(name, old.get(name), new.get(name))
        for name in names
        if name not in skip and old.get(name) != new.get(name)
    ]
