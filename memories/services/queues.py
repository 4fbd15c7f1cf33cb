"""What waits in the Celery queues, read from the broker (Redis) as it is now.

Kombu's Redis transport keeps each queue as a list (LPUSH adds, BRPOP takes from the
right): the oldest message is at index -1. A message says nothing of when it was sent,
so every process that sends tasks stamps a ``sent_at`` header (``task_message_stamp``,
connected when this module is imported: memories/apps.py imports it). A message that
a worker took is no longer in the list: until it is acknowledged (after it ran: acks
late) it is in the ``unacked`` hash, with its queue. That is where a task waiting for
its countdown (a retry) or its ETA is, held in a worker's memory, and a task a worker
took but has not started (prefetched, or held by a worker that died: Redis gives it
back after the visibility timeout)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import redis
from celery.signals import before_task_publish
from django.conf import settings

from memories.providers.redis_client import redis_client

SENT_AT_HEADER = "sent_at"
UNACKED_READ_MAX = 500  # taken messages read per look (they are few unless retries pile up)


@before_task_publish.connect(dispatch_uid="memoryhub-task-message-stamp")
def task_message_stamp(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    """Stamp each task message with its send time (a retry is a new send: its own)."""
    if headers is not None:
        headers[SENT_AT_HEADER] = time.time()


@dataclass(frozen=True)
class TakenMessage:
    """A message a worker took and has not acknowledged: running, waiting for a pool
    process or its ETA, or held by a worker that is gone."""

    task_id: str
    task: str
    sent_at: float | None
    eta: float | None  # a countdown or an ETA (a retry's backoff): not due before
    taken_at: float | None


@dataclass(frozen=True)
class QueueReading:
    """One queue as the broker holds it now."""

    name: str
    length: int
    oldest_sent_at: float | None  # None: empty, or its oldest message has no stamp
    taken: list[TakenMessage] = field(default_factory=list)


def queue_names() -> list[str]:
    """The queues the app declares (settings.CELERY_TASK_QUEUES), in their order."""
    return [queue.name for queue in settings.CELERY_TASK_QUEUES]


def queue_readings() -> list[QueueReading]:
    """Each declared queue's length, the send time of its oldest message and the
    messages workers took from it; raises redis.RedisError when Redis does not answer."""
    client = redis_client(pausing=False)
    names = queue_names()
    with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.llen(name)
            pipe.lindex(name, -1)
        answers = pipe.execute()
    taken = _taken(client)
    return [
        QueueReading(
            name=name,
            length=int(answers[2 * index]),
            oldest_sent_at=_sent_at(answers[2 * index + 1]),
            taken=taken.get(name, []),
        )
        for index, name in enumerate(names)
    ]


def _sent_at(raw: bytes | None) -> float | None:
    if raw is None:
        return None
    try:
        stamp = json.loads(raw).get("headers", {}).get(SENT_AT_HEADER)
    except (ValueError, AttributeError):
        return None
    return float(stamp) if isinstance(stamp, int | float) else None


def _taken(client: redis.Redis) -> dict[str, list[TakenMessage]]:
    """The unacknowledged messages by queue (at most UNACKED_READ_MAX of them)."""
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
    key = str(options.get("unacked_key", "unacked"))
    index = str(options.get("unacked_index_key", "unacked_index"))
    entries: list[tuple[bytes, bytes]] = []
    for entry in client.hscan_iter(key, count=100):
        entries.append(entry)
        if len(entries) >= UNACKED_READ_MAX:
            break
    tags: list[Any] = [tag for tag, _ in entries]
    scores = client.zmscore(index, tags) if entries else []
    taken: dict[str, list[TakenMessage]] = {}
    for (_, raw), taken_at in zip(entries, scores, strict=True):
        parsed = _taken_message(raw, taken_at)
        if parsed is not None:
            taken.setdefault(parsed[0], []).append(parsed[1])
    return taken


def _taken_message(raw: bytes, taken_at: float | None) -> tuple[str, TakenMessage] | None:
    """(queue, message) of one ``unacked`` entry: [message, exchange, routing key]."""
    try:
        message, _, queue = json.loads(raw)
        headers = message.get("headers") or {}
    except (ValueError, TypeError, AttributeError):
        return None
    stamp = headers.get(SENT_AT_HEADER)
    return str(queue), TakenMessage(
        task_id=str(headers.get("id", "")),
        task=str(headers.get("task", "")),
        sent_at=float(stamp) if isinstance(stamp, int | float) else None,
        eta=_timestamp(headers.get("eta")),
        taken_at=taken_at,
    )


def _timestamp(iso: Any) -> float | None:
    """A Celery ETA header (ISO 8601, with its zone) as a Unix time."""
    if not isinstance(iso, str):
        return None
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def oldest_waiting(reading: QueueReading, *, running: Iterable[str], now: float) -> float | None:
    """Seconds the queue's oldest waiting task has waited: the oldest message in the
    list, or a taken one that is due and not running (a worker holds it without a free
    pool process, or the worker is gone), which waits from its send or its ETA.
    None when nothing waits or nothing that waits has a stamp."""
    running = set(running)
    since = [reading.oldest_sent_at] if reading.oldest_sent_at is not None else []
    for message in reading.taken:
        due = max(message.sent_at or message.taken_at or now, message.eta or 0.0)
        if message.task_id not in running and due <= now:
            since.append(due)
    return round(now - min(since), 1) if since else None
