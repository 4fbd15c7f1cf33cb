"""The Xaibo memory protocol over a live hub (with a real worker, for search), through
its public methods only, as a Xaibo agent calls them."""

from __future__ import annotations

import uuid

import pytest
from memoryhub_client.xaibo import MemoryHubMemory, MemorySearchResult

from tests.clients.conftest import run
from tests.conftest import wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def embedded(hub, user: str) -> bool:
    return all(m.embedding_status == "done" for m in hub.memories.list(user=user))


def test_the_protocol_end_to_end(live_server, owner, hub, celery_worker_process) -> None:
    config = {"url": live_server.url, "api_key": owner.raw_key, "user": "alice", "room": "r1"}

    async def store() -> tuple[str, str, dict | None]:
        memory = MemoryHubMemory(config)
        try:
            cat = await memory.store_memory("Alice adopted a cat called Miso", {"topic": "pets"})
            trip = await memory.store_memory("Alice flies to Tokyo in March", {"topic": "travel"})
            return cat, trip, await memory.get_memory(cat)
        finally:
            await memory.aclose()

    cat, trip, got = run(store())
    assert got == {
        "id": cat,
        "content": "Alice adopted a cat called Miso",
        "attributes": {"topic": "pets"},
    }
    wait_until(lambda: embedded(hub, "alice"), timeout=60)

    async def use() -> tuple[list[MemorySearchResult], list[dict], bool, dict | None, bool]:
        memory = MemoryHubMemory(config)
        try:
            found = await memory.search_memory("which pet does she have?", k=2)
            listed = await memory.list_memories()
            updated = await memory.update_memory(cat, "Alice adopted two cats", {"count": 2})
            after = await memory.get_memory(cat)
            deleted = await memory.delete_memory(trip)
            return found, listed, updated, after, deleted
        finally:
            await memory.aclose()

    found, listed, updated, after, deleted = run(use())
    assert isinstance(found[0], MemorySearchResult) and found[0].memory_id == cat
    assert found[0].content == "Alice adopted a cat called Miso"
    assert all(0.0 <= hit.similarity_score <= 1.0 for hit in found)
    assert found[0].similarity_score > found[-1].similarity_score
    assert found[0].attributes == {"topic": "pets"}
    assert {entry["id"] for entry in listed} == {cat, trip}
    assert updated is True
    assert after == {
        "id": cat,
        "content": "Alice adopted two cats",
        "attributes": {"topic": "pets", "count": 2},
    }  # merged, as Xaibo does
    assert deleted is True
    assert hub.memories.count(user="alice") == 1
    stored = hub.memories.get(cat)
    assert (stored.kind, stored.user, stored.room) == ("fact", "alice", "r1")


def test_missing_ids_read_as_missing(live_server, owner, hub) -> None:
    other = hub.memories.add("Bob's note", user="bob", kind="fact").memory.id

    async def probe() -> list[object]:
        memory = MemoryHubMemory(url_config(live_server, owner))
        try:
            return [
                await memory.get_memory(str(uuid.uuid4())),
                await memory.get_memory("not-an-id"),
                await memory.get_memory(other),  # another user's: not this module's
                await memory.delete_memory(str(uuid.uuid4())),
                await memory.update_memory(other, "changed"),
                await memory.delete_memory(other),
            ]
        finally:
            await memory.aclose()

    assert run(probe()) == [None, None, None, False, False, False]
    assert hub.memories.get(other).content == "Bob's note"


def url_config(live_server, owner) -> dict:
    return {"url": live_server.url, "api_key": owner.raw_key, "user": "alice"}
