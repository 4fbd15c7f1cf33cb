"""Read replicas against a real streaming replica (tests/memoryhub/replica_fixtures.py):
the read path's reads land on it, a key that just wrote reads its write back from the
primary, a stopped replica and a late one send reads to the primary with no error;
writes, transactions and everything outside the read path stay on the primary."""

from __future__ import annotations

import time
import uuid

import pytest
from django.db import DEFAULT_DB_ALIAS, transaction
from django.http import HttpResponse
from django.test import RequestFactory

from memories.models import Memory
from memoryhub import db_router, replicas
from memoryhub.embedded_standby import Standby
from tests.memoryhub import replica_fixtures
from tests.memoryhub.replica_fixtures import (
    ALIAS,
    caught_up,
    on_replica,
    primary_socket,
    query,
    statements_logged,
)

# the fixtures of replica_fixtures.py, for this module's tests
standby = replica_fixtures.standby
replica_database = replica_fixtures.replica_database
replica = replica_fixtures.replica

MEMORIES = "/api/v1/memories/"
SEARCH = "/api/v1/search/"


def remember(tenant, content: str) -> None:
    response = tenant.client.post(MEMORIES, {"user": "alice", "content": content})
    assert response.status_code == 201, response.content


def found(client, word: str) -> list[str]:
    """Contents a keyword search for ``word`` finds (a search read, as agents make it)."""
    response = client.post(SEARCH, {"query": word, "user": "alice", "mode": "keyword"})
    assert response.status_code == 200, response.content
    return [hit["memory"]["content"] for hit in response.json()["results"]]


def listed(client) -> list[str]:
    response = client.get(MEMORIES, {"user": "alice"})
    assert response.status_code == 200, response.content
    return [memory["content"] for memory in response.json()["results"]]


def routed() -> int:
    return replicas.reads_routed.get(ALIAS, 0)


def replay_pause(server: Standby) -> None:
    query(server.socket_dir, "SELECT pg_wal_replay_pause()")


@on_replica
def test_the_read_path_reads_from_the_replica(replica: Standby, owner) -> None:
    remember(owner, "The zebra called Quill eats kiwis")
    caught_up(replica)
    # searches of another key (the writer's own would read its write from the primary)
    nonces = [f"nonce{uuid.uuid4().hex[:12]}" for _ in range(5)]
    for nonce in nonces:
        assert found(owner.read_client, f"Quill {nonce}") == ["The zebra called Quill eats kiwis"]
    # each search's statements reached the standby: its log holds each query's words
    time.sleep(0.3)  # the log is written by the server, not by our request
    assert [statements_logged(replica, nonce) > 0 for nonce in nonces] == [True] * 5
    before = routed()
    assert listed(owner.read_client) == ["The zebra called Quill eats kiwis"]
    assert routed() > before  # the list's ORM reads were routed to it too


@on_replica
def test_a_key_that_wrote_reads_its_write_from_the_primary(replica: Standby, owner) -> None:
    replay_pause(replica)  # the standby keeps what it has: the write below never reaches it
    remember(owner, "The heron called Pike fishes at dawn")
    # the writer, within DATABASE_READ_YOUR_WRITES_SECONDS: from the primary
    assert found(owner.client, "Pike") == ["The heron called Pike fishes at dawn"]
    assert listed(owner.client) == ["The heron called Pike fishes at dawn"]
    # another key reads the replica, which has not replayed the write
    before = routed()
    assert found(owner.read_client, "Pike") == []
    assert routed() > before


@on_replica
def test_a_console_browser_that_wrote_reads_from_the_primary(replica: Standby) -> None:
    factory = RequestFactory()
    seen: list[db_router.ReadPath | None] = []

    def view(request):  # type: ignore[no-untyped-def]
        seen.append(db_router._read_path.get())
        return HttpResponse()

    middleware = db_router.ReadPathMiddleware(view)
    wrote = middleware(factory.post("/dashboard/p/1/users/1/forget/"))
    assert seen == [None]  # a change is not on the read path
    cookie = wrote.cookies[db_router.WROTE_COOKIE].value
    middleware(factory.get("/dashboard/p/1/", HTTP_COOKIE=f"{db_router.WROTE_COOKIE}={cookie}"))
    middleware(factory.get("/dashboard/p/1/"))
    browser_wrote = [path is not None and path.browser_wrote for path in seen[1:]]
    assert browser_wrote == [True, False]
    assert seen[1] is not None and not seen[1].may_use_replica()


@on_replica
def test_a_stopped_replica_sends_reads_to_the_primary(replica: Standby, owner) -> None:
    remember(owner, "The otter called Moss floats on its back")
    caught_up(replica)
    assert found(owner.read_client, "Moss") == ["The otter called Moss floats on its back"]
    replica.stop("fast")
    before = routed()
    for _ in range(3):  # no error: the first read finds it down, the next ones skip it
        assert found(owner.read_client, "Moss") == ["The otter called Moss floats on its back"]
        assert listed(owner.read_client) == ["The otter called Moss floats on its back"]
    assert routed() == before


@on_replica
def test_a_late_replica_is_skipped(replica: Standby, owner, settings) -> None:
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 1.0
    replay_pause(replica)
    remember(owner, "The badger called Fern digs at night")
    time.sleep(1.2 + replicas.LAG_CHECK_SECONDS)  # older than the bound, and asked again
    before = routed()
    assert found(owner.read_client, "Fern") == ["The badger called Fern digs at night"]
    assert routed() == before
    assert (replicas.replica_lag(ALIAS) or 0) > 1.0
    query(replica.socket_dir, "SELECT pg_wal_replay_resume()")
    caught_up(replica)
    time.sleep(replicas.LAG_CHECK_SECONDS)
    assert found(owner.read_client, "Fern") == ["The badger called Fern digs at night"]
    assert routed() > before  # caught up: used again


@on_replica
def test_writes_and_transactions_stay_on_the_primary(replica: Standby, owner) -> None:
    router = db_router.ReplicaRouter()
    token = db_router._read_path.set(db_router.ReadPath(None, browser_wrote=False))
    try:
        assert router.db_for_read(Memory) == ALIAS
        with transaction.atomic():  # select_for_update needs one: the primary
            assert router.db_for_read(Memory) == DEFAULT_DB_ALIAS
            list(Memory.objects.select_for_update().filter(project=owner.project))
        assert router.db_for_write(Memory) == DEFAULT_DB_ALIAS
        assert router.db_for_read(Memory) == DEFAULT_DB_ALIAS  # this request wrote
    finally:
        db_router._read_path.reset(token)
    assert router.db_for_read(Memory) == DEFAULT_DB_ALIAS  # not the read path (a task)
    assert router.allow_migrate(ALIAS, "memories") is False


@pytest.mark.parametrize(
    ("method", "path", "read"),
    [
        ("GET", "/api/v1/memories/", True),
        ("POST", "/api/v1/search/", True),
        ("POST", "/api/v1/context/", True),
        ("POST", "/api/v1/rooms/r1/buffer/search/", True),
        ("GET", "/dashboard/p/1/users/", True),
        ("POST", "/api/v1/memories/", False),
        ("POST", "/api/v1/prune/", False),
        ("POST", "/mcp/", False),
        ("GET", "/ready/", False),
        ("GET", "/admin/", False),
    ],
)
def test_what_the_read_path_is(method: str, path: str, read: bool) -> None:
    request = RequestFactory().generic(method, path)
    assert db_router.read_path_of(request) is read


def test_without_replicas_nothing_is_installed() -> None:
    from django.conf import settings

    assert settings.DATABASE_REPLICAS == []
    assert settings.DATABASE_ROUTERS == []
    assert "memoryhub.db_router.ReadPathMiddleware" not in settings.MIDDLEWARE
    assert primary_socket()  # the tests' primary is the embedded server
