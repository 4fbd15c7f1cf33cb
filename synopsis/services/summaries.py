"""Overflow summaries: a room over its capacity has its oldest messages condensed into
one ``summary`` memory and archived (kept, never deleted).

One batch at a time, and each batch all or nothing: the summary, its originals
archived and its predecessor superseded commit together or not at all, so a worker
killed mid-way leaves no trace and the next sweep does the batch again. A session
advisory lock per room keeps two workers off the same room; the summarizer (possibly
a slow LLM call) runs outside any transaction, and the write checks that the batch
and the chain are still what the draft was made from, and that the room and its user
still exist: a summary of what was deleted meanwhile is dropped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import redis
from django.db import IntegrityError, connection, transaction

from memories.models import Memory, Room
from memories.providers.redis_client import redis_client
from memories.providers.task_sending import TaskNotSent, sending_failed, sending_paused, task_send
from memories.services.buffer import room_messages, room_summary_latest
from memories.services.concurrency import owners_share_lock, references_gone
from memories.services.configuration import room_settings_get
from memories.services.memories import MemoryInput, memories_status_change, memory_create_batch
from memories.services.revisions import Actor
from synopsis.summarizers import SummaryDraft, Turn, summary_draft

logger = logging.getLogger(__name__)

ACTOR = Actor.system("room_summarize")
# the first key of the advisory lock: this workflow's namespace, the second the room
LOCK_NAMESPACE = 0x5355  # "SU"


def room_summarize(*, room_id: int, max_batches: int | None = None) -> list[Memory]:
    """Summarize the room's oldest batches while it holds more unsummarized messages
    than its capacity (at most ``max_batches``); returns the summaries written. Does
    nothing if another worker is summarizing the room."""
    written: list[Memory] = []
    with _room_lock(room_id) as locked:
        if not locked:
            return written
        while max_batches is None or len(written) < max_batches:
            summary = _batch_summarize(room_id)
            if summary is None:
                break
            written.append(summary)
    return written


def room_over_capacity(*, room_id: int) -> bool:
    """Whether the room still holds more unsummarized messages than its capacity."""
    room = Room.objects.select_related("project").filter(pk=room_id).first()
    if room is None:
        return False
    config = room_settings_get(room=room).buffer
    return config.summarize and room_messages(room).count() > config.capacity


@contextmanager
def _room_lock(room_id: int) -> Iterator[bool]:
    """A session-level advisory lock on the room: released when we are done, or by
    PostgreSQL when the worker's connection dies with it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, room_id])
        locked = bool(cursor.fetchone()[0])
    try:
        yield locked
    finally:
        if locked:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, room_id])


def _batch_summarize(room_id: int) -> Memory | None:
    """Summarize the room's oldest batch if it is over capacity; None if not (or if
    the room changed under the draft: the caller's next run starts again)."""
    room = Room.objects.select_related("project").filter(pk=room_id).first()
    if room is None:
        return None
    config = room_settings_get(room=room).buffer
    messages = room_messages(room).with_external_ids()
    if not config.summarize or messages.count() <= config.capacity:
        return None
    batch = list(messages.order_by("created_at", "id")[: config.batch_size])
    previous = room_summary_latest(room)
    clock = time.perf_counter()
    draft = summary_draft(
        turns=[_turn(memory) for memory in batch],
        previous=previous.content if previous is not None else None,
        max_tokens=config.summary_max_tokens,
        project_id=room.project_id,
    )
    seconds = time.perf_counter() - clock
    try:
        summary = _batch_write(room, batch, previous, draft, seconds)
    except IntegrityError as error:
        if not references_gone(error):
            raise
        summary = None  # what the summary names was deleted as it committed
    if summary is None:
        logger.info("room %s changed while summarizing; the summary is dropped", room_id)
        return None
    logger.info(
        "room %s: %d messages summarized by %s in %.2f s",
        room_id,
        len(batch),
        draft.summarizer,
        seconds,
    )
    return summary


@transaction.atomic
def _batch_write(
    room: Room, batch: list[Any], previous: Memory | None, draft: SummaryDraft, seconds: float
) -> Memory | None:
    """Write the summary of ``batch``, archive the batch and supersede ``previous``; None
    (nothing written) if the room, its user or one of those memories was deleted or
    changed since the draft was made. Locks in the order deletes take them
    (memories/services/concurrency.py): the owners first, then the memories in pk
    order, so a delete of the room or the user waits for this or this for it."""
    user_id = _only([m.end_user_id for m in batch])  # the summary's user
    if not owners_share_lock(project_id=room.project_id, room_id=room.pk, end_user_id=user_id):
        return None
    ids = [m.pk for m in batch] + ([previous.pk] if previous is not None else [])
    locked = {m.pk: m for m in Memory.objects.select_for_update().filter(pk__in=ids).order_by("pk")}
    archived = [locked[m.pk] for m in batch if m.pk in locked]
    if (
        any(m.status != Memory.Status.ACTIVE for m in archived)
        or len(archived) != len(batch)
        or _latest_id(room) != (previous and previous.pk)
    ):
        return None
    summary = _summary_write(room, batch, previous, draft, seconds)
    memories_status_change(
        memories=archived, status=Memory.Status.ARCHIVED, action="archive", actor=ACTOR
    )
    if previous is not None:
        memories_status_change(
            memories=[locked[previous.pk]],
            status=Memory.Status.SUPERSEDED,
            action="supersede",
            actor=ACTOR,
        )
    return summary


def _latest_id(room: Room) -> Any:
    latest = room_summary_latest(room)
    return latest.pk if latest is not None else None


def _turn(memory: Any) -> Turn:
    """A message as the summarizer sees it: who said it (their name if the agent gave
    one in metadata, the user's external id, else the role) and when."""
    role = memory.role or "unknown"
    name = memory.metadata.get("name") or memory.metadata.get("speaker")
    if not isinstance(name, str) or not name.strip():
        name = memory.user_external_id if role == Memory.Role.USER else None
    return Turn(
        id=str(memory.pk),
        role=role,
        content=memory.content,
        created_at=memory.created_at,
        speaker=f"{name} ({role})" if name else role,
    )


def _only(values: list[Any]) -> Any:
    """The one value all share, else None."""
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _summary_write(
    room: Room, batch: list[Any], previous: Memory | None, draft: SummaryDraft, seconds: float
) -> Memory:
    """The summary memory of ``batch`` (annotated with external ids), created as any
    memory is: recorded, then embedded by the pipeline."""
    covered = len(batch) + int(previous.metadata.get("messages_covered", 0) if previous else 0)
    metadata: dict[str, Any] = {
        "summarizer": draft.summarizer,
        "token_count": draft.token_count,
        "messages": len(batch),
        "messages_covered": covered,
        "first_message_at": batch[0].created_at.isoformat(),
        "last_message_at": batch[-1].created_at.isoformat(),
        "participants": sorted({_turn(m).speaker for m in batch}),
        "previous_summary_id": str(previous.public_id) if previous is not None else None,
        "seconds": round(seconds, 3),
    }
    if draft.fallback_reason:
        metadata["fallback_reason"] = draft.fallback_reason
    if draft.usage:
        metadata["usage"] = draft.usage
    [(summary, _)] = memory_create_batch(
        project=room.project,
        items=[
            MemoryInput(
                content=draft.text,
                kind=Memory.Kind.SUMMARY,
                user=_only([m.user_external_id for m in batch]),
                room=room.external_id,
                agent=_only([m.agent_external_id for m in batch]),
                metadata=metadata,
                source_ids=[str(m.public_id) for m in batch],  # public ids (Memory)
            )
        ],
        actor=ACTOR,
    )
    return summary


ROOM_SUMMARIZE_TASK = "synopsis.tasks.room_summarize_task"
# derived memory (summaries, facts) has its own queue, and each task does one batch: the
# worker takes its queues in turn, so a backlog delays a new embedding by one batch at most
DERIVED_QUEUE = "derived"
QUEUED_FLAG = "memoryhub:summarize-queued:{}"
QUEUED_FLAG_TTL = 300  # a lost task's room is summarized again by the sweep after this


def room_summarize_enqueue(*, room_ids: list[int]) -> int:
    """Ask a worker to summarize each room, unless a task for it is already queued;
    returns how many were sent. Redis unreachable: none (the sweep catches up; sends
    pause, memories/providers/task_sending.py)."""
    sent = 0
    client = redis_client()
    for room_id in room_ids:
        if sending_paused():
            break
        flag = QUEUED_FLAG.format(room_id)
        try:
            if not client.set(flag, "1", nx=True, ex=QUEUED_FLAG_TTL):
                continue
        except redis.RedisError as error:
            sending_failed(error, "a room's summary task (its queued flag)")
            break
        try:
            task_send(ROOM_SUMMARIZE_TASK, args=[room_id], queue=DERIVED_QUEUE)
        except TaskNotSent:
            with suppress(redis.RedisError):  # it expires
                client.delete(flag)
            break
        sent += 1
    return sent


def room_summarize_dequeued(*, room_id: int) -> None:
    """The room's task has started: a write from now on may queue the next one."""
    redis_client().delete(QUEUED_FLAG.format(room_id))
