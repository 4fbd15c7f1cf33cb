"""MCP over streamable HTTP at ``/mcp/``: the tool set of ``memoryhub_client.mcp_server``
served by the hub itself, so an MCP host needs only a URL and an API key.

Nothing here decides who may do what. The view admits a request the way the API does
(``Authorization: Bearer <key>``: no key or a wrong one is a 401, the key's read rate
limit applies, the hub's body and JSON-depth limits have already run in the
middleware); then each tool call is a request to the hub's own API, made in-process
(``httpx.ASGITransport`` over Django's ASGI handler) with the caller's bearer token. So
a tool sees only the key's project, a read-only key's ``remember`` is the API's 403,
and every call is throttled and limited like any other API call.

Why a DRF view bridged with ``async_to_sync`` rather than an ASGI mount: the hub is
served by a WSGI server, and a sync view lets the in-process API calls run their sync
views on this request's own thread (asgiref's thread-sensitive mode), so concurrent MCP
requests stay concurrent and share nothing. MCP's stateless mode with JSON answers
(no session, no SSE stream) fits a request/response view: each request runs a fresh
session manager over the one server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from functools import cache
from typing import Any, cast

import httpx
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponse
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from memoryhub_client import AsyncMemoryHub
from memoryhub_client.mcp_server import server_build
from rest_framework.request import Request
from rest_framework.views import APIView

__all__ = ["McpView", "caller_hub", "mcp_view"]

# the defaults of user and room when a tool call leaves them out: an MCP host sets them
# once in its server config, as MEMORYHUB_USER / MEMORYHUB_ROOM do for stdio
USER_HEADER = "x-memoryhub-user"
ROOM_HEADER = "x-memoryhub-room"
# hop-by-hop or recomputed headers not passed from the SDK's answer to Django's
SKIPPED_HEADERS = {"content-length", "connection", "transfer-encoding"}


@cache
def hub_application() -> ASGIHandler:
    """The hub as an ASGI app, for the tools' in-process API calls (made once, on
    first use: its middleware loads after Django's setup)."""
    return ASGIHandler()


@asynccontextmanager
async def caller_hub(ctx: Context) -> AsyncIterator[AsyncMemoryHub]:
    """A client of this hub with the MCP request's own bearer token, calling the API
    in-process. No retries: a 429 is the tool's answer at once, not a held request."""
    headers = ctx.headers or {}
    authorization = headers.get("authorization", "")
    scheme, _, token = authorization.partition(" ")
    host = headers.get("host") or "localhost"
    hub = AsyncMemoryHub(
        f"http://{host}",
        token.strip() if scheme.lower() == "bearer" else "",
        retries=0,
        user=headers.get(USER_HEADER) or None,
        room=headers.get(ROOM_HEADER) or None,
        # Django's and httpx's hints of the ASGI callables differ (dict vs MutableMapping)
        transport=httpx.ASGITransport(app=cast(Any, hub_application())),
    )
    async with hub:
        yield hub


SERVER: MCPServer[Any] = server_build(caller_hub)


def asgi_scope(request: HttpRequest) -> dict[str, Any]:
    """The ASGI scope of ``request``, for the SDK's ASGI transport."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in request.headers.items()
        ],
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
        "server": None,
    }


async def mcp_answer(
    scope: dict[str, Any], body: bytes
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One MCP HTTP exchange: the SDK's stateless transport answers ``body``; its status,
    headers and body, collected."""
    manager = StreamableHTTPSessionManager(
        # the low-level server the MCPServer wraps: the SDK's mounting guide builds a
        # manager over it too (MCPServer keeps its own only for its Starlette app)
        app=SERVER._lowlevel_server,
        json_response=True,
        stateless=True,
        max_request_body_size=int(settings.MEMORYHUB["MAX_BODY_BYTES"]),
    )
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    answer: dict[str, Any] = {"status": 500, "headers": [], "body": b""}

    async def receive() -> MutableMapping[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = [
                (name.decode("latin-1"), value.decode("latin-1"))
                for name, value in message.get("headers", [])
            ]
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return answer["status"], answer["headers"], answer["body"]


class McpView(APIView):
    """``/mcp/``: MCP's streamable HTTP (stateless, JSON answers), for an API key.

    Authenticated, permitted and throttled as an API read (``read_only_post``: a
    read-only key may connect; what it may not do, its tool calls are refused by the
    API). CSRF does not apply: no cookie authenticates here.
    """

    read_only_post = True
    schema = None  # not a REST endpoint: out of the OpenAPI schema (the clients are built on it)

    def post(self, request: Request) -> HttpResponse:
        return self._answer(request)

    def get(self, request: Request) -> HttpResponse:
        return self._answer(request)  # the SDK answers 405: no SSE stream when stateless

    def delete(self, request: Request) -> HttpResponse:
        return self._answer(request)

    def _answer(self, request: Request) -> HttpResponse:
        django_request: HttpRequest = request._request
        status, headers, body = async_to_sync(mcp_answer)(
            asgi_scope(django_request), django_request.body
        )
        response = HttpResponse(body, status=status)
        for name, value in headers:
            if name.lower() not in SKIPPED_HEADERS:
                response[name] = value
        return response


mcp_view = McpView.as_view()
