"""Where a context's items come from, one function per section, each returning its
candidates with the score that orders them (the fitting decides what fits)."""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memories.config import BufferSettings
from memories.models import EndUser, Memory, Room
from memories.services.buffer import room_summary_latest
from memories.services.embedding_vectors import memory_similarities
from memories.services.synopsis import synopsis_get
from memories.services.working import WorkingMemoryUnavailable, working_list, working_search

logger = logging.getLogger(__name__)

FACT_KINDS = (Memory.Kind.FACT, Memory.Kind.RELATIONSHIP, Memory.Kind.GOAL)


@dataclass
class Candidate:
    """One item a section may hold: ``key`` identifies it across sections (a memory's
    public id, what the response shows), ``text`` is its rendered line, ``score`` its
    priority in the section; ``memory_pk`` a retrieved memory's pk (its access is
    recorded)."""

    section: str
    key: str
    kind: str
    text: str
    score: float
    created_at: datetime | None = None
    why: str = ""
    tokens: int = 0
    # items of a section that share a group (a day) are rendered under one header line
    group: str = ""
    parts: dict[str, float] = field(default_factory=dict)
    memory_pk: Any = None
    shared: bool = False  # a chunk of the project's documents (searched apart)
    sources: tuple[str, ...] = ()  # a fact's source turns (public ids), oldest first

    @property
    def norm(self) -> str:
        """The text without its date and speaker prefix, for near-duplicate checks."""
        return " ".join(re.findall(r"[a-z0-9]+", _body(self.text).lower()))


def _body(line: str) -> str:
    return re.sub(r"^(- |(\[[^\]]*\] )?[^:]{0,80}: )", "", line)


def speaker(memory: Memory) -> str:
    """Who said it: a user by their name (or id), anyone else by name and role."""
    name = memory.metadata.get("name") or memory.metadata.get("speaker")
    if not isinstance(name, str) or not name.strip():
        name = getattr(memory, "user_external_id", None) if memory.role == "user" else None
    role = memory.role or memory.kind
    if name and role == Memory.Role.USER:
        return str(name)
    return f"{name} ({role})" if name else role


def turn_line(memory: Memory, *, with_time: bool = True) -> str:
    stamp = memory.created_at.strftime("%Y-%m-%d %H:%M" if with_time else "%Y-%m-%d")
    return f"[{stamp}] {turn_text(memory)}"


# the fields of a retrieved memory that turn_text (speaker, citation) and _retrieved read:
# the search loads only these
TURN_FIELDS = (
    "id",
    "public_id",
    "kind",
    "role",
    "content",
    "content_json",
    "metadata",
    "created_at",
)


def turn_text(memory: Memory) -> str:
    """A turn without its date: "speaker: text" (the speaker once, when the text starts
    with it already); a knowledge chunk with its citation."""
    text = " ".join(memory.content.split())
    if memory.kind == Memory.Kind.KNOWLEDGE:
        return f"{citation(memory)}: {text}"
    who = speaker(memory)
    # an agent that writes "Caroline: ..." as the text named the speaker already
    return text if text.startswith(f"{who}: ") else f"{who}: {text}"


def citation(memory: Memory) -> str:
    """Where a knowledge chunk comes from: "[Manual, p. 3-4, Setup > Wi-Fi]"."""
    cited = memory.content_json if isinstance(memory.content_json, dict) else {}
    document = cited.get("document")
    document = document if isinstance(document, dict) else {}
    parts = [str(document.get("title") or document.get("source") or "document")]
    page, page_end = cited.get("page"), cited.get("page_end")
    if page:
        parts.append(f"p. {page}" if not page_end or page_end == page else f"p. {page}-{page_end}")
    heading = cited.get("heading")
    if isinstance(heading, list) and heading:
        parts.append(" > ".join(str(h) for h in heading))
    return "[" + ", ".join(parts) + "]"


# ---- facts ------------------------------------------------------------------------------


def fact_rows(*, end_user: EndUser) -> list[Memory]:
    """The user's active facts, relationships and goals."""
    return list(
        Memory.objects.filter(
            project_id=end_user.project_id,
            end_user=end_user,
            kind__in=FACT_KINDS,
            status=Memory.Status.ACTIVE,
        ).only(
            "id",
            "project_id",
            "public_id",
            "kind",
            "content",
            "content_json",
            "confidence",
            "created_at",
            "source_ids",
        )
    )


def fact_candidates(
    facts: list[Memory],
    *,
    query_vector: np.ndarray | None,
    space_id: int | None,
    similarity_weight: float,
    confidence_weight: float,
    replaced: dict[str, str] | None = None,
) -> list[Candidate]:
    """The user's ``facts`` (``fact_rows``) ranked by similarity_weight x similarity +
    confidence_weight x confidence (deer-flow); by confidence alone when there is no
    query vector. A fact that superseded one of ``replaced`` (derived.replaced_texts)
    says so on its line."""
    similarities = (
        memory_similarities(memory_ids=[f.pk for f in facts], space_id=space_id, query=query_vector)
        if query_vector is not None and space_id is not None and facts
        else {}
    )
    candidates = []
    for fact in facts:
        if query_vector is not None:
            similarity = max(0.0, similarities.get(fact.pk, 0.0))
            score = similarity_weight * similarity + confidence_weight * fact.confidence
            parts = {"similarity": round(similarity, 4), "confidence": fact.confidence}
        else:
            score, parts = fact.confidence, {"confidence": fact.confidence}
        candidates.append(
            Candidate(
                section="facts",
                key=str(fact.public_id),
                kind=fact.kind,
                text=_fact_line(fact) + changed_value_note(fact, replaced or {}),
                score=score,
                created_at=fact.created_at,
                parts=parts,
                sources=tuple(str(source) for source in fact.source_ids or ()),
            )
        )
    return candidates


# a fact that superseded another (a new employer, a new city, a rescheduled date) is
# rendered with the day it was last stated and the old value marked as replaced: an
# agent answers with the newest value and knows the old one is out of date, e.g.
# "- User lives in Berlin (as of 2023-05-07; replaces: User lives in Lisbon)"


def replaced_texts(facts: list[Memory]) -> dict[str, str]:
    """The texts of the facts that ``facts`` superseded, by their public id (one query,
    only when some fact superseded another)."""
    wanted = {
        str(fact.content_json.get("supersedes"))
        for fact in facts
        if isinstance(fact.content_json, dict) and fact.content_json.get("supersedes")
    }
    ids = [value for value in wanted if _is_uuid(value)]
    if not ids or not facts:
        return {}
    rows = Memory.objects.filter(
        project_id=facts[0].project_id, public_id__in=ids, status=Memory.Status.SUPERSEDED
    ).values_list("public_id", "content")
    return {str(public_id): " ".join(content.split()) for public_id, content in rows}


def changed_value_note(fact: Memory, replaced: dict[str, str]) -> str:
    """ " (as of DAY; replaces: OLD)" for a fact that superseded another, else ""."""
    structured = fact.content_json if isinstance(fact.content_json, dict) else {}
    old = replaced.get(str(structured.get("supersedes") or ""))
    if old is None:
        return ""
    stated = _day(structured.get("last_confirmed_at")) or f"{fact.created_at:%Y-%m-%d}"
    return f" (as of {stated}; replaces: {old})"


def _day(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return f"{datetime.fromisoformat(value):%Y-%m-%d}"
    except ValueError:
        return None


def _fact_line(fact: Memory) -> str:
    text = " ".join(fact.content.split())
    if fact.kind == Memory.Kind.GOAL:
        status, due = fact.content_json.get("status", "open"), fact.content_json.get("due")
        text += f" (goal, {status}{f', due {due}' if due else ''})"
    return f"- {text}"


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


# ---- history ----------------------------------------------------------------------------


def history_candidates(
    *, end_user: EndUser, room: Room | None, buffer: BufferSettings
) -> list[Candidate]:
    """The room's buffer window (its last max_size active messages), the newest first in
    priority, then the room's newest summary. Without a room there is no conversation
    under way: no history, and its share of the budget flows to the retrieved memories."""
    if room is None:
        return []
    messages = (
        Memory.objects.with_external_ids()
        .defer("search_vector")
        .filter(project_id=room.project_id, room=room)
    )
    window = list(
        messages.filter(kind=Memory.Kind.MESSAGE, status=Memory.Status.ACTIVE).order_by(
            "-created_at", "-id"
        )[: buffer.max_size]
    )
    count = len(window)
    candidates = [
        Candidate(
            section="history",
            key=str(m.public_id),
            kind=m.kind,
            text=turn_line(m),
            score=1.0 - i / max(count, 1) * 0.5,
            created_at=m.created_at,
            why=f"turn {count - i} of the {count} most recent",
        )
        for i, m in enumerate(window)
    ]
    summary = room_summary_latest(room)
    if summary is not None:
        covered = summary.metadata.get("messages_covered", "the older")
        candidates.append(
            Candidate(
                section="history",
                key=str(summary.public_id),
                kind=summary.kind,
                text=f"Summary of {covered} earlier messages: {' '.join(summary.content.split())}",
                score=0.4,
                created_at=summary.created_at,
                why="the room's newest summary",
            )
        )
    return candidates


# ---- working memory and synopsis --------------------------------------------------------

WORKING_LIMIT = 20


def working_candidates(
    *, room: Room | None, query: str | None
) -> tuple[list[Candidate], str | None]:
    """The room's working-memory notes, the most similar to the query first (newest
    first without one); none, with a note, when Redis is unreachable."""
    if room is None:
        return [], None
    try:
        if query:
            found = working_search(room=room, query=query, limit=WORKING_LIMIT)
            hits = [(hit.item, hit.score) for hit in found.hits]
        else:
            items = working_list(room=room).items[-WORKING_LIMIT:]
            hits = [(item, None) for item in reversed(items)]
    except WorkingMemoryUnavailable as error:
        return [], f"working memory unavailable: {error}"
    count = len(hits)
    return [
        Candidate(
            section="working",
            key=f"working:{item.id}",
            kind="working",
            text=f"- {' '.join(item.content.split())}",
            score=score if score is not None else 1.0 - i / max(count, 1),
            created_at=item.created_at,
            why="similar to the query" if score is not None else "recent note",
        )
        for i, (item, score) in enumerate(hits)
    ], None


def synopsis_candidates(*, end_user: EndUser) -> list[Candidate]:
    """The user's synopsis, both parts (what is cached; a stale part is served and its
    regeneration scheduled, as the project's refresh_on_access says)."""
    view = synopsis_get(end_user=end_user)
    candidates = []
    for name, score in (("identity", 2.0), ("context", 1.9)):
        part = getattr(view, name)
        if part is not None and part.text and part.text.strip():
            candidates.append(
                Candidate(
                    section="synopsis",
                    key=f"synopsis:{name}",
                    kind="synopsis",
                    text=" ".join(part.text.split()),
                    score=score,
                    why=f"the synopsis' {name} part",
                )
            )
    return candidates
