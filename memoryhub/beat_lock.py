"""One Celery beat at a time, whatever runs how many: a lock the beat holds in Redis.

Two beats would both send every periodic task: each keeps its own clock of when an
entry is due (django_celery_beat's DatabaseScheduler saves last_run_at, but each beat
sends from its own copy), so every backfill, sweep, prune and purge would run twice and
a crontab entry twice at its minute. That happens as soon as a second machine runs
beat, a compose file is scaled, or a supervisor starts a new beat beside one it lost
track of.

So a beat takes the key ``memoryhub:beat:lock`` in the broker's Redis before its
scheduler starts (celery's beat_init signal, memoryhub/celery.py): SET NX with an
expiry of BEAT_LOCK_SECONDS (default 30), its value naming the holder (host:pid). A
thread renews it every third of that. A second beat finds the key taken and waits as a
standby, trying again every few seconds, having sent nothing: it takes over within
BEAT_LOCK_SECONDS of the first one dying (at once when the first one stops cleanly: it
deletes its lock on exit). A beat that loses its lock (it could not renew it for
BEAT_LOCK_SECONDS: Redis was down or the process was frozen, and another beat may hold
it now; or another beat holds it) stops itself with SIGTERM (beat saves its schedule
and exits); its supervisor (Docker's restart policy, `manage.py hub`) starts it again,
as a standby if need be. A lock that vanished with a Redis restarted empty is taken
again at the next renewal: nobody else held it.

BEAT_LOCK_SECONDS=0 turns the lock off.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from memoryhub.env import env_float

logger = logging.getLogger(__name__)

LOCK_KEY = "memoryhub:beat:lock"
DEFAULT_SECONDS = 30.0
# the value is the holder's only when it is ours: renewal and release are atomic
# renewal takes the key again when it is gone (Redis restarted without it): nobody holds it
_RENEW = """
local holder = redis.call('get', KEYS[1])
if holder == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
if not holder then redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


def lock_seconds() -> float:
    return env_float("BEAT_LOCK_SECONDS", DEFAULT_SECONDS)


def holder_token() -> str:
    """Who holds the lock, as its value says: this host and process."""
    return f"{socket.gethostname()}:{os.getpid()}:{time.time_ns() % 10**6:06d}"


def lock_holder(client: redis.Redis) -> str | None:
    value = client.get(LOCK_KEY)
    return value.decode() if isinstance(value, bytes) else value


def lock_take(client: redis.Redis, token: str, seconds: float) -> bool:
    """Take the lock if nobody holds it (or this token already does)."""
    if client.set(LOCK_KEY, token, nx=True, px=int(seconds * 1000)):
        return True
    return lock_renew(client, token, seconds)


def lock_renew(client: redis.Redis, token: str, seconds: float) -> bool:
    """Extend the lock if ``token`` still holds it, or take it again if nobody does;
    False when another holder has it."""
    return bool(client.eval(_RENEW, 1, LOCK_KEY, token, int(seconds * 1000)))


def lock_release(client: redis.Redis, token: str) -> bool:
    return bool(client.eval(_RELEASE, 1, LOCK_KEY, token))


@dataclass
class BeatLock:
    """The lock this process holds, and the thread that renews it."""

    client: redis.Redis
    token: str
    seconds: float
    on_lost: Callable[[], None]
    renewed_at: float = field(default_factory=time.monotonic)
    stopped: threading.Event = field(default_factory=threading.Event)

    def renew_once(self) -> bool:
        """Renew now; False (and ``on_lost`` called) once the lock is lost."""
        try:
            if lock_renew(self.client, self.token, self.seconds):
                self.renewed_at = time.monotonic()
                return True
            logger.error("beat lock taken by %s: this beat stops", self._holder())
        except redis.RedisError as error:
            unrenewed = time.monotonic() - self.renewed_at
            if unrenewed < self.seconds:
                logger.warning(
                    "beat lock not renewed (%s); held %.0f s more", error, self.seconds - unrenewed
                )
                return True
            logger.error("beat lock not renewed for %.0f s (%s): this beat stops", unrenewed, error)
        self.stopped.set()
        self.on_lost()
        return False

    def _holder(self) -> str:
        try:
            return lock_holder(self.client) or "nobody (it expired)"
        except redis.RedisError:
            return "an unknown holder"

    def renew_forever(self) -> None:
        while not self.stopped.wait(self.seconds / 3):
            if not self.renew_once():
                return

    def release(self) -> None:
        self.stopped.set()
        try:
            lock_release(self.client, self.token)
        except redis.RedisError as error:  # it expires by itself
            logger.warning("beat lock not released (%s): it expires in %.0f s", error, self.seconds)


def beat_lock_acquire(
    client: redis.Redis,
    *,
    seconds: float,
    poll: float = 2.0,
    timeout: float | None = None,
    on_lost: Callable[[], None] | None = None,
) -> BeatLock | None:
    """Wait until this process holds the lock (None after ``timeout`` seconds).
    Redis unreachable meanwhile: logged, tried again."""
    token = holder_token()
    deadline = None if timeout is None else time.monotonic() + timeout
    waiting_for = None
    while True:
        try:
            if lock_take(client, token, seconds):
                logger.info(
                    "beat lock taken (%s, %s, expires after %.0f s unrenewed)",
                    LOCK_KEY,
                    token,
                    seconds,
                )
                return BeatLock(client, token, seconds, on_lost or _stop_self)
            holder = lock_holder(client)
            if holder != waiting_for:
                logger.warning(
                    "another beat holds the lock (%s): this one waits as a standby "
                    "and sends nothing until it is free",
                    holder,
                )
                waiting_for = holder
        except redis.RedisError as error:
            logger.warning("beat lock: Redis unreachable (%s); trying again", error)
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(poll)


def _stop_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # beat's own handler: save the schedule, exit


def beat_lock_hold(redis_url: str) -> BeatLock | None:
    """At beat's start: wait for the lock, renew it from a thread, release it at exit.
    None (and no lock) when BEAT_LOCK_SECONDS is 0."""
    seconds = lock_seconds()
    if seconds <= 0:
        logger.warning("BEAT_LOCK_SECONDS=0: no beat lock; run one beat only")
        return None
    client = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=2)
    lock = beat_lock_acquire(client, seconds=seconds, poll=min(2.0, seconds / 3))
    assert lock is not None  # no timeout: it waited until it had it
    threading.Thread(target=lock.renew_forever, name="beat-lock", daemon=True).start()
    atexit.register(lock.release)
    return lock
