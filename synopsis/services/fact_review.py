"""The review inbox (the project's ``facts.review``): what the fact workers extract
waits as a proposal (status ``proposed``: in no context, synopsis or default search)
until an operator accepts it, edits then accepts it, or rejects it.

* accept: the proposal joins the user's active facts as if it had just been
  extracted (synopsis/services/fact_consolidation.py): a fact held already that says
  the same is reinforced with the proposal's sources, and the proposal is merged into
  it (status ``superseded``, ``superseded_by`` that fact); a new value of a
  single-valued slot supersedes the fact holding the old one (the operator's accept is
  the newest word about it); anything else becomes active;
* edit: memory_update of the text, confidence or slot value first, then accept;
* reject: to the trash (memories.services.trash: an undo within pruning.trash_days
  puts it back in the inbox, then the purge erases it). A rejection is a retraction:
  the extractor never proposes the same words about the user again.

Every step is a MemoryRevision by the operator with the intent "review".
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from memories.config import FactSettings
from memories.models import EndUser, Memory, MemoryQuerySet, Project
from memories.services.concurrency import deadlock_retried, memories_lock, owners_share_lock
from memories.services.configuration import project_settings_get
from memories.services.memories import memory_update
from memories.services.revisions import Actor
from memories.services.trash import memories_trash
from synopsis.extraction import FactDraft
from synopsis.services.fact_consolidation import (
    FACT_KINDS,
    REVIEW_INTENT,
    HeldFacts,
    fact_vectors,
)

BULK_MAX = 500  # proposals one bulk accept or reject may name
EDITABLE = ("content", "confidence", "content_json")  # what an edit before accepting changes


def proposals_pending(*, project: Project) -> MemoryQuerySet:
    """The project's proposals waiting in the review inbox (every user's)."""
    return Memory.objects.filter(
        project=project, status=Memory.Status.PROPOSED, kind__in=FACT_KINDS
    )


def proposal_accept(
    *,
    project: Project,
    memory_id: uuid.UUID,
    actor: Actor,
    changes: dict[str, Any] | None = None,
) -> Memory | None:
    """Accept the project's pending proposal ``memory_id``, after ``changes`` (an
    edit: validated by the caller, only EDITABLE fields) if given; returns the active
    fact that now holds it (itself, or the fact it repeats), None if it is no pending
    proposal of the project (accepted or rejected meanwhile, another project's)."""
    if changes and not set(changes) <= set(EDITABLE):
        raise ValueError(f"an edit before accepting changes only {', '.join(EDITABLE)}")
    return deadlock_retried(lambda: _accept(project, memory_id, actor, changes or {}))


def _accept(
    project: Project, memory_id: uuid.UUID, actor: Actor, changes: dict[str, Any]
) -> Memory | None:
    found = proposals_pending(project=project).filter(pk=memory_id).first()
    if found is None or found.end_user_id is None:
        return None
    # the lock order of the fact worker (facts._message_held): one consolidation of the
    # user at a time, so an accept and an extraction never race on the same facts
    if not owners_share_lock(project_id=project.pk):
        return None
    if not EndUser.objects.select_for_update(no_key=True).filter(pk=found.end_user_id):
        return None
    proposal = proposals_pending(project=project).select_for_update().filter(pk=found.pk).first()
    if proposal is None:
        return None
    if changes:
        proposal = memory_update(
            memory=proposal, changes=changes, actor=actor, intent=REVIEW_INTENT
        )
    assert proposal.end_user_id is not None
    config = project_settings_get(project=project).facts
    held = HeldFacts.for_user(
        project_id=project.pk, end_user_id=proposal.end_user_id, with_vectors=True
    )
    draft = _draft_of(proposal)
    vector = fact_vectors(project.pk, [proposal]).get(proposal.pk)
    same = held.duplicate(draft, vector, config.duplicate_similarity)
    if same is not None:
        return _merge(proposal, same, config, actor)
    return _activate(proposal, held.in_slot(draft), actor)


def _draft_of(memory: Memory) -> FactDraft:
    """The proposal as the consolidation compares drafts."""
    structured = memory.content_json
    return FactDraft(
        kind=memory.kind,
        content=memory.content,
        category=str(structured.get("category", "")),
        confidence=memory.confidence if memory.confidence is not None else 1.0,
        slot=structured.get("slot"),
        value=structured.get("value"),
    )


def _activate(proposal: Memory, old: Memory | None, actor: Actor) -> Memory:
    """The proposal becomes an active fact; the one holding its slot, if any, is
    superseded by it (linked both ways, as the worker links them)."""
    structured = proposal.content_json
    if old is not None:
        structured = {**structured, "supersedes": str(old.public_id)}
    fact = memory_update(
        memory=proposal,
        changes={"status": Memory.Status.ACTIVE, "content_json": structured},
        actor=actor,
        intent=REVIEW_INTENT,
    )
    if old is not None:
        _superseded(old, by=fact, actor=actor)
    return fact


def _merge(proposal: Memory, same: Memory, config: FactSettings, actor: Actor) -> Memory:
    """Reinforce ``same`` with each of the proposal's sources it lacks, then merge the
    proposal into it."""
    new = [source for source in proposal.source_ids if source not in same.source_ids]
    confidence = same.confidence if same.confidence is not None else 0.0
    for _ in new:
        confidence += config.reinforce_step * (1.0 - confidence)
    confirmed = _latest(
        same.content_json.get("last_confirmed_at"),
        proposal.content_json.get("last_confirmed_at"),
    )
    changes: dict[str, Any] = {
        "confidence": round(min(1.0, confidence), 4),
        "source_ids": [*same.source_ids, *new],
    }
    if confirmed is not None:
        changes["content_json"] = {**same.content_json, "last_confirmed_at": confirmed}
    fact = memory_update(memory=same, changes=changes, actor=actor, intent=REVIEW_INTENT)
    _superseded(proposal, by=fact, actor=actor)
    return fact


def _superseded(memory: Memory, *, by: Memory, actor: Actor) -> None:
    memory_update(
        memory=memory,
        changes={
            "status": Memory.Status.SUPERSEDED,
            "metadata": {**memory.metadata, "superseded_by": str(by.public_id)},
        },
        actor=actor,
        intent=REVIEW_INTENT,
    )


def _latest(*moments: Any) -> str | None:
    """The latest of these ISO times (those that are one)."""
    times = [m for m in moments if isinstance(m, str)]
    return max(times, key=datetime.fromisoformat) if times else None


def proposals_accept(*, project: Project, ids: Iterable[uuid.UUID], actor: Actor) -> int:
    """Accept the project's pending proposals among ``ids`` (at most BULK_MAX), the
    oldest first (a later value of a slot supersedes an earlier one); returns how many."""
    wanted = _bounded(ids)
    pending = proposals_pending(project=project).filter(pk__in=wanted)
    accepted = 0
    for memory_id in pending.order_by("created_at", "pk").values_list("pk", flat=True):
        if proposal_accept(project=project, memory_id=memory_id, actor=actor) is not None:
            accepted += 1
    return accepted


def proposals_reject(*, project: Project, ids: Iterable[uuid.UUID], actor: Actor) -> int:
    """Reject the project's pending proposals among ``ids`` (at most BULK_MAX): to the
    trash, recorded with the intent "review"; returns how many."""
    wanted = _bounded(ids)

    def reject() -> int:
        if not owners_share_lock(project_id=project.pk):
            return 0
        # locked while still proposals: one accepted meanwhile is not trashed
        locked = memories_lock(proposals_pending(project=project).filter(pk__in=wanted))
        return memories_trash(project=project, ids=locked, actor=actor, intent=REVIEW_INTENT)

    return deadlock_retried(reject) if wanted else 0


def _bounded(ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    wanted = list(ids)
    if len(wanted) > BULK_MAX:
        raise ValueError(f"at most {BULK_MAX} proposals at once")
    return wanted
