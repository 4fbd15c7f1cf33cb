"""The Redis side of working memory (memories/services/working.py): the key layout and
the Lua scripts that change a room's items atomically.

Redis layout, per room (the ``{project:room}`` hash tag keeps a room on one cluster slot):

* ``memoryhub:working:{P:R}:item:<id>``: a hash (content, metadata JSON, created_at and
  expires_at in ms, and once a search computed it the vector as float32 bytes with the
  model it came from) that expires by itself at expires_at;
* ``...:index``: a sorted set of ids by write order (FIFO);
* ``...:expiry``: a sorted set of ids by expires_at, to purge the ids of expired items;
* ``...:sizes``: a hash of id -> bytes, and ``...:bytes`` the room's total.

Every change runs as one Lua script, so a write, its FIFO trim and the bookkeeping are
atomic: concurrent writers never leave a room over its cap. The bookkeeping keys expire
with the room's longest-lived item. A Redis restart loses working memory by design.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import redis

from memories.providers.redis_client import redis_client

KEY_PREFIX = "memoryhub:working"
_INDEX_KEY = re.compile(rf"^{KEY_PREFIX}:\{{(\d+):(\d+)\}}:index$")


class WorkingMemoryUnavailable(Exception):
    """Redis cannot be reached: working memory can neither be read nor written."""


# --- Lua: each script gets KEYS = index, expiry, sizes, bytes and ARGV[1] = room prefix ---

_COMMON = """
local prefix = ARGV[1]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function drop(id)
  local size = tonumber(redis.call('HGET', KEYS[3], id) or 0)
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  if size > 0 then redis.call('DECRBY', KEYS[4], size) end
  return redis.call('DEL', prefix .. ':item:' .. id)
end
local function purge(now)
  local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
  for _, id in ipairs(expired) do drop(id) end
  return #expired
end
local function fifo(cap, keep)
  local dropped = 0
  while tonumber(redis.call('GET', KEYS[4]) or 0) > cap do
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
    if #oldest == 0 or oldest[1] == keep then break end
    drop(oldest[1])
    dropped = dropped + 1
  end
  return dropped
end
local function tidy()
  if redis.call('ZCARD', KEYS[1]) == 0 then
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
  end
end
"""

# ARGV: prefix, id, content, metadata, ttl_ms, size, cap -> {created_at, expires_at, dropped}
_ADD = """
local id, ttl, size, cap = ARGV[2], tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now = now_ms()
purge(now)
local expires = now + ttl
local order = now
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if #last > 0 and tonumber(last[2]) >= order then order = tonumber(last[2]) + 1 end
local key = prefix .. ':item:' .. id
redis.call('HSET', key, 'content', ARGV[3], 'metadata', ARGV[4],
           'created_at', now, 'expires_at', expires)
redis.call('PEXPIREAT', key, expires)
redis.call('ZADD', KEYS[1], order, id)
redis.call('ZADD', KEYS[2], expires, id)
redis.call('HSET', KEYS[3], id, size)
redis.call('INCRBY', KEYS[4], size)
local dropped = fifo(cap, id)
local latest = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
for i = 1, 4 do redis.call('PEXPIREAT', KEYS[i], tonumber(latest[2]) + 60000) end
return {now, expires, dropped}
"""

# ARGV: prefix, with_vectors -> {bytes, {id, content, metadata, created, expires[, vector,
# model]}...}
_READ = """
purge(now_ms())
tidy()
local out = {tonumber(redis.call('GET', KEYS[4]) or 0)}
local fields = {'content', 'metadata', 'created_at', 'expires_at'}
if ARGV[2] == '1' then
  table.insert(fields, 'vector')
  table.insert(fields, 'model')
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local values = redis.call('HMGET', prefix .. ':item:' .. id, unpack(fields))
  if values[1] then table.insert(out, {id, unpack(values)}) end
end
return out
"""

# ARGV: prefix, model, id, vector, id, vector... -> how many were stored (live items only)
_VECTORS = """
local stored = 0
for i = 3, #ARGV, 2 do
  local key = prefix .. ':item:' .. ARGV[i]
  if redis.call('EXISTS', key) == 1 then
    redis.call('HSET', key, 'vector', ARGV[i + 1], 'model', ARGV[2])
    stored = stored + 1
  end
end
return stored
"""

# ARGV: prefix, id -> 1 if a live item was deleted, else 0
_DELETE = """
purge(now_ms())
local gone = 0
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then gone = drop(ARGV[2]) end
tidy()
return gone
"""

# ARGV: prefix -> how many live items were deleted
_CLEAR = """
local live = 0
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  live = live + redis.call('DEL', prefix .. ':item:' .. id)
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return live
"""

# ARGV: prefix, cap -> {expired ids purged, items dropped FIFO}
_TRIM = """
local purged = purge(now_ms())
local dropped = fifo(tonumber(ARGV[2]), '')
tidy()
return {purged, dropped}
"""


@dataclass(frozen=True)
class _Scripts:
    add: Any
    read: Any
    vectors: Any
    delete: Any
    clear: Any
    trim: Any


@lru_cache(maxsize=4)
def _scripts(client: redis.Redis) -> _Scripts:
    # EVALSHA, falling back to EVAL after a Redis restart forgot the scripts
    return _Scripts(
        *(
            client.register_script(_COMMON + body)
            for body in (_ADD, _READ, _VECTORS, _DELETE, _CLEAR, _TRIM)
        )
    )


@contextmanager
def _reachable() -> Iterator[None]:
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError) as error:
        raise WorkingMemoryUnavailable(f"Redis unreachable: {error}") from error


def room_prefix(project_id: int, room_id: int) -> str:
    """The prefix of every key of one room's working memory."""
    return f"{KEY_PREFIX}:{{{project_id}:{room_id}}}"


def room_keys(prefix: str) -> list[str]:
    """The room's bookkeeping keys, in the order the scripts expect: index, expiry,
    sizes, bytes."""
    return [f"{prefix}:index", f"{prefix}:expiry", f"{prefix}:sizes", f"{prefix}:bytes"]


def script_run(script_name: str, prefix: str, *args: Any) -> Any:
    """Run one script (add, read, vectors, delete, clear, trim) on the room at ``prefix``;
    raises WorkingMemoryUnavailable if Redis cannot be reached."""
    client = redis_client()
    script = getattr(_scripts(client), script_name)
    with _reachable():
        return script(keys=room_keys(prefix), args=[prefix, *args], client=client)


def index_keys(*, project_id: int | None) -> list[bytes]:
    """The index key of every room holding working memory (of one project, or all)."""
    pattern = f"{KEY_PREFIX}:{{{'*' if project_id is None else project_id}:*}}:index"
    with _reachable():
        return list(redis_client().scan_iter(match=pattern, count=1000))


def index_key_room(key: bytes) -> tuple[int, int] | None:
    """The (project id, room id) of an index key; None for a key of another shape."""
    match = _INDEX_KEY.match(key.decode())
    return (int(match[1]), int(match[2])) if match else None
