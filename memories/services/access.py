"""Access tracking: each time a read returns memories to an agent, their access_count
and accessed_at grow, counted in Redis on the request path (one round trip) and
written to PostgreSQL by a beat flush (batched, off the request path).

Two Redis hashes hold what was read since the last flush: ACCESS_COUNT_KEY (memory id
-> reads) and ACCESS_AT_KEY (memory id -> the last read, epoch seconds). A flush takes
both at once (renamed to a token's keys, the token added to TAKEN_KEY), writes them
in one transaction, then deletes them. A flush that dies before its delete leaves the
token; the next flush after ORPHAN_AFTER_SECONDS takes it over (written twice only if
it died between its commit and its delete).
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import redis
from django.conf import settings
from django.db import connection, transaction

from memories.config import settings_from_overrides
from memories.models import Memory, Project
from memories.providers.redis_client import redis_client

logger = logging.getLogger(__name__)

ACCESS_COUNT_KEY = "memoryhub:access:count"
ACCESS_AT_KEY = "memoryhub:access:at"
TAKEN_KEY = "memoryhub:access:taken"  # set of the tokens of taken, unflushed hashes
ORPHAN_AFTER_SECONDS = 600
# counting waits at most this long on Redis, without retries; after a failure reads
# skip the counting this long: a Redis that is down costs one request a timeout at most
RECORD_TIMEOUT_SECONDS = 0.25
PAUSE_SECONDS = 30.0
FLUSH_CHUNK = 1_000

_paused_until = 0.0

# KEYS: ACCESS_COUNT_KEY, ACCESS_AT_KEY; ARGV[1]: the time, then the memory ids (one
# command: redis-py spends more time packing a pipeline of ten than Redis running it)
_RECORD = """
for i = 2, #ARGV do
  redis.call('HINCRBY', KEYS[1], ARGV[i], 1)
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[1])
end
"""

# KEYS: the count and at hashes to take, the token's count and at keys, TAKEN_KEY;
# ARGV[1]: the new token, ARGV[2]: the token being taken over ('' for the live hashes)
_TAKE = """
local moved = 0
for i = 1, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('RENAME', KEYS[i], KEYS[i + 2])
    moved = moved + 1
  end
end
if moved > 0 then redis.call('SADD', KEYS[5], ARGV[1]) end
if ARGV[2] ~= '' then redis.call('SREM', KEYS[5], ARGV[2]) end
return moved
"""


def accesses_record(*, project: Project, memory_ids: list[Any]) -> None:
    """Count one read of each memory (when the project's ``importance.track_access`` is
    on): one Redis round trip (a script), made by a background thread so the read does
    not wait for it. Never raises: with Redis down the reads go uncounted (logged at
    debug) and counting pauses for PAUSE_SECONDS."""
    if not memory_ids or time.monotonic() < _paused_until:
        return
    if not _tracking_on(json.dumps(project.settings, sort_keys=True, default=str)):
        return
    ids = [str(memory_id) for memory_id in dict.fromkeys(memory_ids)]
    # sent by this process's counting thread: the read answers without waiting on Redis
    _sender(os.getpid()).submit(_send, ids, time.time())


def _send(ids: list[str], at: float) -> None:
    global _paused_until
    try:
        _recorder(settings.REDIS_URL)(keys=[ACCESS_COUNT_KEY, ACCESS_AT_KEY], args=[at, *ids])
    except Exception as error:  # counting a read must never fail the read
        _paused_until = time.monotonic() + PAUSE_SECONDS
        logger.debug("accesses of %d memories not counted: %s", len(ids), error)


@lru_cache(maxsize=4)
def _sender(pid: int) -> ThreadPoolExecutor:
    # one per process (by pid: a forked web worker must not inherit its parent's thread)
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="access-count")


def accesses_sent(timeout: float = 5.0) -> None:
    """Wait until the reads this process counted have reached Redis."""
    _sender(os.getpid()).submit(lambda: None).result(timeout=timeout)


@lru_cache(maxsize=1024)
def _tracking_on(overrides: str) -> bool:
    # the project's effective settings, parsed once per version of its overrides (a
    # parse costs more than the counting)
    return settings_from_overrides(json.loads(overrides)).importance.track_access


@lru_cache(maxsize=4)
def _recorder(url: str) -> Any:
    # not the pausing client: the counting has its own short timeout, and its failures
    # (on a sender thread) must not pause the request's own Redis commands
    client = redis_client(url=url, pausing=False, timeout=RECORD_TIMEOUT_SECONDS)
    return client.register_script(_RECORD)


def accesses_flush() -> int:
    """Write the reads counted in Redis to the memories (access_count + n, accessed_at
    the later of both) in one transaction, skipping memories that are gone; no
    updated_at, no revision. Returns how many memories were updated. Raises RedisError
    with Redis down (the counts wait in Redis for the next flush)."""
    accesses_sent()  # this process's own counted reads first (a worker has none)
    client = redis_client()
    tokens = [_orphan_take(client, token) for token in _orphans(client)]
    tokens.append(_take(client, ACCESS_COUNT_KEY, ACCESS_AT_KEY, previous=""))
    updated = 0
    for token in tokens:
        if token is None:
            continue
        count_key, at_key = _token_keys(token)
        counts, times = client.hgetall(count_key), client.hgetall(at_key)
        updated += _accesses_write(counts, times)
        pipe = client.pipeline()  # MULTI: the hashes and their token go together
        pipe.delete(count_key, at_key)
        pipe.srem(TAKEN_KEY, token)
        pipe.execute()
    if updated:
        logger.info("access flush: %d memories updated", updated)
    return updated


def _token_keys(token: str) -> tuple[str, str]:
    return f"{TAKEN_KEY}:{token}:count", f"{TAKEN_KEY}:{token}:at"


def _take(client: redis.Redis, count_key: str, at_key: str, *, previous: str) -> str | None:
    """Rename the two hashes to a new token's keys (atomically); None if both are empty."""
    token = f"{int(time.time())}-{uuid.uuid4().hex}"
    moved = client.eval(
        _TAKE, 5, count_key, at_key, *_token_keys(token), TAKEN_KEY, token, previous
    )
    return token if moved else None


def _orphans(client: redis.Redis) -> list[str]:
    """Tokens taken more than ORPHAN_AFTER_SECONDS ago by a flush that did not finish."""
    cutoff = time.time() - ORPHAN_AFTER_SECONDS
    tokens = [raw.decode() for raw in client.smembers(TAKEN_KEY)]  # type: ignore[union-attr]
    return [token for token in tokens if int(token.split("-", 1)[0]) < cutoff]


def _orphan_take(client: redis.Redis, token: str) -> str | None:
    # renamed again, so that two flushes cannot both take it over
    return _take(client, *_token_keys(token), previous=token)


def _accesses_write(counts: dict[Any, Any], times: dict[Any, Any]) -> int:
    """Add the counts (raw Redis hashes: id -> reads, id -> epoch seconds)."""
    reads: Counter[uuid.UUID] = Counter()
    last: dict[uuid.UUID, datetime] = {}
    now = datetime.now(UTC)
    for raw in counts.keys() | times.keys():
        try:
            memory_id = uuid.UUID(raw.decode())
        except ValueError:
            continue
        reads[memory_id] = max(int(counts.get(raw, 1)), 1)
        at = times.get(raw)
        last[memory_id] = datetime.fromtimestamp(float(at), UTC) if at else now
    ids = sorted(reads)  # one lock order for every flush
    updated = 0
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(ids), FLUSH_CHUNK):
            chunk = ids[start : start + FLUSH_CHUNK]
            cursor.execute(
                f"UPDATE {Memory._meta.db_table} AS m "
                "SET access_count = m.access_count + a.n, "
                "accessed_at = greatest(m.accessed_at, a.at) "
                "FROM unnest(%s::uuid[], %s::int[], %s::timestamptz[]) AS a(id, n, at) "
                "WHERE m.id = a.id",
                [chunk, [reads[i] for i in chunk], [last[i] for i in chunk]],
            )
            updated += cursor.rowcount
    return updated
