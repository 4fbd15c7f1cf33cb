"""Facts from what users say: each user message is mined once (synopsis/extraction.py)
and what it yields joins the facts already held about the user, never destructively:

* the same fact again (same normalized text, or a vector at least
  ``facts.duplicate_similarity`` close) reinforces the one held: confidence raised,
  the message added to its ``source_ids``, ``last_confirmed_at`` set;
* a new value for a single-valued slot (where the user lives, their employer)
  supersedes the fact holding the old one, which stays in history linked to it;
* anything else is a new fact, with the message as its provenance.

Only user messages are mined, never assistant, system or tool turns, and the hub's own
text echoed in a message (a fact or a summary line it holds) is cut out first. An
operator's or agent's edit wins: a fact changed after the message was written is not
superseded by it, and a fact they retracted is not extracted again.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memories.config import FactSettings
from memories.models import Embedding, EndUser, Memory, MemoryRevision
from memories.providers.embeddings import normalize
from memories.providers.task_sending import task_send
from memories.services.configuration import project_settings_get
from memories.services.embedding import embedding_space_get, get_provider
from memories.services.memories import (
    MemoryInput,
    memory_create_batch,
    memory_supersede,
    memory_update,
)
from memories.services.revisions import Actor
from memories.structured import structured_content_clean
from synopsis.extraction import ExtractionResult, FactDraft, facts_draft
from synopsis.llm import llm_provider
from synopsis.models import FactExtraction

logger = logging.getLogger(__name__)

ACTOR = Actor.system("fact_extract")
FACT_KINDS = (Memory.Kind.FACT, Memory.Kind.RELATIONSHIP, Memory.Kind.GOAL)
# a message marked so was written by the hub itself (e.g. a context it built)
HUB_TEXT_FLAG = "memoryhub_generated"


def normalized(text: str) -> str:
    """A fact's text for comparison: lower case, words only."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def user_messages(memory_ids: list[Any]) -> Any:
    """The user messages among ``memory_ids`` that were not mined yet."""
    return Memory.objects.filter(
        pk__in=memory_ids,
        kind=Memory.Kind.MESSAGE,
        role=Memory.Role.USER,
        fact_extraction__isnull=True,
    ).select_related("project", "end_user")


def messages_facts_extract(*, memory_ids: list[Any]) -> int:
    """Mine each user message of ``memory_ids`` not mined yet, in time order; returns
    the facts created or reinforced. Safe to run twice: a message is mined once. The
    drafts of all the messages are embedded in one model call."""
    messages = list(user_messages(memory_ids).order_by("created_at", "id"))
    drafted = [(message, _message_drafts(message)) for message in messages]
    every = [draft for _, (_, drafts) in drafted for draft in drafts]
    vectors = _draft_vectors(every)
    total, offset = 0, 0
    for message, (result, drafts) in drafted:
        if not drafts:
            continue
        mine = vectors[offset : offset + len(drafts)] if vectors is not None else None
        offset += len(drafts)
        total += len(_message_consolidate(message, result, drafts, mine))
    return total


def message_facts_extract(*, message: Memory) -> list[Memory]:
    """The facts one user message yields, joined to those held (see the module)."""
    result, drafts = _message_drafts(message)
    if not drafts:
        return []
    return _message_consolidate(message, result, drafts, _draft_vectors(drafts))


def _message_drafts(message: Memory) -> tuple[ExtractionResult | None, list[FactDraft]]:
    """The message's drafts worth consolidating; a message that yields none is recorded
    as mined (skipped, failed or done) here."""
    config = project_settings_get(project=message.project).facts
    skip = _skip_reason(message, config)
    if skip:
        _record(message, FactExtraction.Status.SKIPPED, error=skip)
        return None, []
    result = _drafts(message)
    if result is None:
        _record(message, FactExtraction.Status.SKIPPED, error="only text the hub holds")
        return None, []
    if result.error is not None:
        _record(message, FactExtraction.Status.FAILED, result=result, error=result.error)
        return result, []
    drafts = [d for d in result.drafts if d.confidence >= config.min_confidence]
    if not drafts:  # most messages: nothing to consolidate
        _record(message, FactExtraction.Status.DONE, result=result)
    return result, drafts


def _message_consolidate(
    message: Memory,
    result: ExtractionResult | None,
    drafts: list[FactDraft],
    vectors: list[np.ndarray] | None,
) -> list[Memory]:
    config = project_settings_get(project=message.project).facts
    with transaction.atomic():
        # one consolidation per user at a time: two workers never race on the same facts.
        # FOR NO KEY UPDATE, not FOR UPDATE: a write of the user's memories takes FOR KEY
        # SHARE on the user's row (the foreign key's check), which FOR UPDATE blocks; a
        # worker paused or slow inside this transaction held every write of the user up
        # (a full make bench lost its batch writes to one)
        assert message.end_user_id is not None  # _skip_reason
        EndUser.objects.select_for_update(no_key=True).filter(id=message.end_user_id).first()
        if FactExtraction.objects.filter(message=message).exists():
            return []  # another worker mined it meanwhile
        held = _HeldFacts.load(message, vectors is not None)
        draft_vectors: list[np.ndarray | None] = list(vectors) if vectors else [None] * len(drafts)
        facts = [
            fact
            for draft, vector in zip(drafts, draft_vectors, strict=True)
            if (fact := _consolidate(message, draft, vector, held, config)) is not None
        ]
        _record(message, FactExtraction.Status.DONE, result=result, facts=len(facts))
    return facts


def _drafts(message: Memory) -> ExtractionResult | None:
    """The message's drafts, from its text without the hub's own (None if nothing is
    left). Offline, the message is mined whole first: most messages yield nothing, and
    then the hub's texts need not be read; an LLM is asked once, about the cut text."""
    speaker = _speaker(message)
    if llm_provider() is None:
        whole = facts_draft(text=message.content, project_id=message.project_id, speaker=speaker)
        if not whole.drafts:
            return whole
    text = _without_hub_text(message)
    if not text.strip():
        return None
    return facts_draft(text=text, project_id=message.project_id, speaker=speaker)


def _skip_reason(message: Memory, config: FactSettings) -> str | None:
    if not config.extract:
        return "fact extraction is off for the project"
    if message.end_user_id is None:
        return "no user: facts are about a user"
    if message.metadata.get(HUB_TEXT_FLAG):
        return "written by the hub"
    return None


def _speaker(message: Memory) -> str | None:
    name = message.metadata.get("name") or message.metadata.get("speaker")
    return name if isinstance(name, str) and name.strip() else None


def _without_hub_text(message: Memory) -> str:
    """The message with every passage the hub holds about the user cut out: its facts
    and the lines of its summaries, echoed back, must not become new facts."""
    text = message.content
    held = Memory.objects.filter(
        Q(kind__in=FACT_KINDS) | Q(kind=Memory.Kind.SUMMARY),
        project_id=message.project_id,
        end_user_id=message.end_user_id,
    ).values_list("content", flat=True)
    passages = {
        line.strip()
        for content in held
        for line in content.splitlines()
        if len(line.strip()) >= 12  # short lines ("Yes.") are not evidence of an echo
    }
    for passage in sorted(passages, key=len, reverse=True):
        pattern = r"\s+".join(re.escape(word) for word in passage.split())
        text = re.sub(pattern, " ", text, flags=re.IGNORECASE)
    return text


def _draft_vectors(drafts: list[FactDraft]) -> list[np.ndarray] | None:
    """The drafts' vectors with the configured model, in one call; None if the model
    is unavailable (then duplicates are recognised by their text alone)."""
    if not drafts:
        return []
    try:
        return list(normalize(get_provider().embed([d.content for d in drafts])))
    except Exception as error:  # the model is optional here: text comparison remains
        logger.warning("fact extraction: no vectors for the drafts: %s", error)
        return None


@dataclass
class _Held:
    memory: Memory
    norm: str
    vector: np.ndarray | None


class _HeldFacts:
    """The user's active facts (with their vectors when embedded), and the texts of the
    facts an operator or agent retracted."""

    def __init__(self, facts: list[_Held], retracted: set[str]) -> None:
        self.facts, self.retracted = facts, retracted

    @classmethod
    def load(cls, message: Memory, with_vectors: bool) -> _HeldFacts:
        memories = list(
            Memory.objects.select_for_update()
            .filter(
                project_id=message.project_id,
                end_user_id=message.end_user_id,
                kind__in=FACT_KINDS,
                status=Memory.Status.ACTIVE,
            )
            .order_by("created_at", "id")
        )
        vectors: dict[Any, np.ndarray] = {}
        if with_vectors and memories:
            space = embedding_space_get()
            rows = Embedding.objects.filter(memory__in=memories, space=space, window=0).values_list(
                "memory_id", "vector"
            )
            vectors = {pk: normalize(np.asarray([v], dtype=np.float32))[0] for pk, v in rows}
        held = [_Held(m, normalized(m.content), vectors.get(m.pk)) for m in memories]
        return cls(held, _retracted(message))

    def duplicate(
        self, draft: FactDraft, vector: np.ndarray | None, threshold: float
    ) -> Memory | None:
        norm = normalized(draft.content)
        for fact in self.facts:
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


def _retracted(message: Memory) -> set[str]:
    """Normalized texts of the user's facts that an agent or operator deleted or took
    out of service (superseded, pruned): the extractor does not bring them back."""
    revisions = MemoryRevision.objects.filter(
        project_id=message.project_id,
        action__in=["update", "delete", "supersede", "prune"],
        before__end_user_id=message.end_user_id,
        before__kind__in=list(FACT_KINDS),
    ).exclude(actor_type=MemoryRevision.ActorType.SYSTEM)
    texts = set()
    for revision in revisions.values("action", "before", "after"):
        after = revision["after"]
        before: dict[str, Any] = revision["before"] or {}
        if revision["action"] == "delete" or (after and after.get("status") != "active"):
            texts.add(normalized(str(before.get("content", ""))))
    return texts


def _slot_conflict(fact: Memory, draft: FactDraft) -> bool:
    return bool(
        draft.slot
        and fact.content_json.get("slot") == draft.slot
        and normalized(str(fact.content_json.get("value", ""))) != normalized(draft.value or "")
    )


def _consolidate(
    message: Memory,
    draft: FactDraft,
    vector: np.ndarray | None,
    held: _HeldFacts,
    config: FactSettings,
) -> Memory | None:
    """Reinforce, supersede or create; None when the draft is dropped."""
    if normalized(draft.content) in held.retracted:
        return None
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


def _create(message: Memory, draft: FactDraft) -> Memory:
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
                user=message.end_user.external_id,  # type: ignore[union-attr]
                content_json=structured,
                metadata={"evidence": draft.evidence, "extracted_from": str(message.public_id)},
                confidence=draft.confidence,
                source_ids=[str(message.public_id)],
            )
        ],
        actor=ACTOR,
    )
    return fact


def _record(
    message: Memory,
    status: str,
    *,
    result: ExtractionResult | None = None,
    facts: int = 0,
    error: str | None = None,
) -> None:
    FactExtraction.objects.get_or_create(
        message=message,
        defaults={
            "project_id": message.project_id,
            "status": status,
            "extractor": result.extractor if result else "",
            "facts": facts,
            "error": error or "",
        },
    )


FACTS_EXTRACT_TASK = "synopsis.tasks.facts_extract_task"
SWEEP_DAYS = 7  # the sweep looks this far back for user messages not mined
SWEEP_BATCH = 500


def facts_extract_enqueue(*, memory_ids: list[Any]) -> None:
    """Ask a worker to mine these user messages (on the derived queue); TaskNotSent when
    the broker does not take them (the sweep mines them later)."""
    for start in range(0, len(memory_ids), SWEEP_BATCH):
        chunk = [str(pk) for pk in memory_ids[start : start + SWEEP_BATCH]]
        task_send(FACTS_EXTRACT_TASK, args=[chunk])


def facts_unmined(*, limit: int = SWEEP_BATCH) -> list[Any]:
    """Ids of recent user messages not mined yet (a signal lost with Redis, a worker
    killed mid-way), oldest first."""
    since = timezone.now() - timedelta(days=SWEEP_DAYS)
    return list(
        Memory.objects.filter(
            kind=Memory.Kind.MESSAGE,
            role=Memory.Role.USER,
            end_user__isnull=False,
            created_at__gte=since,
            fact_extraction__isnull=True,
        )
        .order_by("created_at", "id")
        .values_list("pk", flat=True)[:limit]
    )
