"""The console's project-wide memory table: every memory of the project across users,
newest first, filtered; and what an operator does to many of them at once.

Pages are keyset pages in the API's order and with its cursor (memories.api.pagination:
no OFFSET, so the millionth row costs what the first does), and the table counts its
matches only up to SELECT_MAX + 1 (a LIMITed count: "more than 10,000", never an exact
COUNT over a million rows). The text filter is a keyword match on the GIN-indexed
document keyword search uses (memory_keyword_gin), a plain WHERE that combines with
the other filters and keeps the newest-first order; memory_search ranks a top k by
relevance, which neither pages nor lists every match.

Every bulk change goes through memories.services.bulk, recorded as the operator's with
the intent "bulk", in batches each locked (in pk order) and committed on its own; a
selection past BACKGROUND_OVER is queued for a worker, whose run the console follows.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchVectorField
from django.db import models
from django.db.models.expressions import RawSQL
from rest_framework.exceptions import ValidationError

from console.services.user_page import NOT_SHOWN, MemoryFilters
from memories.api.pagination import UUID, newest_first
from memories.models import (
    SEARCH_CONFIG,
    MaintenanceRun,
    Memory,
    MemoryQuerySet,
    Project,
    keyword_document_sql,
)
from memories.services.bulk import ACTIONS, BATCH, BulkOutcome, bulk_enqueue, memories_bulk_apply
from memories.services.exports import CHUNK_SIZE, MEMORY_FIELDS, chunked, memory_document
from memories.services.revisions import Actor

TABLE_PAGE = 50
SELECT_MAX = 10_000  # memories one bulk action may change ("all N matching")
NEWEST = newest_first(pk=UUID)  # the API's list order, and its cursor


class TableRefused(ValueError):
    """A page or a selection the table cannot serve; the message names the field."""


@dataclass
class TableFilters(MemoryFilters):
    """The table's filters ('' and None: any): the user page's kind, status and dates,
    plus words, a user and a room (external ids) and one metadata key = value."""

    text: str = ""
    user: str = ""
    room: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)  # contained: metadata @> {k: v}

    def apply(self, queryset: MemoryQuerySet) -> MemoryQuerySet:
        queryset = super().apply(queryset)
        if self.user:
            queryset = queryset.filter(end_user__external_id=self.user)
        if self.room:
            queryset = queryset.filter(room__external_id=self.room)
        if self.metadata:  # the GIN index memory_metadata_gin serves @>
            queryset = queryset.filter(metadata__contains=self.metadata)
        if self.text:
            words = SearchQuery(self.text, config=SEARCH_CONFIG, search_type="websearch")
            # the keyword index's own expression, so that index serves the match
            document = RawSQL(keyword_document_sql('"memories_memory"'), [], SearchVectorField())
            queryset = queryset.annotate(keyword_document=document).filter(keyword_document=words)
        return queryset


def table_memories(*, project: Project, filters: TableFilters) -> MemoryQuerySet:
    """The project's memories matching ``filters`` (any user, any status unless one is
    asked for), unordered."""
    return filters.apply(Memory.objects.for_project(project))


@dataclass
class TablePage:
    """One page of the table: its rows (newest first), the cursors of the pages around
    it (None: there is none), and how many match, counted up to SELECT_MAX + 1."""

    rows: list[Memory]
    matching: int
    older: str | None  # goes back as ``after``
    newer: str | None  # goes back as ``before``

    @property
    def more_than_max(self) -> bool:
        return self.matching > SELECT_MAX


def _cursor_values(cursor: str, name: str) -> list[Any]:
    try:
        return NEWEST.cursor_read(cursor)
    except ValidationError:
        message = f"{name}: not a page of this table; start again from the first page."
        raise TableRefused(message) from None


def table_page(
    *, project: Project, filters: TableFilters, after: str = "", before: str = ""
) -> TablePage:
    """The page after the ``after`` cursor, the one before ``before``, or the first;
    TableRefused for a cursor that is not one."""
    matching = table_memories(project=project, filters=filters)
    counted = matching.order_by()[: SELECT_MAX + 1].count()
    rows = matching.with_external_ids().defer(*NOT_SHOWN)
    if before:
        values = _cursor_values(before, "before")
        oldest_first = NEWEST.reversed()
        newer = rows.filter(oldest_first.after(values)).order_by(*oldest_first.order_by)
        found = list(newer[: TABLE_PAGE + 1])
        page, newer_exists = found[:TABLE_PAGE][::-1], len(found) > TABLE_PAGE
        older_exists = True
    else:
        if after:
            rows = rows.filter(NEWEST.after(_cursor_values(after, "after")))
        found = list(rows.order_by(*NEWEST.order_by)[: TABLE_PAGE + 1])
        page, older_exists, newer_exists = found[:TABLE_PAGE], len(found) > TABLE_PAGE, bool(after)
    return TablePage(
        rows=page,
        matching=counted,
        older=NEWEST.cursor_of(page[-1]) if page and older_exists else None,
        newer=NEWEST.cursor_of(page[0]) if page and newer_exists else None,
    )


def table_selection(
    *, project: Project, filters: TableFilters, ids: list[uuid.UUID] | None
) -> list[uuid.UUID]:
    """The pks a bulk action takes: of ``ids``, those of the project; without ids, every
    memory matching ``filters`` (TableRefused past SELECT_MAX)."""
    if ids is not None:
        chosen = Memory.objects.for_project(project).filter(pk__in=ids)
        return list(chosen.order_by("pk").values_list("pk", flat=True))
    matching = table_memories(project=project, filters=filters).order_by(*NEWEST.order_by)
    found = list(matching.values_list("pk", flat=True)[: SELECT_MAX + 1])
    if len(found) > SELECT_MAX:
        raise TableRefused(
            f"scope: more than {SELECT_MAX:,} memories match; narrow the filters "
            f"(at most {SELECT_MAX:,} at a time)."
        )
    return found


# --- bulk actions -----------------------------------------------------------------

# A selection larger than this is carried out by a worker (memories.tasks.bulk_apply_task)
# with a progress panel, not in the request: one batch (BATCH, one transaction) takes
# ~2 s under load (1,000 archived in 4.3 s measured), so a request stays short, and
# 10,000 (~45 s) never holds a request or a proxy's timeout.
BACKGROUND_OVER = BATCH


def table_action(
    *, project: Project, action: str, ids: list[uuid.UUID], actor: Actor
) -> BulkOutcome | MaintenanceRun:
    """Apply ``action`` (one of ACTIONS) to the project's memories ``ids`` now, or, past
    BACKGROUND_OVER, queue it for a worker: its run (BulkQueueUnavailable when the
    broker cannot take it). TableRefused for an action that is not one."""
    if action not in ACTIONS:
        raise TableRefused(f"action: not one of {', '.join(ACTIONS)}.")
    if len(ids) > BACKGROUND_OVER:
        return bulk_enqueue(project=project, action=action, ids=ids, actor=actor)
    return memories_bulk_apply(project=project, action=action, ids=ids, actor=actor)


def table_export_lines(*, project: Project, ids: list[uuid.UUID]) -> Iterator[str]:
    """The memories as JSON Lines, oldest first, each as a user's or room's export writes
    it (memories.services.exports), read CHUNK_SIZE at a time."""
    rows = (
        Memory.objects.for_project(project)
        .filter(pk__in=ids)
        .order_by("created_at", "public_id")
        .values(*MEMORY_FIELDS)
        .annotate(
            user_external_id=models.F("end_user__external_id"),
            room_external_id=models.F("room__external_id"),
            agent_external_id=models.F("agent__external_id"),
        )
    )
    for chunk in chunked(rows.iterator(chunk_size=CHUNK_SIZE)):
        yield "".join(json.dumps(memory_document(row), ensure_ascii=False) + "\n" for row in chunk)
