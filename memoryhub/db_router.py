"""The read path on read replicas: a database router and the middleware that marks a
request as one whose reads a replica may serve.

Only requests marked here read from a replica, and only while nothing makes the
primary necessary: GET/HEAD/OPTIONS requests of the API and the console (not the
admin, the health probes or MCP, whose POSTs write), and the POSTs that only read
(``/api/v1/search/``, ``/api/v1/context/``, a room's buffer and working-memory
searches). Everything else keeps the primary: every write (``db_for_write`` is always
"default"), every read inside a transaction (``transaction.atomic``, so
``select_for_update`` too), every read of a request after it wrote, Celery tasks, the
embedding worker, management commands and migrations (nothing marks them).

Read-your-writes across requests: a request that may write (any other method) marks
its author when it ends, before its response leaves: an API key in Redis, a console
browser by a signed cookie (memoryhub/replicas.py says why), both for
DATABASE_READ_YOUR_WRITES_SECONDS, during which the author's reads go to the primary.

The search's statements are raw SQL on ``connection`` (memories/services/search/): a
search runs with its thread's default connection pointed at the replica the router
chose (memories/providers/read_database.py). Installed by settings.py only when
DATABASE_REPLICA_URLS names a replica: without one, nothing here runs.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.http import HttpRequest, HttpResponse

from memoryhub import replicas

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# never on a replica: the admin's pages, the probes (they check the primary), MCP
PRIMARY_ONLY_PREFIXES = ("/admin/", "/health/", "/ready/", "/mcp/", "/static/")
READ_ONLY_POSTS = frozenset({"/api/v1/search/", "/api/v1/context/"})
ROOMS_PREFIX = "/api/v1/rooms/"  # + <id>/buffer/search/ or <id>/working/search/
WROTE_COOKIE = "memoryhub_wrote"
# bookkeeping a read makes that it does not read back: an API key's last use (once a
# minute), which would otherwise send the rest of that request to the primary
NOT_READ_BACK = frozenset({"memories.apikey"})


@dataclass
class ReadPath:
    """The request being served, when its reads may go to a replica."""

    api_identity: str | None  # a digest of its API credentials, None in a browser
    browser_wrote: bool  # its browser's cookie says it wrote within the window
    api_wrote: bool | None = None  # asked of Redis at the first read that could use a replica
    wrote: bool = False  # this request wrote: its next reads need the primary
    # where its reads go, chosen at its first read: one replica for the whole request
    # (the same snapshot, from one server), and a choice made once, not per query
    database: str | None = None
    checked: set[str] = field(default_factory=set)  # replicas whose connection answered

    def may_use_replica(self) -> bool:
        if self.wrote or self.browser_wrote:
            return False
        if self.api_identity is None:
            return True
        if self.api_wrote is None:
            self.api_wrote = replicas.api_wrote_recently(self.api_identity)
        return not self.api_wrote


_read_path: ContextVar[ReadPath | None] = ContextVar("memoryhub_read_path", default=None)


class ReplicaRouter:
    """Reads of a marked request to a replica that answers and is not late; the rest
    to the primary. Consulted at every query: after a request's first read it costs a
    context variable and two attributes."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str:
        path = _read_path.get()
        if path is None or path.wrote:
            return DEFAULT_DB_ALIAS
        if path.database is None:
            chosen = replicas.replica_choose(path.checked) if path.may_use_replica() else None
            path.database = chosen or DEFAULT_DB_ALIAS
        if path.database != DEFAULT_DB_ALIAS and connections[DEFAULT_DB_ALIAS].in_atomic_block:
            return DEFAULT_DB_ALIAS
        return path.database

    def db_for_write(self, model: type[Any], **hints: Any) -> str:
        path = _read_path.get()
        if path is not None and model._meta.label_lower not in NOT_READ_BACK:
            path.wrote = True
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # the same rows on every server

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db.startswith(replicas.ALIAS_PREFIX) else None


def read_path_of(request: HttpRequest) -> bool:
    """Whether the request only reads (by its method and path)."""
    path = request.path_info
    if request.method in SAFE_METHODS:
        return not path.startswith(PRIMARY_ONLY_PREFIXES)
    if request.method != "POST":
        return False
    if path in READ_ONLY_POSTS:
        return True
    return path.startswith(ROOMS_PREFIX) and path.endswith(("/buffer/search/", "/working/search/"))


class ReadPathMiddleware:
    """Marks the read path for the router; remembers who wrote (read-your-writes)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not settings.DATABASE_REPLICAS:
            return self.get_response(request)
        authorization = request.META.get("HTTP_AUTHORIZATION", "")
        identity = replicas.api_identity(authorization) if authorization else None
        if not read_path_of(request):
            response = self.get_response(request)
            if request.method not in SAFE_METHODS:
                _write_remember(request, response, identity)
            return response
        path = ReadPath(identity, browser_wrote=identity is None and _browser_wrote(request))
        token = _read_path.set(path)
        try:
            return self.get_response(request)
        finally:
            _read_path.reset(token)


def _browser_wrote(request: HttpRequest) -> bool:
    if WROTE_COOKIE not in request.COOKIES:
        return False
    window = timedelta(seconds=float(settings.DATABASE_READ_YOUR_WRITES_SECONDS))
    value = request.get_signed_cookie(WROTE_COOKIE, None, salt=WROTE_COOKIE, max_age=window)
    return value is not None


def _write_remember(request: HttpRequest, response: HttpResponse, identity: str | None) -> None:
    window = float(settings.DATABASE_READ_YOUR_WRITES_SECONDS)
    if window <= 0:
        return
    if identity is not None:
        replicas.api_write_remember(identity)
        return
    response.set_signed_cookie(
        WROTE_COOKIE,
        "1",
        salt=WROTE_COOKIE,
        max_age=max(1, round(window)),
        secure=request.is_secure(),
        httponly=True,
        samesite="Lax",
    )
