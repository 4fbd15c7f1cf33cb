"""Worker heartbeats: each Celery worker writes one to Redis every few seconds."""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from memories.providers.redis_client import redis_client

HEARTBEAT_PREFIX = "memoryhub:worker:"
HEARTBEAT_INTERVAL = 10
HEARTBEAT_TTL = 3 * HEARTBEAT_INTERVAL


def _redis() -> redis.Redis:
    # not paused by a request's failure: a heartbeat says whether Redis answers now
    return redis_client(pausing=False)


def worker_heartbeat(*, hostname: str, info: dict[str, Any] | None = None) -> None:
    """Record that ``hostname`` is alive now (expires unless renewed)."""
    payload = json.dumps({"at": time.time(), **(info or {})})
    _redis().set(f"{HEARTBEAT_PREFIX}{hostname}", payload, ex=HEARTBEAT_TTL)


def worker_heartbeats() -> list[dict[str, Any]]:
    """The workers seen within the heartbeat TTL, with their age in seconds."""
    client = _redis()
    now = time.time()
    alive = []
    for key in client.scan_iter(f"{HEARTBEAT_PREFIX}*"):
        raw = client.get(key)
        if raw is None:
            continue
        data = json.loads(raw)
        name = key.decode()[len(HEARTBEAT_PREFIX) :]
        alive.append({"hostname": name, "age_seconds": round(now - data.pop("at"), 1), **data})
    return sorted(alive, key=lambda worker: worker["hostname"])
