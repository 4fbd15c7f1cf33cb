"""Facts from what users say: each user message is mined once (synopsis/extraction.py)
and what it yields joins the facts already held about the user, never destructively
(synopsis/services/fact_consolidation.py: reinforce, supersede or create).

Only user messages are mined, never assistant, system or tool turns, and the hub's own
text echoed in a message (a fact or a summary line it holds) is cut out first.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import redis
from celery.exceptions import SoftTimeLimitExceeded
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from memories.config import FactSettings
from memories.models import EndUser, Memory, ParkedTask
from memories.providers.embeddings import normalize
from memories.providers.redis_client import redis_client
from memories.providers.task_sending import TaskNotSent, task_send
from memories.services.concurrency import owners_share_lock, references_gone
from memories.services.configuration import project_settings_get
from memories.services.embedding_spaces import project_space_read, space_provider
from memories.services.parking import Parking, parking_attempts, task_park
from memories.services.task_attempts import input_key
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


def messages_facts_extract(
    *, memory_ids: list[Any], max_seconds: float | None = None, run_id: str | None = None
) -> int:
    """Mine each user message of ``memory_ids`` not mined yet, in time order; returns
    the facts created or reinforced. Safe to run twice: a message is mined once. The
    drafts of all the messages are embedded in one model call.

    With ``max_seconds`` no message is begun after that long: the rest are queued as a
    new task (the sweep mines them if the broker does not take it). With ``run_id`` the
    message being mined is noted in Redis, so that the run's interruption can say which
    (facts_extract_interrupted)."""
    messages = list(user_messages(memory_ids).order_by("created_at", "id"))
    progress = _Progress(run_id)
    started, drafted = time.monotonic(), []
    for position, message in enumerate(messages):
        if max_seconds is not None and position and time.monotonic() - started > max_seconds:
            _rest_enqueue([m.pk for m in messages[position:]])
            break
        progress.mining(message.pk)
        drafted.append((message, _message_drafts(message)))
    progress.mining(None)
    vectors = _draft_vectors([(message, drafts) for message, (_, drafts) in drafted])
    total, offset = 0, 0
    for message, (result, drafts) in drafted:
        if not drafts:
            continue
        mine = vectors[offset : offset + len(drafts)] if vectors is not None else None
        offset += len(drafts)
        progress.mining(message.pk)
        total += len(_message_consolidate(message, result, drafts, mine))
    progress.mining(None)
    return total


def message_facts_extract(*, message: Memory) -> list[Memory]:
    """The facts one user message yields, joined to those held (see the module)."""
    result, drafts = _message_drafts(message)
    if not drafts:
        return []
    return _message_consolidate(message, result, drafts, _draft_vectors([(message, drafts)]))


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
        if not _message_held(message):
            logger.info("fact extraction: message %s deleted meanwhile; dropped", message.pk)
            return []
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


def _message_held(message: Memory) -> bool:
    """Lock, in the order of memories/services/concurrency.py, what the facts are written
    beneath: the project and room (FOR KEY SHARE), the user (FOR NO KEY UPDATE: one
    consolidation per user at a time) and the message (FOR KEY SHARE); none can be
    deleted until the transaction ends. False if one is gone: the facts are dropped."""
    if not owners_share_lock(project_id=message.project_id, room_id=message.room_id):
        return False
    user_id = message.end_user_id
    if user_id is None or not EndUser.objects.select_for_update(no_key=True).filter(id=user_id):
        return False
    with connection.cursor() as cursor:
        cursor.execute(_MESSAGE_SHARE_SQL, [message.pk])
        return cursor.fetchone() is not None


_MESSAGE_SHARE_SQL = f"SELECT 1 FROM {Memory._meta.db_table} WHERE id = %s FOR KEY SHARE"


def _drafts(message: Memory) -> ExtractionResult | None:
    """The message's drafts, from its text without the hub's own (None if nothing is
    left). Offline, the message is mined whole first: most messages yield nothing, and
    then the hub's texts need not be read; an LLM is asked once, about the cut text."""
    speaker = _speaker(message)
    if llm_provider(project_id=message.project_id) is None:
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


def _draft_vectors(drafted: list[tuple[Memory, list[FactDraft]]]) -> list[np.ndarray] | None:
    """The vectors of each message's drafts, in order, by the model of the space its
    project serves from (one call per project); None if a model is unavailable (then
    duplicates are recognised by their text alone)."""
    texts: dict[int, list[str]] = {}
    for message, drafts in drafted:
        texts.setdefault(message.project_id, []).extend(d.content for d in drafts)
    try:
        vectors = {}
        for project_id, contents in texts.items():
            if contents:
                embedder = space_provider(project_space_read(project_id))
                vectors[project_id] = iter(normalize(embedder.embed(contents)))
        return [next(vectors[m.project_id]) for m, drafts in drafted for _ in drafts]
    except SoftTimeLimitExceeded:
        raise  # the task's time is up: it records which message was being mined
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
    defaults = {
        "project_id": message.project_id,
        "status": status,
        "extractor": result.extractor if result else "",
        "facts": facts,
        "error": error or "",
    }
    try:
        with transaction.atomic():  # outside consolidation: its own, checked at COMMIT
            FactExtraction.objects.get_or_create(message=message, defaults=defaults)
    except IntegrityError as error_:
        if not references_gone(error_):
            raise
        logger.info("fact extraction: message %s deleted meanwhile; not recorded", message.pk)


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


def _rest_enqueue(memory_ids: list[Any]) -> None:
    try:
        facts_extract_enqueue(memory_ids=memory_ids)
    except TaskNotSent as error:  # Redis down: the sweep mines them later
        logger.warning(
            "fact extraction: %d messages left to the sweep (%s)", len(memory_ids), error
        )


# --- interrupted runs: the message being mined is skipped, never mined in a loop ---------

MINING_KEY = "memoryhub:facts:mining:{}"  # a run's message being mined now
FAILURES_KEY = "memoryhub:facts:failures:{}"  # the runs that raised while mining a message
KEYS_TTL = 24 * 3600


class _Progress:
    """The message a run is mining, in Redis (a run without id notes nothing). Redis
    down: nothing noted (an interruption then skips no message; the run's attempts are
    still counted, memories/task_guard.py)."""

    def __init__(self, run_id: str | None) -> None:
        self.key = MINING_KEY.format(run_id) if run_id else None

    def mining(self, memory_id: Any) -> None:
        if self.key is None:
            return
        try:
            if memory_id is None:
                redis_client(pausing=False).delete(self.key)
            else:
                redis_client(pausing=False).set(self.key, str(memory_id), ex=KEYS_TTL)
        except redis.RedisError as error:
            logger.warning("fact extraction: progress not noted (%s)", error)
            self.key = None


@dataclass(frozen=True)
class FactsInterruption:
    """A run of fact extraction that stopped: its id, why (a ParkedTask.Reason) and the error."""

    run_id: str
    reason: str
    error: str


def facts_extract_interrupted(*, interruption: FactsInterruption) -> Memory | None:
    """The message the run was mining when it stopped at its time limit is skipped with
    the error "time limit" and parked, so that it is never mined in a loop; one whose
    mining raised or whose process died (a restart may be no fault of the message's)
    is, once that happened PARKING_ATTEMPTS times ("failed 3 times: <error>"). Returns
    the message skipped, if any."""
    client = redis_client(pausing=False)
    raw = client.getdel(MINING_KEY.format(interruption.run_id))
    if raw is None:
        return None  # between messages: nothing of a single message's doing
    message = user_messages([raw.decode() if isinstance(raw, bytes) else raw]).first()
    if message is None:
        return None  # mined meanwhile, or deleted
    error, attempts = interruption.reason, 1
    if interruption.reason != ParkedTask.Reason.TIME_LIMIT:  # raised, or its process died
        key = FAILURES_KEY.format(message.pk)
        attempts = int(client.incr(key))
        client.expire(key, KEYS_TTL)
        if attempts < parking_attempts():
            return None  # the sweep or the next run tries it again
        error = f"{interruption.reason} {attempts} times: {interruption.error}"
    _record(message, FactExtraction.Status.SKIPPED, error=error)
    task_park(parking=_parking(message, interruption, error=error, attempts=attempts))
    return message


def _parking(
    message: Memory, interruption: FactsInterruption, *, error: str, attempts: int
) -> Parking:
    return Parking(
        task=FACTS_EXTRACT_TASK,
        input_kind="message",
        input_ids=[message.pk],
        input_key=input_key("message", [message.pk]),
        reason=interruption.reason,
        # the reason has its own column: the error says what happened
        error=error if interruption.reason == ParkedTask.Reason.FAILED else interruption.error,
        attempts=attempts,
        args=[[str(message.pk)]],
        kwargs={"again": True},
        project_id=message.project_id,
    )


def facts_skipped_retry(*, memory_ids: list[Any]) -> int:
    """Forget that these messages were skipped (an operator's retry of a parked one), so
    that they are mined again; returns how many were."""
    with contextlib.suppress(redis.RedisError):
        redis_client(pausing=False).delete(*(FAILURES_KEY.format(pk) for pk in memory_ids))
    deleted, _ = FactExtraction.objects.filter(
        message_id__in=memory_ids, status=FactExtraction.Status.SKIPPED
    ).delete()
    return deleted
