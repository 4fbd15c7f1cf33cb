"""What a fact of a context brings beyond its own line: the turn it was mined from
(a changed value is marked on the fact's own line: sources.changed_value_note).

A fact is a few words ("User's sister is Ana."); the turn it was mined from holds the
detail around it ("My sister Ana lives in Lisbon and works as an architect"). A fact
relevant enough to enter the context brings its newest source turn into the retrieved
section, ranked as the least relevant search result that fits there: it displaces only
the last of them, and a turn the search already placed higher stays where it is
(de-duplication keeps one).
"""

from __future__ import annotations

import uuid
from typing import Any

from memories.models import EndUser, Memory
from memories.providers.tokens import token_count
from memories.services.context.sources import TURN_FIELDS, Candidate, turn_text

SOURCES_MAX = 5  # facts that bring their source turn, the most relevant first
# a source turn in one of these is not brought: purged soon, not yet visible, forgotten
# by an operator (the trash) or not accepted yet (the review inbox)
HIDDEN_STATUSES = [
    Memory.Status.PRUNED,
    Memory.Status.STAGED,
    Memory.Status.TRASHED,
    Memory.Status.PROPOSED,
]


def fact_sources(
    *,
    end_user: EndUser,
    facts: list[Candidate],
    retrieved: list[Candidate],
    budget: int,
    encoding: str,
) -> list[Candidate]:
    """The newest source turn of each of the ``facts`` (the most relevant SOURCES_MAX)
    not among the ``retrieved`` candidates that fit ``budget``, as retrieved candidates
    scored just above the last of those (see the module); a source ranked below them
    is brought up (de-duplication keeps the better scored)."""
    chosen = sorted(facts, key=lambda c: -c.score)[:SOURCES_MAX]
    fitting = _fitting(retrieved, budget, encoding)
    have = {c.key for c in fitting}  # a candidate ranked below them is brought up
    wanted: dict[uuid.UUID, Candidate] = {}
    for fact in chosen:
        for source in reversed(fact.sources):
            if (found := _uuid(source)) is not None and str(found) not in have:
                wanted.setdefault(found, fact)
                break
    if not wanted:
        return []
    # just above the last that fits: it takes that one's place, not a better one's
    score = (fitting[-1].score if fitting else 0.0) + 1e-9
    turns = (
        Memory.objects.with_external_ids()
        .filter(project_id=end_user.project_id, end_user=end_user, public_id__in=list(wanted))
        .exclude(status__in=HIDDEN_STATUSES)
        .only(*TURN_FIELDS)
    )
    return [
        Candidate(
            section="retrieved",
            key=str(turn.public_id),
            kind=turn.kind,
            text=turn_text(turn),
            score=score,
            created_at=turn.created_at,
            group=f"[{turn.created_at:%Y-%m-%d}]",
            why=f"the source of the fact {wanted[turn.public_id].key}",
            memory_pk=turn.pk,
        )
        for turn in turns
    ]


def _fitting(retrieved: list[Candidate], budget: int, encoding: str) -> list[Candidate]:
    """The retrieved candidates, best first, that fit ``budget`` (the section's own)."""
    used, fitting = 0, []
    for candidate in sorted(retrieved, key=lambda c: -c.score):
        used += token_count(candidate.text + "\n", encoding)
        if used > budget:
            break
        fitting.append(candidate)
    return fitting


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
