"""Login throttling for the console and the admin: failed logins counted per username
and per client IP in the Django cache (Redis), so every web process sees the same
counts. Past a limit within the window, logins are refused until the window ends.

The window is fixed from the first failure (not sliding): simple, one round trip per
check, and an attacker gets at most LOGIN_FAILURES_PER_USERNAME guesses per window.
"""

from __future__ import annotations

import hashlib
import logging
import time

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)


def _keys(scope: str, value: str) -> tuple[str, str]:
    # hashed: a username is user input, and cache keys have a restricted alphabet
    digest = hashlib.sha256(value.encode()).hexdigest()[:32]
    return f"login-failures:{scope}:{digest}", f"login-failures:{scope}:{digest}:since"


def _scopes(username: str, ip: str) -> list[tuple[str, str, int]]:
    return [
        ("user", username.strip().casefold(), settings.LOGIN_FAILURES_PER_USERNAME),
        ("ip", ip, settings.LOGIN_FAILURES_PER_IP),
    ]


def login_wait_seconds(*, username: str, ip: str) -> int:
    """Seconds until a login for this username from this IP may be tried again; 0 when
    it may be now. Without the cache the login is allowed (and the error logged): an
    outage of Redis must not lock every operator out."""
    window = settings.LOGIN_FAILURES_WINDOW_SECONDS
    keys = [key for scope, value, _ in _scopes(username, ip) for key in _keys(scope, value)]
    try:
        stored = cache.get_many(keys)
    except Exception:  # noqa: BLE001 - any cache error: allow, loudly
        logger.exception("login throttle: cache unavailable, not throttling")
        return 0
    wait = 0
    for scope, value, limit in _scopes(username, ip):
        count_key, since_key = _keys(scope, value)
        if stored.get(count_key, 0) >= limit:
            since = stored.get(since_key, time.time())
            wait = max(wait, int(since + window - time.time()) + 1)
    return wait


def login_failure_record(*, username: str, ip: str) -> None:
    """Count one failed login against the username and the IP."""
    window = settings.LOGIN_FAILURES_WINDOW_SECONDS
    try:
        for scope, value, _ in _scopes(username, ip):
            count_key, since_key = _keys(scope, value)
            if cache.add(since_key, time.time(), timeout=window):
                cache.set(count_key, 0, timeout=window)
            try:
                cache.incr(count_key)
            except ValueError:  # expired between the two calls: a new window
                cache.set(count_key, 1, timeout=window)
    except Exception:  # noqa: BLE001
        logger.exception("login throttle: cache unavailable, failure not counted")


def login_success_record(*, username: str) -> None:
    """A successful login clears the username's failures (not the IP's)."""
    try:
        cache.delete_many(list(_keys("user", username.strip().casefold())))
    except Exception:  # noqa: BLE001
        logger.exception("login throttle: cache unavailable")
