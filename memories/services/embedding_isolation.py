"""A memory that keeps an embedding run from finishing is found and set aside, so that it
cannot stall every tenant's embedding in a loop.

An embedding run claims up to EMBEDDING_CLAIM_SIZE memories per lane, oldest first, and
commits their vectors together: a run stopped at its time limit, killed, or failing on one
memory leaves them all pending, and the next run would claim the same memories again.
So an interrupted run asks for isolation (``embedding_isolation_request``): the next run
first embeds the head of the queue (what the interrupted run had claimed) one memory per
transaction, counting the attempts at each (services/task_attempts.py). A memory that
failed or died PARKING_ATTEMPTS times gets embedding status ``failed`` and is parked
(services/parking.py): it stays stored and found by keyword search, the backfill leaves it
out (it is not pending), and an operator's retry makes it pending again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

import redis
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from memories.models import Memory, ParkedTask
from memories.providers.embeddings import EmbeddingError
from memories.providers.redis_client import redis_client
from memories.services import task_attempts
from memories.services.embedding import EMBEDDING_RUN_TASK, embedding_process_batch
from memories.services.parking import Parking, parking_attempts, project_of_memories, task_park

logger = logging.getLogger(__name__)

ISOLATE_FLAG = "memoryhub:embedding:isolate"
ISOLATE_FLAG_TTL = 24 * 3600
MEMORY = "memory"  # the parked input's kind
TIME_LIMIT = "time limit"
Reason = ParkedTask.Reason
DIED = "the run embedding it died (out of memory, or killed at its hard time limit)"


def _redis() -> redis.Redis:
    return redis_client(pausing=False)


def embedding_isolation_request() -> None:
    """An embedding run was interrupted: the next one isolates the head of the queue.
    Never raises (without Redis the next interruption asks again)."""
    with contextlib.suppress(redis.RedisError):
        _redis().set(ISOLATE_FLAG, "1", ex=ISOLATE_FLAG_TTL)


def embedding_isolation_due() -> bool:
    with contextlib.suppress(redis.RedisError):
        return bool(_redis().exists(ISOLATE_FLAG))
    return False


def embedding_isolate(*, max_seconds: float) -> tuple[int, bool]:
    """Embed the oldest pending memories (as many as one run claims: EMBEDDING_CLAIM_SIZE
    x EMBEDDING_LANES) one per transaction, parking those that failed PARKING_ATTEMPTS
    times; returns how many were embedded and whether the head is done: then the request
    is cleared, unless a memory failed and is not parked yet (the next run isolates it
    again rather than claim it with others; after PARKING_ATTEMPTS runs it is parked).
    Stops after ``max_seconds``; an EmbeddingError (the provider's) propagates."""
    size = int(settings.EMBEDDING["CLAIM_SIZE"]) * max(1, int(settings.EMBEDDING["LANES"]))
    head = list(
        Memory.objects.pending_embedding()
        .exclude(status=Memory.Status.STAGED)
        .order_by("created_at")
        .values_list("pk", flat=True)[:size]
    )
    started, done, failed = time.monotonic(), 0, 0
    for pk in head:
        if time.monotonic() - started > max_seconds:
            return done, False
        embedded = _embed_one(pk)
        done, failed = done + max(0, embedded), failed + (embedded < 0)
    if failed:
        return done, False
    with contextlib.suppress(redis.RedisError):
        _redis().delete(ISOLATE_FLAG)
    logger.info(
        "embedding isolation: %d of the %d oldest pending memories embedded", done, len(head)
    )
    return done, True


def _embed_one(pk: Any) -> int:
    """Embed one memory in its own transaction, its attempts counted: 1 embedded, 0 not
    (taken meanwhile, or parked now), -1 failed and still pending."""
    key = _memory_key(pk)
    attempt = task_attempts.attempt_begin(key=key)
    if attempt.number > parking_attempts():  # the attempts before failed, or died
        last = task_attempts.attempt_error(key=key)
        reason = Reason.WORKER_LOST if attempt.died else _reason_of(last)
        _memory_park(pk, key=key, failure=(reason, last or DIED), attempts=attempt.number - 1)
        return 0
    try:
        done = embedding_process_batch(size=1, memory_ids=[pk])
    except EmbeddingError:
        task_attempts.attempt_succeeded(key=key)  # the provider failed, not this memory
        raise
    except SoftTimeLimitExceeded:
        if task_attempts.attempt_failed(key=key, error=TIME_LIMIT) >= parking_attempts():
            _memory_park(
                pk, key=key, failure=(Reason.TIME_LIMIT, TIME_LIMIT), attempts=attempt.number
            )
        raise
    except Exception as exc:  # this memory's own failure: counted, the others go on
        error = f"{type(exc).__name__}: {exc}"
        logger.warning("embedding memory %s failed: %s", pk, error)
        if task_attempts.attempt_failed(key=key, error=error) < parking_attempts():
            return -1
        _memory_park(pk, key=key, failure=(Reason.FAILED, error), attempts=attempt.number)
        return 0
    task_attempts.attempt_succeeded(key=key)
    return done


def _memory_key(pk: Any) -> str:
    """The attempts key of the memory's embedding (services/task_attempts.py)."""
    return task_attempts.attempts_key(EMBEDDING_RUN_TASK, task_attempts.input_key(MEMORY, [pk]))


def _reason_of(error: str) -> str:
    return Reason.TIME_LIMIT if error == TIME_LIMIT else Reason.FAILED


def _memory_park(pk: Any, *, key: str, failure: tuple[str, str], attempts: int) -> None:
    """The memory is embedded no more (status failed) and parked for an operator;
    ``failure`` is the reason (a ParkedTask.Reason) and the error."""
    Memory.objects.filter(pk=pk, embedding_status=Memory.EmbeddingStatus.PENDING).update(
        embedding_status=Memory.EmbeddingStatus.FAILED
    )
    reason, error = failure
    task_park(
        parking=Parking(
            task=EMBEDDING_RUN_TASK,
            input_kind=MEMORY,
            input_ids=[pk],
            input_key=task_attempts.input_key(MEMORY, [pk]),
            reason=reason,
            error=error,
            attempts=attempts,
            kwargs={"memory_ids": [str(pk)]},
            project_id=project_of_memories([pk]),
        )
    )
    task_attempts.attempt_parked(key=key)


def embedding_failed_retry(*, memory_ids: list[Any]) -> int:
    """Make these memories' embedding pending again (an operator's retry of a parked
    memory), their attempts forgotten; returns how many were failed."""
    for pk in memory_ids:
        with contextlib.suppress(redis.RedisError):
            task_attempts.attempt_succeeded(key=_memory_key(pk))
    return Memory.objects.filter(
        pk__in=memory_ids, embedding_status=Memory.EmbeddingStatus.FAILED
    ).update(embedding_status=Memory.EmbeddingStatus.PENDING)
