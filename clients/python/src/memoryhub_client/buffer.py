"""MUXI's ``BufferMemory`` surface backed by a room of the hub: ``add``, ``search``,
``get_recent_items``, ``clear``, ``get_stats``, plus ``get_recent`` and ``window``.

The hub keeps the buffer (a window of ``max_size`` turns and a capacity of ``max_size
x buffer_multiplier``, the room's settings), embeds it with its workers and summarizes
what overflows, so agents in several processes share one buffer. As in MUXI
(muxi-ai/muxi, ``BufferMemory``): ``add(text, metadata)``, ``search(query, limit=10,
filter_metadata=None, recency_bias=None)`` scored ``(1 - recency_bias) x semantic +
recency_bias x recency`` (None: the room's bias), ``get_recent_items(limit=10,
filter_metadata=None)`` newest first from the window; items are dicts with ``text``,
``metadata`` and, from a search, ``score``, plus the hub's ``id``, ``role``,
``created_at``, ``semantic`` and ``recency``. MUXI's ``query_vector`` is not taken: the
hub embeds the query. ``metadata["role"]`` (user, assistant, system, tool) is also the
stored turn's role. ``AsyncBufferMemory`` has the same methods as coroutines (MUXI's
``add`` and ``search`` are coroutines too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from memoryhub_client.client import AsyncMemoryHub, MemoryHub
from memoryhub_client.models import BufferHit, BufferWindow, Memory

__all__ = ["AsyncBufferMemory", "BufferEntry", "BufferMemory"]

ROLES = ("user", "assistant", "system", "tool")


class BufferEntry(TypedDict, total=False):
    """One turn of the buffer, as MUXI's items (``text``, ``metadata``, ``score``)."""

    id: str
    text: str
    metadata: dict[str, Any]
    role: str
    created_at: str | None
    score: float
    semantic: float | None
    recency: float


def _entry(memory: Memory, hit: BufferHit | None = None) -> BufferEntry:
    entry = BufferEntry(
        id=memory.id,
        text=memory.content,
        metadata=dict(memory.metadata) if isinstance(memory.metadata, dict) else {},
        role=memory.role,
        created_at=memory.created_at.isoformat() if memory.created_at else None,
    )
    if hit is not None:
        entry["score"], entry["semantic"], entry["recency"] = hit.score, hit.semantic, hit.recency
    return entry


def _matches(entry: BufferEntry, wanted: Mapping[str, Any] | None) -> bool:
    metadata = entry.get("metadata", {})
    return not wanted or all(key in metadata and metadata[key] == v for key, v in wanted.items())


def _recent(
    window: BufferWindow, limit: int, wanted: Mapping[str, Any] | None
) -> list[BufferEntry]:
    newest_first = [_entry(memory) for memory in reversed(window.messages)]
    return [entry for entry in newest_first if _matches(entry, wanted)][:limit]


def _add_fields(text: str, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    values = dict(metadata or {})
    role = values.get("role")
    return {
        "content": text,
        "kind": "message",
        "role": role if role in ROLES else None,
        "metadata": values,
    }


def _stats(window: BufferWindow) -> dict[str, Any]:
    """MUXI's ``get_stats`` keys, from the hub's buffer of the room."""
    return {
        "buffer_length": window.unsummarized,
        "buffer_capacity": window.settings.capacity,
        "context_window_size": window.settings.max_size,
        "recency_bias": window.settings.recency_bias,
        "has_vector_search": True,
        "model_available": True,
        "summary": window.summary.content if window.summary else None,
    }


class BufferMemory:
    """A room's buffer through the sync client: ``BufferMemory(hub, room="chat-1",
    user="alice")`` (the room and user default to the client's)."""

    def __init__(self, hub: MemoryHub, *, room: str | None = None, user: str | None = None):
        self.hub = hub
        self.room = room or hub.room
        self.user = user or hub.user
        if not self.room:
            raise ValueError("a buffer needs a room: BufferMemory(hub, room=...)")

    def add(self, text: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Append a turn to the room; returns its id."""
        fields = _add_fields(text, metadata)
        return self.hub.memories.add(user=self.user, room=self.room, **fields).memory.id

    def search(
        self,
        query: str,
        limit: int = 10,
        filter_metadata: Mapping[str, Any] | None = None,
        recency_bias: float | None = None,
    ) -> list[BufferEntry]:
        """The room's turns in capacity best first, with ``score``."""
        found = self.hub.buffer.search(
            query,
            room=self.room,
            limit=limit,
            recency_bias=recency_bias,
            filter_metadata=filter_metadata,
        )
        return [_entry(hit.memory, hit) for hit in found.results]

    def window(self) -> BufferWindow:
        """The room's window, newest summary and unsummarized count, as the hub has it."""
        return self.hub.buffer.window(room=self.room)

    def get_recent_items(
        self, limit: int = 10, filter_metadata: Mapping[str, Any] | None = None
    ) -> list[BufferEntry]:
        """The window's turns matching ``filter_metadata``, newest first."""
        return _recent(self.window(), limit, filter_metadata)

    def get_recent(self, n: int = 10) -> list[BufferEntry]:
        """The room's last ``n`` active turns, oldest first (past the window too)."""
        page = self.hub.memories.page(room=self.room, kind="message", limit=n)
        return [_entry(memory) for memory in reversed(page.results)]

    def clear(self) -> int:
        """Delete the room's turns and summaries for good (each deletion recorded);
        returns how many went."""
        return self.hub.memories.delete_where(room=self.room, kind=["message", "summary"])

    def get_stats(self) -> dict[str, Any]:
        return _stats(self.window())


class AsyncBufferMemory:
    """``BufferMemory`` through the async client; every method a coroutine."""

    def __init__(self, hub: AsyncMemoryHub, *, room: str | None = None, user: str | None = None):
        self.hub = hub
        self.room = room or hub.room
        self.user = user or hub.user
        if not self.room:
            raise ValueError("a buffer needs a room: AsyncBufferMemory(hub, room=...)")

    async def add(self, text: str, metadata: Mapping[str, Any] | None = None) -> str:
        fields = _add_fields(text, metadata)
        created = await self.hub.memories.add(user=self.user, room=self.room, **fields)
        return created.memory.id

    async def search(
        self,
        query: str,
        limit: int = 10,
        filter_metadata: Mapping[str, Any] | None = None,
        recency_bias: float | None = None,
    ) -> list[BufferEntry]:
        found = await self.hub.buffer.search(
            query,
            room=self.room,
            limit=limit,
            recency_bias=recency_bias,
            filter_metadata=filter_metadata,
        )
        return [_entry(hit.memory, hit) for hit in found.results]

    async def window(self) -> BufferWindow:
        return await self.hub.buffer.window(room=self.room)

    async def get_recent_items(
        self, limit: int = 10, filter_metadata: Mapping[str, Any] | None = None
    ) -> list[BufferEntry]:
        return _recent(await self.window(), limit, filter_metadata)

    async def get_recent(self, n: int = 10) -> list[BufferEntry]:
        page = await self.hub.memories.page(room=self.room, kind="message", limit=n)
        return [_entry(memory) for memory in reversed(page.results)]

    async def clear(self) -> int:
        return await self.hub.memories.delete_where(room=self.room, kind=["message", "summary"])

    async def get_stats(self) -> dict[str, Any]:
        return _stats(await self.window())
