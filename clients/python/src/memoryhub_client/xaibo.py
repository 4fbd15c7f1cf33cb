"""Xaibo's memory protocol over MemoryHub: an agent's memory module whose memories live
in the hub (searched by meaning and words, embedded by its workers, seen in its console).

Matches ``xaibo.core.protocols.memory.MemoryProtocol`` (XpressAI/xaibo): async
``store_memory(text, attributes) -> id``, ``get_memory(id) -> dict | None``,
``search_memory(query, k=10) -> list[MemorySearchResult]``, ``list_memories() ->
list[dict]``, ``delete_memory(id) -> bool``, ``update_memory(id, text, attributes) ->
bool``. A memory is the dict ``{"id", "content", "attributes"}`` as in Xaibo's
``VectorMemory``; a search result has Xaibo's fields ``memory_id``, ``content``,
``similarity_score`` (the hub's cosine similarity, 0..1; 0.0 for a memory found by its
words before a worker embedded it) and ``attributes``. Attributes are the memory's
``metadata``; ``update_memory`` merges new attributes into the old, as Xaibo does.

Xaibo builds a module from its agent YAML with a ``config`` dict: ``url``, ``api_key``
(else MEMORYHUB_URL / MEMORYHUB_API_KEY), ``user``, ``room``, ``kind`` (default
``fact``), ``mode`` (search mode, default the project's) and ``timeout``. The memories
of one module are those of its user, room and kind: ids outside them read as missing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memoryhub_client.client import AsyncMemoryHub
from memoryhub_client.errors import NotFound
from memoryhub_client.models import Memory

__all__ = ["MemoryHubMemory", "MemorySearchResult"]


@dataclass(frozen=True)
class MemorySearchResult:
    """Xaibo's search result: the memory's id and text, its similarity to the query
    (0..1) and its attributes."""

    memory_id: str
    content: str
    similarity_score: float
    attributes: dict[str, Any] | None = None


def _entry(memory: Memory) -> dict[str, Any]:
    attributes = memory.metadata if isinstance(memory.metadata, dict) else {}
    return {"id": memory.id, "content": memory.content, "attributes": dict(attributes)}


def _is_id(value: str) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


class MemoryHubMemory:
    """Xaibo's ``MemoryProtocol`` backed by a MemoryHub project (see the module doc)."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        hub: AsyncMemoryHub | None = None,
        user: str | None = None,
        room: str | None = None,
        kind: str | None = None,
        mode: str | None = None,
    ) -> None:
        settings = dict(config or {})
        self.hub = hub or AsyncMemoryHub(
            settings.get("url"), settings.get("api_key"), timeout=settings.get("timeout", 30.0)
        )
        self.user: str | None = user or settings.get("user")
        self.room: str | None = room or settings.get("room")
        self.kind: str = kind or settings.get("kind") or "fact"
        self.mode: str | None = mode or settings.get("mode")

    def _in_scope(self, memory: Memory) -> bool:
        return (
            memory.kind == self.kind
            and (self.user is None or memory.user == self.user)
            and (self.room is None or memory.room == self.room)
        )

    async def _get(self, memory_id: str) -> Memory | None:
        if not _is_id(memory_id):
            return None
        try:
            memory = await self.hub.memories.get(memory_id)
        except NotFound:
            return None
        return memory if self._in_scope(memory) else None

    async def store_memory(self, text: str, attributes: dict[str, Any] | None = None) -> str:
        """Store ``text`` with ``attributes`` (its metadata); returns its id."""
        created = await self.hub.memories.add(
            text, user=self.user, room=self.room, kind=self.kind, metadata=attributes or {}
        )
        return created.memory.id

    async def get_memory(self, memory_id: str) -> dict[str, Any] | None:
        """``{"id", "content", "attributes"}``, or None when there is no such memory."""
        memory = await self._get(memory_id)
        return _entry(memory) if memory is not None else None

    async def search_memory(self, query: str, k: int = 10) -> list[MemorySearchResult]:
        """The ``k`` memories nearest ``query``, best first."""
        found = await self.hub.search(
            query, user=self.user, room=self.room, kind=[self.kind], k=k, mode=self.mode
        )
        return [
            MemorySearchResult(
                memory_id=hit.memory.id,
                content=hit.memory.content,
                similarity_score=min(1.0, max(0.0, hit.similarity or 0.0)),
                attributes=_entry(hit.memory)["attributes"],
            )
            for hit in found.results
        ]

    async def list_memories(self) -> list[dict[str, Any]]:
        """Every memory of this module's user, room and kind, newest first."""
        pager = self.hub.memories.list(user=self.user, room=self.room, kind=self.kind, limit=500)
        return [_entry(memory) for memory in await pager.collect()]

    async def delete_memory(self, memory_id: str) -> bool:
        """Delete a memory; False when there was none."""
        if await self._get(memory_id) is None:
            return False
        try:
            await self.hub.memories.delete(memory_id)
        except NotFound:
            return False
        return True

    async def update_memory(
        self, memory_id: str, text: str, attributes: dict[str, Any] | None = None
    ) -> bool:
        """New text (embedded again) and attributes merged into the old; False when
        there is no such memory."""
        memory = await self._get(memory_id)
        if memory is None:
            return False
        merged = {**_entry(memory)["attributes"], **(attributes or {})}
        try:
            await self.hub.memories.update(memory_id, content=text, metadata=merged)
        except NotFound:
            return False
        return True

    async def aclose(self) -> None:
        await self.hub.aclose()
