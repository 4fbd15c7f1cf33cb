"""Celery tasks of the derived memories: thin wrappers that call one service each.

Each task's time limits are in memories/task_limits.py; memories/task_guard.py records
what a task stopped at its limit (a message being mined is skipped, never mined again in
a loop) and parks an input that keeps failing (a room, a user's synopsis).
"""

from __future__ import annotations

import logging

from celery import shared_task

from memories.models import ParkedTask
from memories.providers.task_sending import TaskNotSent
from memories.services.buffer import rooms_over_capacity
from memories.services.maintenance import maintenance_run
from memories.services.parking import (
    parked_input_ids,
    project_of_memories,
    project_of_room,
    project_of_user,
)
from memories.services.synopsis_refresh import synopsis_refresh_deferred, synopsis_refresh_dequeued
from memories.task_guard import Interruption, TaskInput, no_ids, task_options
from memories.task_limits import FACTS_SLICE_SECONDS
from memories.worker import DATABASE_RETRY
from synopsis.llm import LlmError
from synopsis.services.facts import (
    FACTS_EXTRACT_TASK,
    FactsInterruption,
    facts_extract_enqueue,
    facts_extract_interrupted,
    facts_skipped_retry,
    facts_unmined,
    messages_facts_extract,
    user_messages,
)
from synopsis.services.summaries import (
    ROOM_SUMMARIZE_TASK,
    room_over_capacity,
    room_summarize,
    room_summarize_dequeued,
    room_summarize_enqueue,
)
from synopsis.services.synopses import SYNOPSIS_GENERATE_TASK, synopsis_generate
from synopsis.services.synopsis_sweep import MAX_USERS, synopsis_refresh_sweep

logger = logging.getLogger(__name__)
# a synopsis whose regeneration was interrupted is served as it is for this long
SYNOPSIS_DEFER_SECONDS = 600


@shared_task(
    **task_options(ROOM_SUMMARIZE_TASK, TaskInput(kind="room", project=project_of_room)),
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=8,
    **DATABASE_RETRY,
)
def room_summarize_task(self, room_id: int) -> int:  # type: ignore[no-untyped-def]
    """Summarize one batch of an overflowing room, then queue the next batch if the room
    is still over capacity (bounded tasks: other work runs in between). Stopped at its
    time limit, nothing of the batch is written: the sweep tries again, PARKING_ATTEMPTS
    times at most."""
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


@shared_task(**task_options("synopsis.tasks.room_summarize_sweep_task"), acks_late=True)
def room_summarize_sweep_task() -> int:
    """Queue a summary task for every room over capacity that a signal missed (not the
    rooms whose summary is parked)."""
    parked = parked_input_ids(task=ROOM_SUMMARIZE_TASK, input_kind="room")
    rooms = [room for room in rooms_over_capacity() if str(room) not in parked]
    if not rooms:
        return 0  # nothing to do: not recorded (it runs every minute)
    with maintenance_run(task="summaries_sweep") as run:
        queued = room_summarize_enqueue(room_ids=rooms)
        run.counts = {"rooms_over_capacity": len(rooms), "queued": queued}
    return queued


def _facts_interrupted(interruption: Interruption) -> None:
    """The message being mined is skipped with the reason (facts_extract_interrupted);
    at a time limit the task's other messages are queued again (a delivery after a dead
    process mines them itself; after an error the sweep does, a message at a time)."""
    facts_extract_interrupted(
        interruption=FactsInterruption(
            run_id=interruption.task_id, reason=interruption.reason, error=interruption.error
        )
    )
    if interruption.reason != ParkedTask.Reason.TIME_LIMIT or not interruption.args:
        return
    rest = list(user_messages(interruption.args[0]).values_list("pk", flat=True))
    try:
        facts_extract_enqueue(memory_ids=rest)
    except TaskNotSent as error:
        logger.warning("fact extraction: %d messages left to the sweep (%s)", len(rest), error)


def _facts_sweep_interrupted(interruption: Interruption) -> None:
    facts_extract_interrupted(
        interruption=FactsInterruption(
            run_id=interruption.task_id, reason=interruption.reason, error=interruption.error
        )
    )


@shared_task(
    **task_options(
        FACTS_EXTRACT_TASK,
        TaskInput(kind="message", project=project_of_memories, interrupted=_facts_interrupted),
    ),
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=8,
    **DATABASE_RETRY,
)
def facts_extract_task(self, memory_ids: list[str], again: bool = False) -> int:  # type: ignore[no-untyped-def]
    """Mine the user messages of ``memory_ids`` for facts (each once); ``again`` (an
    operator's retry of a parked message) mines those that were skipped too."""
    if again:
        facts_skipped_retry(memory_ids=memory_ids)
    try:
        return messages_facts_extract(
            memory_ids=memory_ids, max_seconds=FACTS_SLICE_SECONDS, run_id=self.request.id
        )
    except LlmError as exc:
        if exc.retryable:  # the LLM is down: the messages stay unmined until it is back
            raise self.retry(exc=exc, countdown=min(600, 2 ** (self.request.retries + 3))) from exc
        raise


@shared_task(
    **task_options(
        "synopsis.tasks.facts_extract_sweep_task",
        TaskInput(ids=no_ids, interrupted=_facts_sweep_interrupted),
    ),
    bind=True,
    acks_late=True,
)
def facts_extract_sweep_task(self) -> int:  # type: ignore[no-untyped-def]
    """Mine recent user messages that no signal had mined (one bounded batch)."""
    with maintenance_run(task="facts_sweep") as run:
        ids = facts_unmined()
        facts = (
            messages_facts_extract(
                memory_ids=ids, max_seconds=FACTS_SLICE_SECONDS, run_id=self.request.id
            )
            if ids
            else 0
        )
        run.counts = {"messages": len(ids), "facts": facts}
    return facts


def _synopsis_interrupted(interruption: Interruption) -> None:
    """The parts are served as they are for a while: reads do not queue them again at
    once (PARKING_ATTEMPTS interruptions park the user's synopsis)."""
    end_user_id, parts = (list(interruption.args) + [None, None])[:2]
    if end_user_id is not None and parts:
        synopsis_refresh_deferred(
            end_user_id=end_user_id, parts=parts, seconds=SYNOPSIS_DEFER_SECONDS
        )


@shared_task(
    **task_options(
        SYNOPSIS_GENERATE_TASK,
        TaskInput(kind="user", project=project_of_user, interrupted=_synopsis_interrupted),
    ),
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


@shared_task(**task_options("synopsis.tasks.synopsis_refresh_sweep_task"), acks_late=True)
def synopsis_refresh_sweep_task(max_users: int = MAX_USERS) -> int:
    """Queue the regeneration of the synopses whose facts or summaries changed since
    they were generated, the longest-stale first, at most ``max_users`` users a run (the
    next run takes the rest; synopsis/services/synopsis_sweep.py)."""
    with maintenance_run(task="synopsis_refresh") as run:
        run.counts = synopsis_refresh_sweep(max_users=max_users)
    return run.counts["queued"]
