"""The async client against a live hub: the same methods as coroutines, lists as async
iterators across pages, the same errors and retries; and both clients in-process over
httpx's ASGI/WSGI transports (no socket), as the MCP server uses them."""

from __future__ import annotations

import httpx
import pytest
from django.core.asgi import get_asgi_application
from django.core.signals import request_finished
from django.core.wsgi import get_wsgi_application
from django.db import connections
from memoryhub_client import AsyncMemoryHub, AsyncPager, MemoryHub, NotFound, PermissionDenied

from memories.models import Memory as StoredMemory
from tests.clients.conftest import run

pytestmark = pytest.mark.django_db(transaction=True)


async def memories_walk(hub: AsyncMemoryHub, seen: dict[str, object]) -> None:
    added = await hub.memories.add_batch(
        [{"content": f"turn {n}", "role": "user"} for n in range(5)]
    )
    one = await hub.memories.add("I adopted a cat called Miso", role="user")
    seen["added"] = len(added)
    seen["get"] = (await hub.memories.get(one.memory.id)).content
    pager = hub.memories.list(limit=2, order="asc")
    assert isinstance(pager, AsyncPager)
    seen["pages"] = [len(page.results) async for page in pager.pages()]
    seen["listed"] = [m.content async for m in pager]
    seen["first"] = (await hub.memories.page(limit=1)).count
    seen["count"] = await hub.memories.count()
    seen["update"] = (await hub.memories.update(one.memory.id, pinned=True)).pinned
    seen["revisions"] = [r.action for r in await hub.memories.revisions(one.memory.id).collect()]
    found = await hub.search("Miso", mode="keyword")
    seen["keyword"] = [hit.memory.content for hit in found.results]
    await hub.memories.delete(one.memory.id)
    try:
        await hub.memories.get(one.memory.id)
    except NotFound as missing:
        seen["gone"] = missing.status


async def groups_walk(hub: AsyncMemoryHub, seen: dict[str, object]) -> None:
    seen["context"] = (await hub.context("cat", max_tokens=200)).total_tokens <= 200
    seen["window"] = len((await hub.buffer.window()).messages)
    item = await hub.working.add("weather: sunny")
    seen["working"] = (await hub.working.list()).results[0].id == item.id
    seen["user"] = (await hub.users.get("alice")).external_id
    seen["rooms"] = [r.external_id async for r in hub.rooms.list()]
    seen["settings"] = "search" in (await hub.settings.get()).values
    seen["synopsis"] = (await hub.users.synopsis()).user
    document = await hub.documents.upload_text("Refunds in 14 days.", source="r.txt")
    seen["document"] = (await hub.documents.get(document.id)).status
    seen["prune"] = (await hub.prune.preview()).dry_run


def test_the_async_client_covers_the_groups(async_hub_for, owner) -> None:
    async def walk() -> dict[str, object]:
        seen: dict[str, object] = {}
        async with async_hub_for(owner.raw_key, user="alice", room="chat-1") as hub:
            await memories_walk(hub, seen)
            await groups_walk(hub, seen)
        return seen

    seen = run(walk())
    assert seen["get"] == "I adopted a cat called Miso"
    assert seen["pages"] == [2, 2, 2]
    assert seen["listed"] == [f"turn {n}" for n in range(5)] + ["I adopted a cat called Miso"]
    assert (seen["first"], seen["count"], seen["update"]) == (6, 6, True)
    assert seen["revisions"] == ["update", "create"]
    assert seen["keyword"] == ["I adopted a cat called Miso"]
    assert (seen["gone"], seen["added"]) == (404, 5)
    assert seen["context"] is True and seen["window"] == 5 and seen["working"] is True
    assert (seen["user"], seen["rooms"], seen["settings"]) == ("alice", ["chat-1"], True)
    assert (seen["synopsis"], seen["document"], seen["prune"]) == ("alice", "queued", True)


class Busy(httpx.AsyncBaseTransport):
    """503 with Retry-After twice, then the live hub."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.keys: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.keys.append(request.headers["Idempotency-Key"])
        if len(self.keys) <= 2:
            return httpx.Response(503, headers={"Retry-After": "0.1"}, json={"detail": "busy"})
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_the_async_client_retries_with_one_key(live_server, owner) -> None:
    busy = Busy()

    async def add() -> bool:
        async with AsyncMemoryHub(
            live_server.url, owner.raw_key, transport=busy, backoff=0.01
        ) as hub:
            return (await hub.memories.add("hello", user="alice")).created

    assert run(add()) is True
    assert len(busy.keys) == 3 and len(set(busy.keys)) == 1
    assert StoredMemory.objects.count() == 1


def test_the_async_client_raises_the_same_errors(async_hub_for, owner) -> None:
    async def refused() -> PermissionDenied:
        async with async_hub_for(owner.raw_read_key) as hub:
            try:
                await hub.memories.add("no", user="alice")
            except PermissionDenied as error:
                return error
        raise AssertionError("a read-only key wrote")

    assert run(refused()).status == 403


def test_both_clients_run_in_process(owner) -> None:
    """No socket: the Django app called through httpx's ASGI and WSGI transports."""
    with MemoryHub(
        "http://testserver",
        owner.raw_key,
        transport=httpx.WSGITransport(app=get_wsgi_application()),
    ) as hub:
        stored = hub.memories.add("in process", user="alice").memory

    async def read() -> str:
        transport = httpx.ASGITransport(app=get_asgi_application())
        async with AsyncMemoryHub("http://testserver", owner.raw_key, transport=transport) as hub:
            return (await hub.memories.get(stored.id)).content

    # each ASGI request runs on a thread of its own, whose database session would
    # outlive the test (CONN_MAX_AGE): closed as the request ends
    request_finished.connect(connections_close)
    try:
        assert run(read()) == "in process"
    finally:
        request_finished.disconnect(connections_close)


def connections_close(**kwargs: object) -> None:
    connections.close_all()
