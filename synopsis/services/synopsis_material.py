"""What a user synopsis is made from: the identity part from the user's facts and
relationships (the name fact apart: it is the subject), the context part from their
open goals, the newest summaries of their rooms and their last messages; each memory
read as a ``SynopsisItem`` (synopsis/synopsis_writers.py)."""

from __future__ import annotations

import re

from django.db.models.fields.json import KT

from memories.models import EndUser, Memory
from memories.models.synopsis import IDENTITY
from synopsis.services.fact_consolidation import normalized
from synopsis.services.facts import HUB_TEXT_FLAG
from synopsis.synopsis_writers import SUBJECT, PartMaterial, SynopsisItem, identity_order

IDENTITY_KINDS = (Memory.Kind.FACT, Memory.Kind.RELATIONSHIP)
NAME_SLOT = "identity.name"
MAX_FACTS = 200
MAX_GOALS = 10
MAX_SUMMARIES = 3
MAX_MESSAGES = 5


def part_material(*, user: EndUser, part: str, max_tokens: int) -> PartMaterial:
    """What the user's ``part`` is written from, read now; the subject is the name the
    user's name fact gives, else the user's name, else "The user"."""
    fact = name_fact_get(user)
    name = name_from(fact)
    subject = name or user.name.strip() or "The user"
    name_ids = [fact.id] if fact is not None and name and part == IDENTITY else []
    if part == IDENTITY:
        sections = [identity_facts(user)]
    else:
        sections = [open_goals(user), recent_summaries(user), last_messages(user)]
    return PartMaterial(
        part=part,
        subject=subject,
        sections=sections,
        name_ids=name_ids,
        max_tokens=max_tokens,
        project_id=user.project_id,
    )


def name_fact_get(user: EndUser) -> SynopsisItem | None:
    fact = (
        Memory.objects.filter(project_id=user.project_id, end_user=user, kind=Memory.Kind.FACT)
        .active()
        .filter(content_json__slot=NAME_SLOT)
        .order_by("-confidence", "-created_at")
        .first()
    )
    return item_of(fact) if fact is not None else None


def name_from(fact: SynopsisItem | None) -> str | None:
    """The name a name fact gives ("User's name is Maria." -> "Maria")."""
    if fact is None:
        return None
    found = re.search(r"\bname is (.+?)\.?$", fact.content.strip())
    return found[1].strip() if found else None


def item_of(memory: Memory) -> SynopsisItem:
    category = memory.content_json.get("category") or (
        "relationship" if memory.kind == Memory.Kind.RELATIONSHIP else "other"
    )
    due = memory.content_json.get("due")
    return SynopsisItem(
        id=str(memory.public_id),  # the synopsis' source ids are public ids (Memory)
        content=" ".join(memory.content.split()),
        category=str(category),
        confidence=memory.confidence,
        created_at=memory.created_at,
        due=due if isinstance(due, str) else None,
    )


def identity_facts(user: EndUser) -> list[SynopsisItem]:
    """The user's active facts and relationships in the identity part's order, without
    repeats and without the name fact (it is the subject)."""
    memories = (
        Memory.objects.filter(project_id=user.project_id, end_user=user)
        .of_kind(*IDENTITY_KINDS)
        .active()
        # containment, not a key lookup: a NOT over a missing key would be NULL
        .exclude(content_json__contains={"slot": NAME_SLOT})
        .exclude(content_json__contains={"category": "goal"})
        .order_by("-confidence", "-created_at")[:MAX_FACTS]
    )
    items = sorted((item_of(m) for m in memories), key=identity_order)
    seen: set[str] = set()
    unique = []
    for item in items:
        key = normalized(SUBJECT.sub("", item.content))
        if key and key not in seen:
            seen.add(key)
            unique.append(item)
    return unique


def open_goals(user: EndUser) -> list[SynopsisItem]:
    """The user's open goals, the soonest due first, then the newest."""
    memories = (
        Memory.objects.filter(project_id=user.project_id, end_user=user, kind=Memory.Kind.GOAL)
        .active()
        .exclude(content_json__contains={"status": "done"})
        .exclude(content_json__contains={"status": "abandoned"})
        .order_by(KT("content_json__due").asc(nulls_last=True), "-created_at")[:MAX_GOALS]
    )
    return [item_of(m) for m in memories]


def recent_summaries(user: EndUser) -> list[SynopsisItem]:
    """The newest summaries of the user's rooms (each room's active one), newest first."""
    memories = (
        Memory.objects.filter(project_id=user.project_id, end_user=user, kind=Memory.Kind.SUMMARY)
        .active()
        .order_by("-created_at")[:MAX_SUMMARIES]
    )
    return [item_of(m) for m in memories]


def last_messages(user: EndUser) -> list[SynopsisItem]:
    """What the user said last (not pruned, not the hub's own text), newest first."""
    memories = (
        Memory.objects.filter(
            project_id=user.project_id,
            end_user=user,
            kind=Memory.Kind.MESSAGE,
            role=Memory.Role.USER,
            status__in=[Memory.Status.ACTIVE, Memory.Status.ARCHIVED],
        )
        .exclude(metadata__contains={HUB_TEXT_FLAG: True})
        .order_by("-created_at")[:MAX_MESSAGES]
    )
    return [item_of(m) for m in memories]
