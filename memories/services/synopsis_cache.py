"""The user synopsis in Redis: each user's row as stored (``memoryhub:synopsis:<user
id>``, a hash of the row's ``version`` and its ``data``), so a read is one HMGET.

Every write puts the new version after its commit, and a reader that missed puts what
it read, both through a script that keeps the newer version, so a slow reader never
overwrites a newer write with an older one. Entries expire after an hour (a write
whose put was lost to a Redis blip is served at most that long).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import redis
from django.db import transaction

from memories.models import Synopsis, SynopsisPart
from memories.models.synopsis import PARTS
from memories.providers.redis_client import redis_client

logger = logging.getLogger(__name__)

CACHE_KEY = "memoryhub:synopsis:{}"
CACHE_SECONDS = 3600

# KEYS[1] the cache key; ARGV: version, data, seconds. Keeps the newer version.
_CACHE_PUT = """
local held = tonumber(redis.call('HGET', KEYS[1], 'version') or '-1')
if tonumber(ARGV[1]) < held then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'data', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""


@dataclass(frozen=True)
class SynopsisStored:
    """A user's synopsis row as the cache holds it: its version and its parts."""

    version: int  # 0: no row yet
    parts: dict[str, SynopsisPart | None]

    @classmethod
    def of(cls, row: Synopsis | None) -> SynopsisStored:
        if row is None:
            return cls(0, dict.fromkeys(PARTS))
        return cls(row.version, {name: row.part(name) for name in PARTS})

    def data(self) -> str:
        return json.dumps(
            {name: part.as_json() if part else None for name, part in self.parts.items()}
        )

    @classmethod
    def load(cls, version: int, data: bytes | str) -> SynopsisStored:
        parts = json.loads(data)
        return cls(
            version, {name: SynopsisPart.from_json(p) if p else None for name, p in parts.items()}
        )


def synopsis_cache_get(*, end_user_id: int) -> SynopsisStored | None:
    """The user's synopsis as cached, None when it is not; redis.RedisError when Redis
    cannot be reached (the caller reads the database)."""
    version, data = redis_client().hmget(CACHE_KEY.format(end_user_id), ["version", "data"])
    if version is None or data is None:
        return None
    return SynopsisStored.load(int(version), data)


@lru_cache(maxsize=4)
def _cache_script(client: redis.Redis) -> Any:
    return client.register_script(_CACHE_PUT)  # EVALSHA, EVAL after a Redis restart


def synopsis_cache_put(*, end_user_id: int, stored: SynopsisStored) -> None:
    """Cache ``stored`` unless a newer version is cached; a Redis error is logged only."""
    try:
        client = redis_client()
        _cache_script(client)(
            keys=[CACHE_KEY.format(end_user_id)],
            args=[stored.version, stored.data(), CACHE_SECONDS],
            client=client,
        )
    except redis.RedisError as error:
        logger.warning("could not cache the synopsis of user %s: %s", end_user_id, error)


def synopsis_cache_put_on_commit(*, row: Synopsis) -> None:
    """Cache the row as it is now once the transaction commits."""
    stored = SynopsisStored.of(row)  # this version, whatever happens to the row object later
    transaction.on_commit(lambda: synopsis_cache_put(end_user_id=row.end_user_id, stored=stored))
