"""How many times a task has tried one input, in Redis: the count that parks a poison input
(memories/services/parking.py) instead of letting it run in a loop.

Each attempt is counted when it begins and forgotten when it succeeds. An attempt that
raised or reached its time limit ends "closed"; one whose process died (killed at the hard
limit, by the kernel's OOM killer; acks_late and reject_on_worker_lost then deliver the
task again) never closes, which the next attempt sees. A count lives ATTEMPTS_TTL after
its last attempt (attempts further apart are unrelated), a parked input's PARKED_TTL.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from memories.providers.redis_client import redis_client

PREFIX = "memoryhub:task:attempts:"
ATTEMPTS_TTL = 24 * 3600
# a parked input is not tried again for this long, even if Redis is its only record;
# the ParkedTask row stays until an operator retries it
PARKED_TTL = 30 * 24 * 3600
KEY_IDS_MAX = 3  # an input of more ids is named by a digest of them


@dataclass(frozen=True)
class Attempt:
    """One attempt at an input, as it begins."""

    key: str
    number: int  # 1 for the first attempt since the last success
    died: bool  # the attempt before began and never ended: its process died
    parked: bool  # the input is parked: it must not run


def input_key(kind: str, ids: Sequence[object]) -> str:
    """A task's input in one string: "room:12", "message:<digest of the ids>"."""
    names = [str(pk) for pk in ids]
    if len(names) <= KEY_IDS_MAX:
        return f"{kind}:{','.join(names)}"
    digest = hashlib.sha1(json.dumps(sorted(names)).encode(), usedforsecurity=False)
    return f"{kind}:{len(names)}:{digest.hexdigest()}"


def attempts_key(task: str, key: str) -> str:
    return f"{PREFIX}{task}:{key}"


def attempt_begin(*, key: str) -> Attempt:
    """Count an attempt at the input ``key`` (attempts_key), unless it is parked;
    RedisError propagates."""
    client = redis_client(pausing=False)
    was_open, parked = client.hmget(key, ["open", "parked"])
    if parked == b"1":
        return Attempt(key=key, number=0, died=False, parked=True)
    with client.pipeline(transaction=True) as pipe:
        pipe.hincrby(key, "attempts", 1)
        pipe.hset(key, "open", 1)
        pipe.expire(key, ATTEMPTS_TTL)
        number, *_ = pipe.execute()
    return Attempt(key=key, number=int(number), died=was_open == b"1", parked=False)


def attempt_failed(*, key: str, error: str) -> int:
    """Close the attempt as failed (raised, or stopped at its time limit); returns how
    many attempts at the input failed or died in a row."""
    with redis_client(pausing=False).pipeline(transaction=True) as pipe:
        pipe.hset(key, mapping={"open": 0, "error": error[:500]})
        pipe.hincrby(key, "attempts", 0)
        _, attempts = pipe.execute()
    return int(attempts)


def attempt_succeeded(*, key: str) -> None:
    """The input went through (or failed for a passing reason, and is retried): forget
    its attempts."""
    redis_client(pausing=False).delete(key)


def attempt_parked(*, key: str) -> None:
    """Mark the input parked: attempts from now on do not run (attempt_begin says so)."""
    with redis_client(pausing=False).pipeline(transaction=True) as pipe:
        pipe.hset(key, mapping={"open": 0, "parked": 1})
        pipe.expire(key, PARKED_TTL)
        pipe.execute()


def attempt_error(*, key: str) -> str:
    """The error the last failed attempt at the input recorded ("" if none)."""
    raw = redis_client(pausing=False).hget(key, "error")
    return raw.decode() if isinstance(raw, bytes) else ""
