"""This process's Redis client: one connection pool per REDIS_URL, short timeouts (a
request never hangs on a Redis that is down; the caller answers 503 or falls back).

Once a command fails to reach Redis (refused, or no answer within the socket timeout),
the client raises RedisPaused at once for PAUSE_SECONDS instead of trying again. Every
caller already treats Redis as optional or answers 503, but a context request touches
Redis several times: with Redis hanging, each touch waited its 1 s timeout, and every
context took 4-5 s (BENCHMARKS.md). Task sending shares the pause (task_sending.py): the
broker is the same Redis.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

import redis
from django.conf import settings
from redis.client import Pipeline

CONNECT_TIMEOUT_SECONDS = 0.5
SOCKET_TIMEOUT_SECONDS = 1.0
PAUSE_SECONDS = 5.0

logger = logging.getLogger(__name__)
_paused_until = 0.0
T = TypeVar("T")


class RedisPaused(redis.ConnectionError):
    """Not tried: Redis could not be reached less than PAUSE_SECONDS ago."""


def redis_paused() -> bool:
    """Whether Redis failed this process within the last PAUSE_SECONDS."""
    return time.monotonic() < _paused_until


def redis_failed(error: BaseException, what: str = "Redis unreachable") -> None:
    """Redis could not be reached: this process leaves it alone for PAUSE_SECONDS.
    Logged once per outage (``what`` and the error), not at every refused command."""
    global _paused_until
    if not redis_paused():
        logger.warning(
            "%s (%s): Redis is not tried from this process for %.0f s",
            what,
            error,
            PAUSE_SECONDS,
        )
    _paused_until = time.monotonic() + PAUSE_SECONDS


def _guarded(call: Callable[[], T]) -> T:
    if redis_paused():
        raise RedisPaused(f"Redis not tried: unreachable less than {PAUSE_SECONDS:.0f} s ago")
    try:
        return call()
    except (redis.ConnectionError, redis.TimeoutError) as error:
        redis_failed(error)
        raise


class PausingPipeline(Pipeline):
    def execute(self, raise_on_error: bool = True) -> list[Any]:
        return _guarded(lambda: super(PausingPipeline, self).execute(raise_on_error))


class PausingRedis(redis.Redis):
    """A client whose commands, scripts and pipelines respect the pause."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        return _guarded(lambda: super(PausingRedis, self).execute_command(*args, **options))

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> PausingPipeline:
        return PausingPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )


@lru_cache(maxsize=16)
def _client(url: str, pausing: bool, timeout: float, connect_timeout: float) -> redis.Redis:
    # redis-py's pool notices a fork (gunicorn, Celery prefork) and reconnects in the child
    kind = PausingRedis if pausing else redis.Redis
    return kind.from_url(
        url,
        socket_connect_timeout=connect_timeout,
        socket_timeout=timeout,
        health_check_interval=30,
        retry=None,  # redis-py 8 retries a refused connection for ~4.6 s by default
    )


def redis_client(
    *,
    url: str | None = None,
    pausing: bool = True,
    timeout: float = SOCKET_TIMEOUT_SECONDS,
    connect_timeout: float | None = None,
) -> redis.Redis:
    """This process's Redis client for ``url`` (settings.REDIS_URL by default; bytes in,
    bytes out), one connection pool per set of arguments. Never retries a command.

    ``pausing`` (the default) shares the process's pause: after a failure to reach
    Redis, commands raise RedisPaused at once for PAUSE_SECONDS. ``pausing=False`` is
    for callers that must see Redis as it is now: readiness probes, the embedded
    server's start, a worker's heartbeat and flags, the reads' counting (its own short
    ``timeout``). ``connect_timeout`` defaults to the lesser of ``timeout`` and
    CONNECT_TIMEOUT_SECONDS."""
    if connect_timeout is None:
        connect_timeout = min(timeout, CONNECT_TIMEOUT_SECONDS)
    return _client(url or settings.REDIS_URL, pausing, timeout, connect_timeout)
