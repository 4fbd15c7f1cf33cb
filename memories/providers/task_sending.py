"""Tasks sent from requests and signals: once, never retried, and not at all for a few
seconds after the broker failed.

A write is durable once it commits. The task it then sends (embed, mine facts,
summarize, ingest) only starts that work sooner: a beat sweep finds whatever no task
was sent for. Celery retries a failed publish by default (three more attempts, 0.6 s
of sleeps), so during a Redis outage every write with a user message answered
~620 ms late (BENCHMARKS.md). Instead a send is tried once, and a failure pauses every
send of this process for PAUSE_SECONDS: an outage costs one request one failed attempt
per pause, and the others nothing. The pause is the Redis client's (redis_client.py):
the broker is the same Redis, so a failed send pauses the client too, and the reverse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from celery import current_app

from memories.providers.redis_client import PAUSE_SECONDS, redis_failed, redis_paused


class TaskNotSent(Exception):
    """The broker did not take the task, or sending is paused after it failed."""


def sending_paused() -> bool:
    """Whether Redis failed this process (a send, or any command) within the last
    PAUSE_SECONDS."""
    return redis_paused()


def sending_failed(error: BaseException, what: str) -> None:
    """Pause this process's sends (Redis is down: the broker and the senders' queued
    flags live there); logged once per outage, not per request."""
    redis_failed(error, f"could not send {what}, the beat sweeps will do its work")


def task_send(
    name: str,
    *,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    queue: str | None = None,
    countdown: float | None = None,
) -> None:
    """Send the task ``name`` once; raises TaskNotSent when the broker does not take it,
    at once while sending is paused."""
    if sending_paused():
        raise TaskNotSent(f"{name}: not sent, the broker failed under {PAUSE_SECONDS:.0f} s ago")
    try:
        current_app.send_task(
            name,
            args=list(args),
            kwargs=kwargs or {},
            queue=queue,
            countdown=countdown,
            retry=False,
            # the worker's own limits for the task (memories/task_limits.py): Celery would
            # copy the sending process's into the message, and those would win
            time_limit=None,
            soft_time_limit=None,
        )
    except Exception as error:
        sending_failed(error, name)
        raise TaskNotSent(f"{name}: {type(error).__name__}: {error}") from error
