"""Worker heartbeats: each Celery worker writes one to Redis every few seconds, saying
which queues it takes and which tasks it runs now (memories/worker.py HeartbeatStep).

Each beat writes the worker's entry in one hash of last beats, which readers read with
one command however many keys Redis holds (no SCAN): a worker is alive while its last
beat is under HEARTBEAT_TTL old; past that, one that did not stop cleanly (killed, hung)
is reported as lost, by name, until LOST_KEEP. Each beat also renews a record of its own
(``HEARTBEAT_PREFIX<hostname>``, expiring with the TTL) for scripts that look for a
worker by key (tests/conftest.py waits for one)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

import redis

from memories.providers.redis_client import redis_client

HEARTBEAT_PREFIX = "memoryhub:worker:"
HEARTBEAT_INTERVAL = 10
HEARTBEAT_TTL = 3 * HEARTBEAT_INTERVAL
LOST_KEEP = 600  # seconds a worker that stopped beating is reported (red), then forgotten
INPUT_ITEMS = 3  # the first ids of a list argument that a running task's input shows
INPUT_ID_LENGTH = 40  # a longer string is no id: it is left out of a task's input


def _redis() -> redis.Redis:
    # not paused by a request's failure: a heartbeat says whether Redis answers now
    return redis_client(pausing=False)


def _last_key() -> str:
    # derived from HEARTBEAT_PREFIX when called, so a test's own namespace covers both
    return f"{HEARTBEAT_PREFIX.rstrip(':')}-last"


def worker_heartbeat(*, hostname: str, info: Mapping[str, Any] | None = None) -> None:
    """Record that ``hostname`` is alive now, with ``info`` (its pid, queues, running
    tasks); the live record expires unless renewed."""
    payload = json.dumps({"at": time.time(), **(info or {})})
    with _redis().pipeline(transaction=False) as pipe:
        pipe.set(f"{HEARTBEAT_PREFIX}{hostname}", payload, ex=HEARTBEAT_TTL)
        pipe.hset(_last_key(), hostname, payload)
        pipe.expire(_last_key(), LOST_KEEP)
        pipe.execute()


def worker_heartbeat_stop(*, hostname: str) -> None:
    """Mark ``hostname``'s last beat as a clean stop: it stays alive until its record
    expires, as it always did, and is never reported lost."""
    client = _redis()
    raw = client.hget(_last_key(), hostname)
    if raw is not None:
        client.hset(_last_key(), hostname, json.dumps({**json.loads(raw), "stopped": True}))


def _last_beats() -> list[dict[str, Any]]:
    """Every worker's last beat within LOST_KEEP, by name, with its age in seconds (the
    older ones are dropped from the hash here)."""
    client = _redis()
    now = time.time()
    beats, forgotten = [], []
    for name, raw in sorted(client.hgetall(_last_key()).items()):
        data = json.loads(raw)
        age = round(now - data.pop("at"), 1)
        if age > LOST_KEEP:
            forgotten.append(name)
        else:
            hostname = name.decode() if isinstance(name, bytes) else name
            beats.append({"hostname": hostname, "age_seconds": age, **data})
    if forgotten:
        client.hdel(_last_key(), *forgotten)
    return beats


def worker_heartbeats() -> list[dict[str, Any]]:
    """The workers seen within the heartbeat TTL, with their age in seconds, by name."""
    return [beat for beat in _last_beats() if beat["age_seconds"] <= HEARTBEAT_TTL]


def workers_lost(*, alive: Iterable[str]) -> list[dict[str, Any]]:
    """The last beat of each worker seen within LOST_KEEP that is not in ``alive`` and
    did not stop cleanly (killed, hung), by name."""
    alive = set(alive)
    return [
        beat for beat in _last_beats() if beat["hostname"] not in alive and not beat.get("stopped")
    ]


def task_input_words(args: Iterable[Any], kwargs: Mapping[str, Any]) -> str:
    """A running task's input in a few words, ids only: numbers and short id-like
    strings, the first INPUT_ITEMS of a list. Anything else (which could hold a user's
    text) is shown as "…": the heartbeat never carries it to Redis."""
    words = [_input_value(value) for value in args]
    words += [f"{name}={_input_value(value)}" for name, value in kwargs.items()]
    return ", ".join(words)


def _input_value(value: Any) -> str:
    if isinstance(value, bool | int | float) or value is None:
        return str(value)
    if isinstance(value, str):
        bare = value.replace("-", "").replace("_", "").replace(".", "")
        return value if len(value) <= INPUT_ID_LENGTH and bare.isalnum() else "…"
    if isinstance(value, list | tuple):
        shown = [_input_value(item) for item in value[:INPUT_ITEMS]]
        more = f", … {len(value)} in all" if len(value) > INPUT_ITEMS else ""
        return f"[{', '.join(shown)}{more}]"
    return "…"
