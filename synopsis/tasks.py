"""Celery tasks of the derived memories: thin wrappers that call one service each."""

from __future__ import annotations

from celery import shared_task

from memories.services.buffer import rooms_over_capacity
from memories.services.maintenance import maintenance_run
from memories.services.synopsis_refresh import synopsis_refresh_deferred, synopsis_refresh_dequeued
from memories.worker import DATABASE_RETRY
from synopsis.llm import LlmError
from synopsis.services.facts import FACTS_EXTRACT_TASK, facts_unmined, messages_facts_extract
from synopsis.services.summaries import (
    ROOM_SUMMARIZE_TASK,
    room_over_capacity,
    room_summarize,
    room_summarize_dequeued,
    room_summarize_enqueue,
)
from synopsis.services.synopses import SYNOPSIS_GENERATE_TASK, synopsis_generate


@shared_task(
    name=ROOM_SUMMARIZE_TASK,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=8,
    **DATABASE_RETRY,
)
def room_summarize_task(self, room_id: int) -> int:  # type: ignore[no-untyped-def]
    """Summarize one batch of an overflowing room, then queue the next batch if the room
    is still over capacity (bounded tasks: other work runs in between)."""
    room_summarize_dequeued(room_id=room_id)
    try:
        written = room_summarize(room_id=room_id, max_batches=1)
    except LlmError as exc:
        if exc.retryable:  # the LLM is down or rate limited: the messages wait, unharmed
            raise self.retry(exc=exc, countdown=min(600, 2 ** (self.request.retries + 3))) from exc
        raise
    if written and room_over_capacity(room_id=room_id):
        room_summarize_enqueue(room_ids=[room_id])
    return len(written)


@shared_task(name="synopsis.tasks.room_summarize_sweep_task", acks_late=True)
def room_summarize_sweep_task() -> int:
    """Queue a summary task for every room over capacity that a signal missed."""
    rooms = rooms_over_capacity()
    if not rooms:
        return 0  # nothing to do: not recorded (it runs every minute)
    with maintenance_run(task="summaries_sweep") as run:
        queued = room_summarize_enqueue(room_ids=rooms)
        run.counts = {"rooms_over_capacity": len(rooms), "queued": queued}
    return queued


@shared_task(
    name=FACTS_EXTRACT_TASK,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=8,
    **DATABASE_RETRY,
)
def facts_extract_task(self, memory_ids: list[str]) -> int:  # type: ignore[no-untyped-def]
    """Mine the user messages of ``memory_ids`` for facts (each once)."""
    try:
        return messages_facts_extract(memory_ids=memory_ids)
    except LlmError as exc:
        if exc.retryable:  # the LLM is down: the messages stay unmined until it is back
            raise self.retry(exc=exc, countdown=min(600, 2 ** (self.request.retries + 3))) from exc
        raise


@shared_task(name="synopsis.tasks.facts_extract_sweep_task", acks_late=True)
def facts_extract_sweep_task() -> int:
    """Mine recent user messages that no signal had mined (one bounded batch)."""
    with maintenance_run(task="facts_sweep") as run:
        ids = facts_unmined()
        facts = messages_facts_extract(memory_ids=ids) if ids else 0
        run.counts = {"messages": len(ids), "facts": facts}
    return facts


@shared_task(
    name=SYNOPSIS_GENERATE_TASK,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=8,
)
def synopsis_generate_task(  # type: ignore[no-untyped-def]
    self, end_user_id: int, parts: list[str], force: bool = False
) -> list[str]:
    """Regenerate the user's synopsis ``parts`` that are due (all with ``force``)."""
    synopsis_refresh_dequeued(end_user_id=end_user_id, parts=parts)
    try:
        return synopsis_generate(end_user_id=end_user_id, parts=parts, force=force)
    except LlmError as exc:
        if exc.retryable:  # the LLM is down: the part is served as it is until it is back
            countdown = min(600, 2 ** (self.request.retries + 3))
            synopsis_refresh_deferred(end_user_id=end_user_id, parts=parts, seconds=countdown)
            raise self.retry(exc=exc, countdown=countdown) from exc
        raise
