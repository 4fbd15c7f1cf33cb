"""Read replicas: which of the streaming replicas named by DATABASE_REPLICA_URLS may
serve a read now, and who wrote recently enough to read from the primary instead.

A replica serves reads while it answers and replays the primary's WAL no later than
DATABASE_REPLICA_MAX_LAG_SECONDS. Its lag is asked of it once a second per process
(``pg_last_xact_replay_timestamp()`` when it has received WAL it has not replayed yet:
a replica that is idle because the primary is idle is not late), never per request. A
replica that does not answer (its connection fails, or its health check) is left
alone for DATABASE_REPLICA_RETRY_SECONDS: reads go to the primary meanwhile, with no
error; the connect timeout (DATABASE_REPLICA_CONNECT_TIMEOUT) bounds what the first
request to find it down waits.

Read-your-writes: an API key that wrote is remembered in Redis (a key per API key,
DATABASE_READ_YOUR_WRITES_SECONDS): every web process behind a load balancer sees it,
and agents keep no cookies. A console browser carries a signed cookie instead
(db_router.py): no Redis round trip on a console page, and it survives the new
session a login makes. With Redis down, every API read goes to the primary.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import dj_database_url
from django.conf import settings
from django.db import DatabaseError, connections

from memories.providers.redis_client import redis_client

logger = logging.getLogger(__name__)

ALIAS_PREFIX = "replica_"
LAG_CHECK_SECONDS = 1.0  # a replica's lag is asked at most this often per process
WROTE_KEY = "memoryhub:replica:wrote:"  # + the API key's digest

# 0 when the replica has replayed all it received; else how old the last transaction
# it replayed is (NULL: none yet, so unknown: not used until one is)
_LAG_SQL = """
SELECT CASE
    WHEN NOT pg_is_in_recovery() THEN 0
    WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0
    ELSE EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp())
END
"""


def replica_databases(urls: list[str], *, conn_max_age: int, timeout: int) -> dict[str, Any]:
    """DATABASES entries ``replica_0``, ``replica_1``... for DATABASE_REPLICA_URLS."""
    return {
        f"{ALIAS_PREFIX}{n}": replica_database(url, conn_max_age, timeout)
        for n, url in enumerate(urls)
    }


def replica_database(url: str, conn_max_age: int, timeout: int) -> dict[str, Any]:
    database: dict[str, Any] = dict(dj_database_url.parse(url))
    database["CONN_MAX_AGE"] = conn_max_age
    database["CONN_HEALTH_CHECKS"] = True  # a dead connection is seen before a read uses it
    database.setdefault("OPTIONS", {})["connect_timeout"] = timeout
    # nothing is created on a replica: the tests' database comes with the primary's WAL
    database["TEST"] = {"MIRROR": None, "NAME": database["NAME"]}
    return database


@dataclass
class _Replica:
    alias: str
    down_until: float = 0.0
    checked_at: float = float("-inf")
    lag: float | None = None  # seconds; None: not known (not asked yet, or no answer)
    lock: threading.Lock = field(default_factory=threading.Lock)


_states: dict[str, _Replica] = {}
_states_lock = threading.Lock()
_turn = itertools.count()
# requests each replica was chosen for in this process (the tests and the bench read it)
reads_routed: dict[str, int] = {}


def _state(alias: str) -> _Replica:
    state = _states.get(alias)
    if state is None:
        with _states_lock:
            state = _states.setdefault(alias, _Replica(alias))
    return state


def replica_choose(checked: set[str]) -> str | None:
    """A replica that may serve a read now (taken in turns), else None: the primary.
    ``checked``: the replicas whose connection this request has checked already."""
    aliases: list[str] = settings.DATABASE_REPLICAS
    if not aliases:
        return None
    start = next(_turn) if len(aliases) > 1 else 0
    for n in range(len(aliases)):
        alias = aliases[(start + n) % len(aliases)]
        if _usable(_state(alias), checked):
            reads_routed[alias] = reads_routed.get(alias, 0) + 1
            return alias
    return None


def _usable(state: _Replica, checked: set[str]) -> bool:
    now = time.monotonic()
    if now < state.down_until:
        return False
    # one thread asks; the others go on with the last answer meanwhile
    if now - state.checked_at >= LAG_CHECK_SECONDS and state.lock.acquire(blocking=False):
        try:
            _lag_check(state, now)
        finally:
            state.lock.release()
    limit = float(settings.DATABASE_REPLICA_MAX_LAG_SECONDS)
    if state.lag is None or state.lag > limit or now < state.down_until:
        return False
    return _connection_ready(state, checked)


def _lag_check(state: _Replica, now: float) -> None:
    state.checked_at = now
    try:
        with connections[state.alias].cursor() as cursor:
            cursor.execute(_LAG_SQL)
            row = cursor.fetchone()
    except DatabaseError as error:
        _down(state, error)
        return
    lag = None if row is None or row[0] is None else float(row[0])
    if lag is not None and lag > float(settings.DATABASE_REPLICA_MAX_LAG_SECONDS):
        logger.info("replica %s is %.1f s behind: reads go to the primary", state.alias, lag)
    state.lag = lag


def _connection_ready(state: _Replica, checked: set[str]) -> bool:
    """Whether this thread's connection to the replica works: checked once per request
    (Django's health check, which the request's first query would run anyway), so a
    replica that stopped sends the request's reads to the primary instead of failing."""
    if state.alias in checked:
        return True
    connection = connections[state.alias]
    try:
        connection.health_check_done = False  # type: ignore[attr-defined]
        connection.close_if_health_check_failed()
        connection.ensure_connection()
    except DatabaseError as error:
        _down(state, error)
        return False
    checked.add(state.alias)
    return True


def _down(state: _Replica, error: BaseException) -> None:
    retry = float(settings.DATABASE_REPLICA_RETRY_SECONDS)
    if time.monotonic() >= state.down_until:
        logger.warning(
            "replica %s does not answer (%s): reads go to the primary for %.0f s",
            state.alias,
            str(error).strip(),
            retry,
        )
    state.down_until = time.monotonic() + retry
    state.lag = None
    with contextlib.suppress(DatabaseError):
        connections[state.alias].close()


def replicas_forget() -> None:
    """Forget every replica's lag, downtime and counts (the tests)."""
    with _states_lock:
        _states.clear()
    reads_routed.clear()


def replica_lag(alias: str) -> float | None:
    """The replica's lag as last measured (seconds), None when not known."""
    state = _states.get(alias)
    return None if state is None else state.lag


# --- read-your-writes of API keys --------------------------------------------------


def api_identity(authorization: str) -> str:
    """Who an API request is, for read-your-writes: a digest of its credentials."""
    return hashlib.sha256(authorization.encode()).hexdigest()[:32]


def api_write_remember(identity: str) -> None:
    """The API key ``identity`` wrote: it reads from the primary for the next
    DATABASE_READ_YOUR_WRITES_SECONDS."""
    window = float(settings.DATABASE_READ_YOUR_WRITES_SECONDS)
    if window <= 0:
        return
    try:
        redis_client().set(WROTE_KEY + identity, 1, px=int(window * 1000))
    except Exception as error:  # noqa: BLE001 - Redis down: its reads go to the primary
        logger.debug("read-your-writes not recorded: %s", error)


def api_wrote_recently(identity: str) -> bool:
    """Whether the API key ``identity`` wrote within the window (Redis down: assumed)."""
    if float(settings.DATABASE_READ_YOUR_WRITES_SECONDS) <= 0:
        return False
    try:
        return bool(redis_client().exists(WROTE_KEY + identity))
    except Exception:  # noqa: BLE001 - unknown: the primary is always right
        return True
