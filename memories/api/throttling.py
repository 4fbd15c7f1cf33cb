"""Rate limits per API key: reads and writes counted apart, limits from the project's
configuration (``limits.reads_per_minute``, ``limits.writes_per_minute``; 0 = none).

A request over the limit is a 429 with Retry-After (DRF's Throttled). Counting is a
sliding window over two one-minute Redis counters (this minute's and the last one's,
weighted by how much of it still lies within the last 60 s): one atomic round trip per
request, shared by every web process, no burst of twice the rate at a minute's edge.
Redis unreachable: requests pass unthrottled (logged), never a 5xx.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import redis
from rest_framework import permissions
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from memories.models import ApiKey
from memories.providers.redis_client import redis_client
from memories.services.configuration import project_settings_get

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60
KEY = "memoryhub:throttle:{prefix}:{scope}:{window}"
# after Redis failed, count nothing for this long: a Redis that hangs would otherwise
# add its socket timeout to every request
PAUSE_AFTER_FAILURE_SECONDS = 5.0


def request_scope(request: Request, view: Any) -> str:
    """ "read" for GET/HEAD/OPTIONS and the POSTs that change nothing (searches, context),
    else "write"."""
    if request.method in permissions.SAFE_METHODS or getattr(view, "read_only_post", False):
        return "read"
    return "write"


def sliding_count(previous: int, current: int, elapsed: float) -> float:
    """Requests in the last minute, estimated: all of this minute's and the share of the
    last minute's that lies within it."""
    return previous * (1 - elapsed / WINDOW_SECONDS) + current


def seconds_until_allowed(previous: int, current: int, elapsed: float, rate: int) -> int:
    """How long until one more request fits within ``rate`` (at least 1 s), ``current``
    counting the requests allowed so far this minute."""
    if current + 1 > rate or previous <= 0:  # this minute alone is full: the next one
        wait = WINDOW_SECONDS - elapsed
    else:  # the last minute's share has to fall by enough
        wait = (1 - (rate - current - 1) / previous) * WINDOW_SECONDS - elapsed
    return max(1, math.ceil(wait))


class ApiKeyRateThrottle(BaseThrottle):
    """Each API key's reads and writes per minute, as its project's `limits` say."""

    paused_until = 0.0  # class-wide: one failure pauses counting for the whole process

    def allow_request(self, request: Request, view: Any) -> bool:
        key = request.auth
        if not isinstance(key, ApiKey):
            return True  # unauthenticated: refused by the permission check anyway
        scope = request_scope(request, view)
        limits = project_settings_get(project=key.project).limits
        rate = limits.reads_per_minute if scope == "read" else limits.writes_per_minute
        if rate <= 0 or time.monotonic() < ApiKeyRateThrottle.paused_until:
            return True
        try:
            return self._count(key.prefix, scope, rate)
        except (redis.RedisError, OSError) as exc:
            ApiKeyRateThrottle.paused_until = time.monotonic() + PAUSE_AFTER_FAILURE_SECONDS
            logger.warning(
                "rate limits not enforced for %.0f s: Redis unavailable (%s)",
                PAUSE_AFTER_FAILURE_SECONDS,
                exc,
            )
            return True

    def _count(self, prefix: str, scope: str, rate: int) -> bool:
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        elapsed = now - window * WINDOW_SECONDS
        current_key = KEY.format(prefix=prefix, scope=scope, window=window)
        previous_key = KEY.format(prefix=prefix, scope=scope, window=window - 1)
        pipe = redis_client().pipeline(transaction=False)
        pipe.incr(current_key)
        pipe.expire(current_key, 2 * WINDOW_SECONDS)
        pipe.get(previous_key)
        current, _, previous_raw = pipe.execute()
        previous = int(previous_raw or 0)
        if sliding_count(previous, current, elapsed) <= rate:
            return True
        redis_client().decr(current_key)  # a refused request does not count
        self.retry_after = seconds_until_allowed(previous, current - 1, elapsed, rate)
        return False

    def wait(self) -> float | None:
        return float(getattr(self, "retry_after", WINDOW_SECONDS))
