"""Outages: while PostgreSQL is unreachable every API endpoint answers a JSON 503 with
Retry-After (the dashboard and admin a readable page), and the process recovers by
itself when it is back; while Redis is unreachable writes still succeed and nothing
answers a 5xx other than a 503 with Retry-After.

Requests go through Django's real WSGI handler (not the test client, which turns off
the closing of broken connections between requests), with the database connection
pointed at a closed port for the outage, or its server-side session killed."""

from __future__ import annotations

import io
import json
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from django.test import Client, override_settings
from django.urls import Resolver404, resolve

from memories.models import Memory

pytestmark = pytest.mark.django_db(transaction=True)
HANDLER = WSGIHandler()
MEMORY_ID = "5b0e8c1a-7d2f-4e3a-9c4b-1a2b3c4d5e6f"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def call(method: str, url: str, body: Any = None, *, key: str = "", cookie: str = "") -> Reply:
    """One request through the WSGI handler, as gunicorn would make it."""
    parts = urlsplit(url)
    data = json.dumps(body).encode() if body is not None else b""
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": parts.path,
        "QUERY_STRING": parts.query,
        "SCRIPT_NAME": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(data),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "CONTENT_LENGTH": str(len(data)),
        "CONTENT_TYPE": "application/json" if data else "",
    }
    if key:
        environ["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    if cookie:
        environ["HTTP_COOKIE"] = cookie
    started: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        started["status"], started["headers"] = int(status.split()[0]), dict(headers)

    response = HANDLER(environ, start_response)
    try:
        content = b"".join(response)
    finally:
        getattr(response, "close", lambda: None)()
    return Reply(started["status"], started["headers"], content)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def database_unreachable() -> Iterator[None]:
    """This process's connection settings point at a port where nothing listens (as a
    stopped server looks), then back; the connection is closed at both ends."""
    saved = {name: connection.settings_dict[name] for name in ("HOST", "PORT")}
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(_closed_port()))
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.update(saved)


DEAD_REDIS = "unix:///nonexistent/memoryhub-test/redis.sock"


@contextmanager
def redis_unreachable() -> Iterator[None]:
    caches = {"default": {**settings.CACHES["default"], "LOCATION": DEAD_REDIS}}
    with override_settings(REDIS_URL=DEAD_REDIS, CACHES=caches):
        yield


def _routed(path: str) -> bool:
    try:
        resolve(urlsplit(path).path)
    except Resolver404:
        return False
    return True


API_REQUESTS = [
    ("GET", "/api/v1/memories/?user=alice", None),
    ("POST", "/api/v1/memories/", {"user": "alice", "content": "written in the outage"}),
    ("POST", "/api/v1/memories/batch/", {"memories": [{"user": "alice", "content": "b"}]}),
    ("GET", f"/api/v1/memories/{MEMORY_ID}/", None),
    ("PATCH", f"/api/v1/memories/{MEMORY_ID}/", {"content": "changed"}),
    ("DELETE", f"/api/v1/memories/{MEMORY_ID}/", None),
    ("GET", "/api/v1/memories/count/", None),
    ("POST", "/api/v1/search/", {"query": "cat", "mode": "keyword"}),
    ("POST", "/api/v1/context/", {"user": "alice", "query": "cat"}),
    ("GET", "/api/v1/users/alice/", None),
    ("POST", "/api/v1/users/", {"external_id": "bob"}),
    ("GET", "/api/v1/rooms/chat-1/buffer/", None),
    ("POST", "/api/v1/rooms/chat-1/working/", {"content": "a note"}),
    ("GET", "/api/v1/users/alice/synopsis/", None),
    ("GET", "/api/v1/settings/", None),
    ("POST", "/api/v1/prune/", {"dry_run": True}),
    ("GET", "/api/v1/documents/", None),
]


@pytest.fixture
def world(owner):
    owner.project.settings = {"limits": {"reads_per_minute": 0, "writes_per_minute": 0}}
    owner.project.save(update_fields=["settings"])
    reply = call(
        "POST",
        "/api/v1/memories/",
        {"id": MEMORY_ID, "user": "alice", "room": "chat-1", "content": "I have a cat"},
        key=owner.raw_key,
    )
    assert reply.status == 201, reply.body
    return owner


def test_database_down_every_api_endpoint_answers_json_503_then_recovers(world):
    requests = [r for r in API_REQUESTS if _routed(r[1])]
    with database_unreachable():
        replies = [call(method, url, body, key=world.raw_key) for method, url, body in requests]

    for (method, url, _), reply in zip(requests, replies, strict=True):
        assert reply.status == 503, (method, url, reply.body[:300])
        assert reply.headers["Content-Type"] == "application/json", (method, url)
        assert reply.headers["Retry-After"] == str(settings.MEMORYHUB["RETRY_AFTER_SECONDS"])
        assert reply.json()["service"] == "database"
        assert "unavailable" in reply.json()["detail"]

    # back: the same process answers again, nobody restarted anything
    assert call("GET", "/api/v1/memories/?user=alice", key=world.raw_key).status == 200
    written = call(
        "POST", "/api/v1/memories/", {"user": "alice", "content": "after"}, key=world.raw_key
    )
    assert written.status == 201, written.body
    assert Memory.objects.filter(content="written in the outage").count() == 0


def test_database_down_the_console_and_admin_answer_a_readable_503_page(world):
    operator = get_user_model().objects.create_superuser("op", "op@example.com", "pw-12345678")
    client = Client()
    client.force_login(operator)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    assert call("GET", "/dashboard/", cookie=cookie).status == 200

    with database_unreachable():
        pages = [call("GET", path, cookie=cookie) for path in ("/dashboard/", "/admin/")]
        health = call("GET", "/health/")
        ready = call("GET", "/ready/")

    for page in pages:
        assert page.status == 503
        assert page.headers["Content-Type"].startswith("text/html")
        assert int(page.headers["Retry-After"]) > 0
        assert b"MemoryHub is unavailable" in page.body
        assert b"The database (PostgreSQL) is unavailable" in page.body
    assert health.status == 200  # the process itself is alive
    assert ready.status == 503 and ready.json()["checks"]["database"]["ok"] is False
    assert call("GET", "/admin/", cookie=cookie).status == 200


def test_a_connection_the_server_dropped_is_replaced_before_the_next_request(world):
    """PostgreSQL restarted (or a proxy cut the connection) while this process kept a
    connection open: the next request reconnects instead of failing."""
    assert call("GET", "/api/v1/memories/", key=world.raw_key).status == 200
    pid = connection.connection.info.backend_pid
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])

    reply = call("GET", "/api/v1/memories/", key=world.raw_key)

    assert reply.status == 200, reply.body[:300]
    assert connection.connection.info.backend_pid != pid


def test_redis_down_writes_succeed_and_nothing_answers_500(world):
    world.project.settings = {}  # the default rate limits: the throttle must fail open
    world.project.save(update_fields=["settings"])
    requests = [r for r in API_REQUESTS if _routed(r[1]) and r[0] != "DELETE"]
    requests.append(("POST", "/api/v1/prune/", {"dry_run": False}))
    with redis_unreachable():
        replies = {(m, u): call(m, u, b, key=world.raw_key) for m, u, b in requests}

    for (method, url), reply in replies.items():
        assert reply.status < 500 or reply.status == 503, (method, url, reply.body[:300])
        if reply.status == 503:
            assert int(reply.headers["Retry-After"]) > 0, (method, url)
            assert reply.headers["Content-Type"] == "application/json"
    writes = {key: reply.status for key, reply in replies.items() if key[0] != "GET"}
    for request in (
        ("POST", "/api/v1/memories/"),
        ("POST", "/api/v1/memories/batch/"),
        ("PATCH", f"/api/v1/memories/{MEMORY_ID}/"),
        ("POST", "/api/v1/users/"),
    ):
        assert writes[request] in (200, 201), (request, replies[request].body[:300])
    assert Memory.objects.filter(content="written in the outage").count() == 1
    # reads that need no Redis are served
    assert replies[("GET", "/api/v1/memories/?user=alice")].status == 200
    assert replies[("POST", "/api/v1/search/")].status == 200
    # working memory lives in Redis: a 503 that says to retry
    assert replies[("POST", "/api/v1/rooms/chat-1/working/")].status == 503
