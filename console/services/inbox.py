"""What the console's review inbox reads: the project's proposals (facts,
relationships and goals the workers extracted while ``facts.review`` is on), the
oldest first, each with its user and the turn it was mined from
(synopsis/services/fact_review.py changes them)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from console.services.user_page import Page, page_number
from memories.models import Memory, Project
from memories.services.configuration import project_settings_get
from synopsis.services.fact_consolidation import FACT_KINDS
from synopsis.services.fact_review import proposals_pending

INBOX_PAGE = 50


@dataclass
class ProposalView:
    """One proposal as the inbox shows it: the memory (with ``user_external_id``),
    the turn it was first mined from (None if that turn is gone) and how many more
    turns said it since."""

    memory: Memory
    source: Memory | None
    more_sources: int


def review_on(*, project: Project) -> bool:
    """Whether the project reviews extractions (facts.review)."""
    return project_settings_get(project=project).facts.review


def inbox_count(*, project: Project) -> int:
    return proposals_pending(project=project).count()


def inbox_page(*, project: Project, page: str | None) -> Page:
    """A page of the project's pending proposals, the oldest first; ``items`` are
    ProposalView."""
    pending = proposals_pending(project=project).with_external_ids()
    count = pending.count()
    number = page_number(page, pages=max(1, -(-count // INBOX_PAGE)))
    start = (number - 1) * INBOX_PAGE
    rows = list(pending.order_by("created_at", "pk")[start : start + INBOX_PAGE])
    return Page(items=_views(project, rows), number=number, count=count, size=INBOX_PAGE)


def proposal_view(*, project: Project, memory_id: uuid.UUID) -> ProposalView | None:
    """The project's extracted fact (relationship, goal) with this pk, whatever its
    status now (a row answers after its accept or reject); None for another
    project's or another kind."""
    memory = (
        Memory.objects.with_external_ids()
        .filter(project=project, pk=memory_id, kind__in=FACT_KINDS)
        .first()
    )
    return _views(project, [memory])[0] if memory is not None else None


def _views(project: Project, rows: list[Memory]) -> list[ProposalView]:
    """Each row with its first source turn (one query for the page)."""
    firsts = {row.pk: _uuid(row.source_ids[0]) if row.source_ids else None for row in rows}
    wanted = [first for first in firsts.values() if first is not None]
    turns = {
        turn.public_id: turn
        for turn in Memory.objects.filter(project=project, public_id__in=wanted).only(
            "public_id", "content", "created_at", "role", "status"
        )
    }
    return [
        ProposalView(
            memory=row,
            source=_turn(turns, firsts[row.pk]),
            more_sources=max(0, len(row.source_ids) - 1),
        )
        for row in rows
    ]


def _turn(turns: dict[uuid.UUID, Memory], public_id: uuid.UUID | None) -> Memory | None:
    return turns.get(public_id) if public_id is not None else None


def _uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
