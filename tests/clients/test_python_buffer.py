"""The MUXI-style buffer memory over a room of a live hub (a real worker embeds the
turns), sync and async, through its public methods."""

from __future__ import annotations

import pytest
from memoryhub_client import AsyncMemoryHub, MemoryHub
from memoryhub_client.buffer import AsyncBufferMemory, BufferMemory

from tests.clients.conftest import run
from tests.conftest import wait_until

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TURNS = [
    ("I adopted a cat called Miso", "user"),
    ("What a lovely name!", "assistant"),
    ("We booked flights to Tokyo for March", "user"),
    ("Tokyo in spring is beautiful", "assistant"),
    ("Dinner tonight is pasta with pesto", "user"),
]


def embedded(hub: MemoryHub, room: str) -> bool:
    return all(m.embedding_status == "done" for m in hub.memories.list(room=room))


def test_the_buffer_adds_searches_windows_and_clears(hub: MemoryHub, celery_worker_process) -> None:
    hub.rooms.create("chat-1")
    hub.rooms.update("chat-1", settings={"buffer": {"max_size": 3}})
    buffer = BufferMemory(hub.scoped(user="alice", room="chat-1"))
    ids = [buffer.add(text, {"role": role, "turn": n}) for n, (text, role) in enumerate(TURNS)]
    assert hub.memories.get(ids[0]).role == "user"  # the metadata's role is the turn's
    wait_until(lambda: embedded(hub, "chat-1"), timeout=60)
    found = buffer.search("my pet", limit=2, recency_bias=0.0)
    assert found[0]["text"] == "I adopted a cat called Miso" and found[0]["id"] == ids[0]
    assert found[0]["metadata"] == {"role": "user", "turn": 0}
    assert found[0]["score"] >= found[1]["score"] and found[0]["semantic"] is not None
    recent_bias = buffer.search("my pet", limit=1, recency_bias=1.0)
    assert recent_bias[0]["text"] == TURNS[-1][0]  # recency alone: the newest
    users = buffer.search("travel", limit=5, filter_metadata={"role": "assistant"})
    assert {entry["text"] for entry in users} == {TURNS[1][0], TURNS[3][0]}
    # the window is the last max_size turns; newest first as MUXI's recency search
    assert [e["text"] for e in buffer.get_recent_items(limit=2)] == [TURNS[4][0], TURNS[3][0]]
    assistant = buffer.get_recent_items(filter_metadata={"role": "assistant"})
    assert [e["text"] for e in assistant] == [TURNS[3][0]]
    assert [e["text"] for e in buffer.get_recent(4)] == [t for t, _ in TURNS[1:]]
    stats = buffer.get_stats()
    assert (stats["buffer_length"], stats["buffer_capacity"], stats["context_window_size"]) == (
        5,
        30,
        3,
    )
    assert [m.content for m in buffer.window().messages] == [t for t, _ in TURNS[2:]]
    assert buffer.clear() == 5
    assert buffer.get_recent_items() == [] and hub.memories.count(room="chat-1") == 0


def test_the_async_buffer_has_the_same_surface(live_server, owner, celery_worker_process) -> None:
    async def use() -> tuple[list, list, list, int]:
        async with AsyncMemoryHub(live_server.url, owner.raw_key, user="bob", room="chat-2") as hub:
            buffer = AsyncBufferMemory(hub)
            for text, role in TURNS:
                await buffer.add(text, {"role": role})
            recent = await buffer.get_recent(2)
            items = await buffer.get_recent_items(limit=1)
            found = await buffer.search("flights", limit=1, recency_bias=0.0)
            return recent, items, found, await buffer.clear()

    recent, items, found, cleared = run(use())
    assert [e["text"] for e in recent] == [TURNS[3][0], TURNS[4][0]]
    assert [e["text"] for e in items] == [TURNS[4][0]]
    assert len(found) == 1 and cleared == 5


def test_a_buffer_needs_a_room(hub: MemoryHub) -> None:
    with pytest.raises(ValueError, match="needs a room"):
        BufferMemory(hub)
