"""What a user's Facts tab reads: her facts, relationships and goals as what they are
(confidence, category, slot, subject and object, due date and status), each with the
message it was extracted from and the older values it replaced (the superseded chain),
and the edits the tab makes through the memories' services.

Where things are stored (memories.structured, synopsis/services/fact_consolidation.py):
``content_json`` holds a fact's ``category``, ``slot`` and ``value``, a relationship's
``subject``, ``predicate`` and ``object``, a goal's ``status`` (open, done, abandoned:
a goal is done when ``content_json["status"] == "done"``) and ``due`` (YYYY-MM-DD); a
fact that replaced another names it in ``content_json["supersedes"]`` (a public id),
the replaced one names its successor in ``metadata["superseded_by"]``; the message a
fact was extracted from is ``metadata["extracted_from"]`` (else its first source id).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, IntegerField, Q, Value, When

from console.services.user_page import Page, page_number
from memories.api.serializers import MemoryUpdateSerializer
from memories.models import EndUser, Memory, Project
from memories.services.memories import memory_update
from memories.services.revisions import Actor

FACT_KINDS = (Memory.Kind.FACT, Memory.Kind.RELATIONSHIP, Memory.Kind.GOAL)
FACT_STATUSES = (
    Memory.Status.ACTIVE,
    Memory.Status.SUPERSEDED,
    Memory.Status.PROPOSED,
    Memory.Status.TRASHED,
    Memory.Status.ARCHIVED,
    Memory.Status.PRUNED,
)
FACTS_PAGE = 50
CHAIN_DEPTH = 10  # older values shown per fact (a slot rewritten more often is cut)
# the structured fields the tab edits, per kind (memories.structured checks them)
STRUCTURED_FIELDS: dict[str, tuple[str, ...]] = {
    "fact": ("category", "slot", "value"),
    "relationship": ("subject", "predicate", "object"),
    "goal": ("status", "due"),
}
GOAL_DONE = "done"
GOAL_OPEN = "open"


@dataclass
class FactFilters:
    """The tab's filters: a kind ('' any), a status ('' any; active by default) and
    words the text contains."""

    kind: str = ""
    status: str = Memory.Status.ACTIVE
    text: str = ""


@dataclass
class SourceTurn:
    """The message a fact was extracted from, for a link to it in its room."""

    pk: uuid.UUID
    room_id: int | None
    content: str
    created_at: Any


@dataclass
class FactView:
    """One fact, relationship or goal as the tab shows it."""

    memory: Memory
    source: SourceTurn | None = None
    chain: list[Memory] = field(default_factory=list)  # the values it replaced, newest first

    @property
    def structured(self) -> list[tuple[str, Any]]:
        """(name, value) of the kind's structured fields that hold something."""
        data = self.memory.content_json or {}
        if self.memory.kind == Memory.Kind.GOAL:
            return []  # its state and due date head the row
        names = STRUCTURED_FIELDS.get(self.memory.kind, ())
        return [(name, data[name]) for name in names if data.get(name) not in (None, "")]

    @property
    def goal_done(self) -> bool:
        return (self.memory.content_json or {}).get("status") == GOAL_DONE

    @property
    def confidence_percent(self) -> int:
        return round(max(0.0, min(1.0, self.memory.confidence)) * 100)


def _kind_order() -> Case:
    whens = [When(kind=kind, then=Value(index)) for index, kind in enumerate(FACT_KINDS)]
    return Case(*whens, output_field=IntegerField())


def facts_page(
    *, project: Project, end_user: EndUser, filters: FactFilters, page: str | None
) -> Page:
    """A page of the user's facts, relationships and goals in that order (the template
    groups them by kind), each kind's newest first; ``items`` are FactView."""
    queryset = Memory.objects.for_project(project).filter(end_user=end_user, kind__in=FACT_KINDS)
    if filters.kind:
        queryset = queryset.filter(kind=filters.kind)
    if filters.status:
        queryset = queryset.filter(status=filters.status)
    if filters.text:
        queryset = queryset.filter(content__icontains=filters.text)
    count = queryset.count()
    number = page_number(page, pages=max(1, -(-count // FACTS_PAGE)))
    start = (number - 1) * FACTS_PAGE
    rows = list(
        queryset.defer("search_vector")  # content_json and source_ids are shown
        .annotate(kind_order=_kind_order())
        .order_by("kind_order", "-created_at", "-id")[start : start + FACTS_PAGE]
    )
    items = facts_views(project=project, memories=rows)
    return Page(items=items, number=number, count=count, size=FACTS_PAGE)


def facts_views(*, project: Project, memories: Sequence[Memory]) -> list[FactView]:
    """FactViews of these memories with their source turns and superseded chains (a
    query for the sources, one per level of the chains)."""
    sources = _sources(project=project, memories=memories)
    chains = _chains(project=project, memories=memories)
    return [
        FactView(memory=m, source=sources.get(m.pk), chain=chains.get(m.pk, [])) for m in memories
    ]


def _source_id(memory: Memory) -> str | None:
    extracted = (memory.metadata or {}).get("extracted_from")
    if isinstance(extracted, str):
        return extracted
    ids = memory.source_ids or []
    return str(ids[0]) if ids else None


def _uuids(values: list[str | None]) -> list[uuid.UUID]:
    found = []
    for value in values:
        try:
            found.append(uuid.UUID(str(value)))
        except ValueError:
            continue
    return found


def _sources(*, project: Project, memories: Sequence[Memory]) -> dict[uuid.UUID, SourceTurn]:
    """Each memory's source message (by public id, within the project), if it still exists."""
    wanted = {m.pk: _source_id(m) for m in memories}
    rows = (
        Memory.objects.for_project(project)
        .filter(public_id__in=_uuids(list(wanted.values())), kind=Memory.Kind.MESSAGE)
        .values("pk", "public_id", "room_id", "content", "created_at")
    )
    turns = {
        str(row["public_id"]): SourceTurn(
            row["pk"], row["room_id"], row["content"], row["created_at"]
        )
        for row in rows
    }
    return {pk: turns[source] for pk, source in wanted.items() if source in turns}


def _chains(*, project: Project, memories: Sequence[Memory]) -> dict[uuid.UUID, list[Memory]]:
    """Each memory's older values: the fact it supersedes, the one that one superseded...
    (``content_json["supersedes"]``), newest first, at most CHAIN_DEPTH."""
    chains: dict[uuid.UUID, list[Memory]] = {m.pk: [] for m in memories}
    tips = {m.pk: m for m in memories}
    for _ in range(CHAIN_DEPTH):
        links = {pk: (tip.content_json or {}).get("supersedes") for pk, tip in tips.items()}
        wanted = {pk: str(value) for pk, value in links.items() if value}
        if not wanted:
            break
        older = Memory.objects.for_project(project).filter(
            public_id__in=_uuids(list(wanted.values()))
        )
        by_public = {str(m.public_id): m for m in older.defer("search_vector")}
        tips = {}
        for pk, public in wanted.items():
            previous = by_public.get(public)
            if previous is not None and previous not in chains[pk]:
                chains[pk].append(previous)
                tips[pk] = previous
    return chains


def fact_for_console(*, project: Project, end_user: EndUser, memory_id: Any) -> Memory | None:
    """One of the user's facts, relationships or goals, or None."""
    return (
        Memory.objects.for_project(project)
        .filter(Q(end_user=end_user), kind__in=FACT_KINDS, pk=memory_id)
        .first()
    )


def fact_changes_validate(*, memory: Memory, values: dict[str, Any]) -> tuple[dict, dict]:
    """The API's update serializer's verdict on a confidence and structured fields
    (``values``: confidence and the kind's STRUCTURED_FIELDS, '' or None clearing one):
    (changes for memory_update, {} ) or ({}, errors by field name)."""
    content_json = dict(memory.content_json or {})
    for name in STRUCTURED_FIELDS.get(memory.kind, ()):
        if name in values:
            value = values[name]
            if value in (None, ""):
                content_json.pop(name, None)
            else:
                content_json[name] = value
    data = {"confidence": values.get("confidence", memory.confidence), "content_json": content_json}
    serializer = MemoryUpdateSerializer(data=data, context={"kind": memory.kind})
    if serializer.is_valid():
        return dict(serializer.validated_data), {}
    errors: dict[str, list[str]] = {}
    for name, messages in serializer.errors.items():
        if isinstance(messages, dict):  # content_json's errors, by key
            for key, inner in messages.items():
                errors[key] = [str(m) for m in inner]
        else:
            errors[name] = [str(m) for m in messages]
    return {}, errors


def goal_done_set(*, memory: Memory, done: bool, actor: Actor) -> Memory:
    """Mark a goal done (``content_json["status"] = "done"``) or open again, recorded
    as the operator's update."""
    status = GOAL_DONE if done else GOAL_OPEN
    content_json = {**(memory.content_json or {}), "status": status}
    return memory_update(memory=memory, changes={"content_json": content_json}, actor=actor)
