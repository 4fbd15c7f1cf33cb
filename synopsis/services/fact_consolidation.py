"""How a fact drafted from a user message joins the facts held about the user, never
destructively (synopsis/services/facts.py mines the messages):

* the same fact again (same normalized text, or a vector at least
  ``facts.duplicate_similarity`` close) reinforces the one held: confidence raised,
  the message added to its ``source_ids``, ``last_confirmed_at`` set;
* a new value for a single-valued slot (where the user lives, their employer)
  supersedes the fact holding the old one, which stays in history linked to it;
* anything else is a new fact, with the message as its provenance.

An operator's or agent's edit wins: a fact changed after the message was written is
not superseded by it, and a fact they retracted (deleted, trashed, superseded, pruned,
or a proposal rejected in the review inbox) is not extracted again.

With the project's ``facts.review`` on, a draft changes no active fact: it is stored
as a proposal (status ``proposed``) for the console's review inbox, or reinforces the
proposal already waiting with the same text; accepting it runs the join above then
(synopsis/services/fact_review.py).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.db.models import Q

from memories.config import FactSettings
from memories.models import Embedding, Memory, MemoryRevision
from memories.providers.embeddings import normalize
from memories.services.embedding_spaces import project_space_read
from memories.services.memories import (
    MemoryInput,
    memory_create_batch,
    memory_supersede,
    memory_update,
)
from memories.services.revisions import Actor
from memories.structured import structured_content_clean
from synopsis.extraction import FactDraft

ACTOR = Actor.system("fact_extract")
REVIEW_INTENT = "review"  # MemoryRevision.intent of the review inbox's steps
FACT_KINDS = (Memory.Kind.FACT, Memory.Kind.RELATIONSHIP, Memory.Kind.GOAL)


def normalized(text: str) -> str:
    """A fact's text for comparison: lower case, words only."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


@dataclass
class _Held:
    memory: Memory
    norm: str
    vector: np.ndarray | None


class HeldFacts:
    """The user's active facts (with their vectors when embedded), and the texts of the
    facts an operator or agent retracted."""

    def __init__(self, facts: list[_Held], retracted: set[str]) -> None:
        self.facts, self.retracted = facts, retracted
        self._message: Memory | None = None
        self._with_vectors = False
        self._proposed: list[_Held] | None = None

    @classmethod
    def load(cls, message: Memory, with_vectors: bool) -> HeldFacts:
        assert message.end_user_id is not None  # facts are about a user
        held = cls.for_user(
            project_id=message.project_id,
            end_user_id=message.end_user_id,
            with_vectors=with_vectors,
        )
        held.retracted = _retracted(message.project_id, message.end_user_id)
        held._message, held._with_vectors = message, with_vectors
        return held

    @classmethod
    def for_user(
        cls,
        *,
        project_id: int,
        end_user_id: int,
        with_vectors: bool,
        status: str = Memory.Status.ACTIVE,
    ) -> HeldFacts:
        """The user's facts of ``status`` (locked), without the retracted texts."""
        memories = list(
            Memory.objects.select_for_update()
            .filter(
                project_id=project_id,
                end_user_id=end_user_id,
                kind__in=FACT_KINDS,
                status=status,
            )
            .order_by("created_at", "id")
        )
        vectors: dict[Any, np.ndarray] = {}
        if with_vectors and memories:
            vectors = fact_vectors(project_id, memories)
        return cls([_Held(m, normalized(m.content), vectors.get(m.pk)) for m in memories], set())

    @property
    def proposed(self) -> list[_Held]:
        """The user's proposals waiting in the review inbox (loaded on first use)."""
        if self._proposed is None:
            message = self._message
            assert message is not None and message.end_user_id is not None  # load()
            self._proposed = HeldFacts.for_user(
                project_id=message.project_id,
                end_user_id=message.end_user_id,
                with_vectors=self._with_vectors,
                status=Memory.Status.PROPOSED,
            ).facts
        return self._proposed

    def duplicate(
        self, draft: FactDraft, vector: np.ndarray | None, threshold: float
    ) -> Memory | None:
        return _same_in(self.facts, draft, vector, threshold)

    def in_slot(self, draft: FactDraft) -> Memory | None:
        if not draft.slot:
            return None
        for fact in self.facts:
            if fact.memory.content_json.get("slot") == draft.slot:
                return fact.memory
        return None

    def add(self, memory: Memory, vector: np.ndarray | None) -> None:
        self.facts.append(_Held(memory, normalized(memory.content), vector))

    def drop(self, memory: Memory) -> None:
        self.facts = [fact for fact in self.facts if fact.memory.pk != memory.pk]


def fact_vectors(project_id: int, memories: list[Memory]) -> dict[Any, np.ndarray]:
    space = project_space_read(project_id)
    rows = Embedding.objects.filter(memory__in=memories, space=space, window=0).values_list(
        "memory_id", "vector"
    )
    return {pk: normalize(np.asarray([v], dtype=np.float32))[0] for pk, v in rows}


def _same_in(
    facts: list[_Held], draft: FactDraft, vector: np.ndarray | None, threshold: float
) -> Memory | None:
    """The first of ``facts`` saying what the draft says (same kind, no other value of
    its slot, the same words or a vector at least ``threshold`` close)."""
    norm = normalized(draft.content)
    for fact in facts:
        if fact.memory.kind != draft.kind or _slot_conflict(fact.memory, draft):
            continue
        similar = (
            vector is not None
            and fact.vector is not None
            and float(np.dot(vector, fact.vector)) >= threshold
        )
        if fact.norm == norm or similar:
            return fact.memory
    return None


def words_sha256(text: str) -> str:
    """The SHA-256 of the text's normalized words: what an erased revision keeps of a
    retracted fact (memories.services.erasure writes it in SQL the same way)."""
    return hashlib.sha256(normalized(text).encode()).hexdigest()


def _retracted(project_id: int, end_user_id: int) -> set[str]:
    """The words_sha256 of the user's facts that an agent or operator deleted, trashed
    or took out of service (superseded, pruned), and of the proposals an operator
    rejected: the extractor does not bring them back. A deleted fact's revision keeps
    only that hash (memories.services.erasure). The review inbox's other steps (an
    accept superseding the old value, a proposal merged into the fact it repeats) are
    no retraction; nor is a trash undone since."""
    revisions = (
        MemoryRevision.objects.filter(
            project_id=project_id,
            action__in=["update", "delete", "supersede", "prune", "trash"],
            before__end_user_id=end_user_id,
            before__kind__in=list(FACT_KINDS),
        )
        .exclude(actor_type=MemoryRevision.ActorType.SYSTEM)
        .exclude(~Q(action="trash"), intent=REVIEW_INTENT)
    )
    rows = list(revisions.values("action", "before", "after", "memory_id"))
    trashed = {row["memory_id"] for row in rows if row["action"] == "trash"}
    undone = set(
        Memory.objects.filter(pk__in=trashed)
        .exclude(status=Memory.Status.TRASHED)
        .values_list("pk", flat=True)
    )
    texts = set()
    for row in rows:
        after = row["after"]
        before: dict[str, Any] = row["before"] or {}
        if (after and after.get("derived")) or row["memory_id"] in undone:
            continue  # erased with the message it came from, or back from the trash
        if row["action"] == "delete" or (after and after.get("status") != "active"):
            if "content" in before:
                texts.add(words_sha256(str(before["content"])))
            elif "words_sha256" in before:
                texts.add(str(before["words_sha256"]))
    return texts


def _slot_conflict(fact: Memory, draft: FactDraft) -> bool:
    return bool(
        draft.slot
        and fact.content_json.get("slot") == draft.slot
        and normalized(str(fact.content_json.get("value", ""))) != normalized(draft.value or "")
    )


def fact_consolidate(
    *,
    message: Memory,
    draft: FactDraft,
    vector: np.ndarray | None,
    held: HeldFacts,
    config: FactSettings,
) -> Memory | None:
    """Join the draft (mined from ``message``) to the facts ``held``: reinforce,
    supersede or create; None when the draft is dropped. ``held`` follows the change."""
    if words_sha256(draft.content) in held.retracted:
        return None
    if config.review:
        return _propose(message=message, draft=draft, vector=vector, held=held, config=config)
    same = held.duplicate(draft, vector, config.duplicate_similarity)
    if same is not None:
        return _reinforce(same, message, config)
    old = held.in_slot(draft)
    if old is not None and _newer_than(old, message):
        return None  # what the held fact says is more recent than this message
    fact = _create(message, draft)
    held.add(fact, vector)
    if old is not None:
        memory_supersede(memory=old, successor=fact, actor=ACTOR)
        fact.content_json = {**fact.content_json, "supersedes": str(old.public_id)}
        Memory.objects.filter(pk=fact.pk).update(content_json=fact.content_json)
        held.drop(old)
    return fact


def _propose(
    *,
    message: Memory,
    draft: FactDraft,
    vector: np.ndarray | None,
    held: HeldFacts,
    config: FactSettings,
) -> Memory | None:
    """The review inbox's side of fact_consolidate: no active fact changes. A draft
    the waiting proposals already say reinforces that proposal; a value older than the
    held one is dropped (as without review); anything else waits as a new proposal."""
    waiting = _same_in(held.proposed, draft, vector, config.duplicate_similarity)
    if waiting is not None:
        return _reinforce(waiting, message, config)
    if held.duplicate(draft, vector, config.duplicate_similarity) is None:
        old = held.in_slot(draft)
        if old is not None and _newer_than(old, message):
            return None
    proposal = _create(message, draft, status=Memory.Status.PROPOSED)
    held.proposed.append(_Held(proposal, normalized(proposal.content), vector))
    return proposal


def _newer_than(fact: Memory, message: Memory) -> bool:
    """Whether the fact is more recent than the message: confirmed by a later message,
    or written or edited by an agent or operator after the message was."""
    confirmed = fact.content_json.get("last_confirmed_at")
    if isinstance(confirmed, str) and datetime.fromisoformat(confirmed) > message.created_at:
        return True
    edited = (
        MemoryRevision.objects.filter(project_id=fact.project_id, memory_public_id=fact.public_id)
        .exclude(actor_type=MemoryRevision.ActorType.SYSTEM)
        .order_by("-created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    return edited is not None and edited > message.created_at


def _confirmed_at(fact: Memory, message: Memory) -> str:
    """The latest time the fact was stated: this message's or an earlier confirmation's."""
    confirmed = fact.content_json.get("last_confirmed_at")
    if isinstance(confirmed, str) and datetime.fromisoformat(confirmed) > message.created_at:
        return confirmed
    return message.created_at.isoformat()


def _reinforce(fact: Memory, message: Memory, config: FactSettings) -> Memory:
    source = str(message.public_id)  # source ids are public ids (Memory)
    if source in fact.source_ids:
        return fact
    confidence = fact.confidence + config.reinforce_step * (1.0 - fact.confidence)
    changes = {
        "confidence": round(min(1.0, confidence), 4),
        "source_ids": [*fact.source_ids, source],
        "content_json": {**fact.content_json, "last_confirmed_at": _confirmed_at(fact, message)},
    }
    updated = memory_update(memory=fact, changes=changes, actor=ACTOR)
    fact.confidence, fact.source_ids = updated.confidence, updated.source_ids
    fact.content_json, fact.updated_at = updated.content_json, updated.updated_at
    return fact


def _create(message: Memory, draft: FactDraft, *, status: str = Memory.Status.ACTIVE) -> Memory:
    user = message.end_user
    assert user is not None  # facts are mined from the messages of a user only
    structured: dict[str, Any] = {"category": draft.category}
    if draft.kind == Memory.Kind.FACT:
        structured.update(slot=draft.slot, value=draft.value)
    elif draft.kind == Memory.Kind.RELATIONSHIP:
        structured.update(subject=draft.subject, predicate=draft.predicate, object=draft.object)
    elif draft.kind == Memory.Kind.GOAL:
        structured.update(status=draft.goal_status or "open", due=draft.due)
    structured = {key: value for key, value in structured.items() if value is not None}
    structured = structured_content_clean(kind=draft.kind, content_json=structured)
    structured["last_confirmed_at"] = message.created_at.isoformat()
    [(fact, _)] = memory_create_batch(
        project=message.project,
        items=[
            MemoryInput(
                content=draft.content,
                kind=draft.kind,
                user=user.external_id,
                content_json=structured,
                metadata={"evidence": draft.evidence, "extracted_from": str(message.public_id)},
                confidence=draft.confidence,
                source_ids=[str(message.public_id)],
                status=status,
            )
        ],
        actor=ACTOR,
    )
    return fact
