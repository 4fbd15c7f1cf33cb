"""Facts from what users say: each user message is mined once (synopsis/extraction.py)
and what it yields joins the facts already held about the user, never destructively
(synopsis/services/fact_consolidation.py: reinforce, supersede or create).

Only user messages are mined, never assistant, system or tool turns, and the hub's own
text echoed in a message (a fact or a summary line it holds) is cut out first.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memories.config import FactSettings
from memories.models import EndUser, Memory
from memories.providers.embeddings import normalize
from memories.providers.task_sending import task_send
from memories.services.configuration import project_settings_get
from memories.services.embedding import get_provider
from synopsis.extraction import ExtractionResult, FactDraft, facts_draft
from synopsis.llm import llm_provider
from synopsis.models import FactExtraction
from synopsis.services.fact_consolidation import FACT_KINDS, HeldFacts, fact_consolidate

logger = logging.getLogger(__name__)

# a message marked so was written by the hub itself (e.g. a context it built)
HUB_TEXT_FLAG = "memoryhub_generated"


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
        held = HeldFacts.load(message, vectors is not None)
        draft_vectors: list[np.ndarray | None] = list(vectors) if vectors else [None] * len(drafts)
        facts = []
        for draft, vector in zip(drafts, draft_vectors, strict=True):
            fact = fact_consolidate(
                message=message, draft=draft, vector=vector, held=held, config=config
            )
            if fact is not None:
                facts.append(fact)
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
