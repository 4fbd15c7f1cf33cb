"""This process's Redis client: one connection pool per REDIS_URL, short timeouts (a
request never hangs on a Redis that is down; the caller answers 503 or falls back)."""

from __future__ import annotations

from functools import lru_cache

import redis
from django.conf import settings

CONNECT_TIMEOUT_SECONDS = 0.5
SOCKET_TIMEOUT_SECONDS = 1.0


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    # redis-py's pool notices a fork (gunicorn, Celery prefork) and reconnects in the child
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        health_check_interval=30,
        retry=None,  # redis-py 8 retries a refused connection for ~4.6 s by default
    )


def redis_client() -> redis.Redis:
    """The Redis client of this process for settings.REDIS_URL (bytes in, bytes out)."""
    return _client(settings.REDIS_URL)
