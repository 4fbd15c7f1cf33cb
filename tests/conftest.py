"""Test fixtures: the real embedded PostgreSQL + pgvector and Redis (under var/test/),
two projects and an outsider, API clients per key, and a real Celery worker process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from rest_framework.test import APIClient

from memories.models import Project
from memories.services.projects import api_key_create
from memoryhub import embedded

BASE_DIR = Path(settings.BASE_DIR)


@pytest.fixture(scope="session", autouse=True)
def redis_server() -> Iterator[embedded.EmbeddedRedis | None]:
    """The test session's own PostgreSQL and Redis under var/test/ (the settings
    already point at the Redis socket; the database settings are filled in here)."""
    server = embedded.services_start(redis=True)
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.flushall()
    yield server
    if server is not None:
        server.stop()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(redis_server: embedded.EmbeddedRedis | None) -> None:
    """pytest-django creates the test database after this: on the started server."""


@pytest.fixture(autouse=True)
def vector_lanes_closed() -> Iterator[None]:
    """A search's threads and its vector lane keep their connections open between searches:
    closed after each test, or the test database could not be flushed or dropped. The
    binary codes a search loaded into the process, and the mean lengths and the
    embedding space it kept, are forgotten too (the next test's database is another)."""
    yield
    from memories.services.embedding import embedding_pauses_forget
    from memories.services.search.codes import codes_clear
    from memories.services.search.keyword import mean_lengths_clear
    from memories.services.search.lane import vector_lanes_close
    from memories.services.search.query_embedding import query_spaces_forget
    from memories.services.search.slots import search_threads_close

    vector_lanes_close()
    search_threads_close()
    codes_clear()
    mean_lengths_clear()
    query_spaces_forget()
    embedding_pauses_forget()


@pytest.fixture(autouse=True)
def task_sending_unpaused() -> Iterator[None]:
    """A test that made Redis or the broker fail pauses the process's Redis client and
    task sends (redis_client.py): the next test uses them again."""
    yield
    from memories.providers import redis_client

    redis_client._paused_until = 0.0


@pytest.fixture
def redis_client(redis_server: embedded.EmbeddedRedis) -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


@pytest.fixture
def queues_empty(redis_client: redis.Redis) -> None:
    """The declared queues start empty: a task an earlier test sent with no worker to
    take it would otherwise wait there and age (and the health report says so)."""
    priorities = [
        f"{queue.name}\x06\x16{step}" for queue in settings.CELERY_TASK_QUEUES for step in range(10)
    ]
    redis_client.delete(*[queue.name for queue in settings.CELERY_TASK_QUEUES], *priorities)


class Tenant:
    """A project with a read-write and a read-only key, and API clients for both."""

    def __init__(self, name: str) -> None:
        self.project = Project.objects.create(name=name)
        self.key, self.raw_key = api_key_create(project=self.project, name="rw")
        self.read_key, self.raw_read_key = api_key_create(project=self.project, read_only=True)
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.raw_key}")
        self.read_client = APIClient()
        self.read_client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.raw_read_key}")


@pytest.fixture
def owner(db: None) -> Tenant:
    return Tenant("owner")


@pytest.fixture
def outsider(db: None) -> Tenant:
    """Another project: none of the owner's objects may be visible to it."""
    return Tenant("outsider")


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


def _database_url() -> str:
    db = settings.DATABASES["default"]
    host = quote(db["HOST"], safe="") if db["HOST"].startswith("/") else db["HOST"]
    port = f":{db['PORT']}" if db.get("PORT") else ""
    password = f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{host}{port}/{db['NAME']}"


@pytest.fixture(scope="session")
def celery_worker_process(
    django_db_setup: None, django_db_blocker: object, redis_server: embedded.EmbeddedRedis | None
) -> Iterator[subprocess.Popen[bytes]]:
    """A real `celery worker` process on the test database and the test Redis."""
    hostname = f"test-{uuid.uuid4().hex[:8]}@%h"
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "EMBEDDING_BACKFILL_INTERVAL": "2",
    }
    log_path = Path(settings.DATA_DIR) / "test-worker.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "memoryhub", "worker", "--concurrency", "1",
             "--loglevel", "INFO", "--hostname", hostname, "--without-mingle", "--without-gossip"],
            env=env, cwd=BASE_DIR, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    client = redis.Redis.from_url(settings.REDIS_URL)
    deadline = time.monotonic() + 90
    while not any(client.scan_iter("memoryhub:worker:test-*")):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the Celery worker did not start:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.2)
    yield process
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.1):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def embed_pending() -> int:
    """Embed every pending memory here and now, as a worker would (the configured model)."""
    from memories.services.embedding import embedding_run

    return embedding_run()


def vector_search_plans(run):  # type: ignore[no-untyped-def]
    """Call ``run()`` and EXPLAIN every nearest-neighbour query it sent, exactly as sent
    (with the SET LOCAL settings before it); returns (run's result, [plan text])."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        result = run()
    plans, session = [], []
    for query in captured.captured_queries:
        sql = query["sql"]
        if sql.startswith("SET LOCAL"):
            session.append(sql)
        elif "memories_embedding" in sql and "ORDER BY distance" in sql:
            with transaction.atomic(), connection.cursor() as cursor:
                for statement in session:
                    cursor.execute(statement)
                cursor.execute(f"EXPLAIN {sql}")
                plans.append("\n".join(row[0] for row in cursor.fetchall()))
            session = []
    return result, plans


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests with the real Celery worker run last: once started, the worker stays for the
    session and claims rows that other transactional tests write, and its locks
    deadlock the TRUNCATE that ends each of those tests."""
    items.sort(key=lambda item: item.get_closest_marker("worker") is not None)
