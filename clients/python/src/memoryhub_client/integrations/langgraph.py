"""LangGraph's ``BaseStore`` over MemoryHub: ``graph.compile(store=MemoryHubStore())``
gives a graph's nodes ``put``/``get``/``search``/``delete``/``list_namespaces`` (and the
``a``-variants) whose items live in the hub: shared by every process, searched by
meaning with the hub's embeddings, seen in its console.

How an item is kept, and why:

* One memory per (namespace, key), its id a uuid5 of the store's room, namespace and key:
  the client chooses it, so a put is an idempotent upsert (add with that id; when the
  hub has it already, answering 200 for the same text or 409 for another, update it)
  and a get is one GET by id, with no lookup table.
* The item lives in the memory's ``metadata["langgraph"]``: ``namespace``, its
  ``prefixes`` ("a", "a.b", "a.b.c": labels hold no ".", LangGraph forbids it), ``key``,
  ``value``, ``indexed``, ``ttl`` and ``expires_at``. The hub's search filters metadata
  by containment (jsonb ``@>``), so a namespace prefix and the equality parts of
  ``filter`` are applied by the hub; every condition is checked again here (``$gt``
  and the like, and exact list equality, only here).
* The memory's text (what the hub embeds and searches) is the value's fields that
  ``index`` names (``{"fields": ["text"]}``, or a put's ``index=[...]``), else the whole
  value as JSON. The hub embeds every memory with its own model: ``index`` needs no
  ``embed``/``dims`` here, and a query searches by meaning whether or not it is given.
  The hub cannot skip embedding one memory, so a put with ``index=False`` keeps the key
  as the text and marks the item unindexed: a search with a query leaves it out; a
  search without one lists it.
* All items of a store are memories of one room (``room``, default "langgraph-store")
  and one kind (``kind``, default "knowledge": no derived work, no summaries or fact
  mining, as "message" and "fact" get): a search without a query and list_namespaces
  page through that room's memories, filtering here (fine up to some thousands of
  items; a query search is the hub's indexed search).
* ``user``: None (default) stores the items as the project's, like LangGraph's own
  stores, whose namespaces mean nothing to them. A LangGraph app that keeps one user's
  memories under ("users", user_id, ...) can say so: ``user=user_from_namespace(1)``
  (or any callable of the namespace, or a fixed id), so the hub files them under that
  user: they appear in that user's context, export and deletion. Reads never filter by
  user: the namespace is what isolates items, as in LangGraph.
* TTL (minutes, LangGraph's unit): ``ttl_config={"default_ttl": ..., "refresh_on_read":
  ...}``; the expiry is kept in the metadata (the hub has no per-memory expiry). An
  expired item reads as absent and is deleted when met; a read refreshes it unless
  ``refresh_on_read`` is False or the call says ``refresh_ttl=False``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path

from memoryhub_client.client import KEY_VARIABLE, AsyncMemoryHub, MemoryHub
from memoryhub_client.errors import ConfigurationError, Conflict, NotFound
from memoryhub_client.integrations.langgraph_filters import (
    FIELD,
    UserOf,
    expired,
    filter_matches,
    namespaces_listed,
    pushed_down,
    record_of,
    user_from_namespace,
)
from memoryhub_client.models import Memory

__all__ = ["MemoryHubStore", "user_from_namespace"]

ID_SPACE = uuid.UUID("6f0f8a3e-6c43-5b4e-9d0a-4c1a9b7e2f10")
PAGE = 500
MAX_K = 200  # the hub's default MEMORYHUB_MAX_SEARCH_K


class MemoryHubStore(BaseStore):
    """A LangGraph store whose items are MemoryHub memories (see the module doc).

    ``hub``/``async_hub``: clients to use (else made from ``url``/``api_key`` or
    MEMORYHUB_URL / MEMORYHUB_API_KEY; give both to use the a-methods with a key not
    in the environment); ``room``, ``kind``: where the items live; ``user``: None, an
    id, or a callable of the namespace; ``index``: LangGraph's
    ``IndexConfig`` (only ``fields`` matters); ``ttl``: LangGraph's ``TTLConfig``
    (minutes); ``mode``: the hub's search mode for a query (default the project's).
    """

    supports_ttl = True

    def __init__(
        self,
        *,
        hub: MemoryHub | None = None,
        async_hub: AsyncMemoryHub | None = None,
        url: str | None = None,
        api_key: str | None = None,
        room: str = "langgraph-store",
        kind: str = "knowledge",
        user: str | UserOf | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        mode: str | None = None,
    ) -> None:
        self.hub = hub or MemoryHub(url, api_key)
        self._async_hub = async_hub
        if async_hub is None and (hub is None or api_key or os.environ.get(KEY_VARIABLE)):
            self._async_hub = AsyncMemoryHub(url or self.hub.url, api_key)
        self.room, self.kind, self.mode = room, kind, mode
        self.user = user
        self.index_config = index
        self.fields: list[str] = list((index or {}).get("fields") or ["$"])
        self.ttl_config = ttl

    @property
    def async_hub(self) -> AsyncMemoryHub:
        """The async client (the a-methods); a store made from a sync ``hub`` alone
        has one only when the key is in MEMORYHUB_API_KEY."""
        if self._async_hub is None:
            raise ConfigurationError("no async client: pass async_hub=AsyncMemoryHub(url, key)")
        return self._async_hub

    def memory_id(self, namespace: tuple[str, ...], key: str) -> str:
        """The memory that holds (namespace, key) in this store's room."""
        name = json.dumps([self.room, list(namespace), key], ensure_ascii=False)
        return str(uuid.uuid5(ID_SPACE, name))

    def _user_of(self, namespace: tuple[str, ...]) -> str | None:
        return self.user(namespace) if callable(self.user) else self.user

    def _text(self, op: PutOp) -> str:
        if op.index is False:
            return op.key
        value = dict(op.value or {})
        texts: list[str] = []
        for path in op.index or self.fields:
            if path == "$":
                texts.append(json.dumps(value, ensure_ascii=False, default=str))
            else:
                texts.extend(str(t) for t in get_text_at_path(value, tokenize_path(path)))
        return "\n".join(t for t in texts if t.strip()) or op.key

    def _record(self, op: PutOp) -> dict[str, Any]:
        labels = list(op.namespace)
        prefixes = [".".join(labels[:n]) for n in range(1, len(labels) + 1)]
        return {
            FIELD: {
                "namespace": labels,
                "prefixes": prefixes,
                "key": op.key,
                "value": dict(op.value or {}),
                "indexed": op.index is not False,
                "ttl": op.ttl,
                "expires_at": time.time() + op.ttl * 60 if op.ttl is not None else None,
            }
        }

    def _add_fields(self, op: PutOp) -> dict[str, Any]:
        return {
            "content": self._text(op),
            "metadata": self._record(op),
            "user": self._user_of(op.namespace),
            "room": self.room,
            "kind": self.kind,
            "id": self.memory_id(op.namespace, op.key),
        }

    def _search_fields(self, op: SearchOp) -> dict[str, Any]:
        wanted: dict[str, Any] = {"indexed": True}
        if op.namespace_prefix:
            wanted["prefixes"] = [".".join(op.namespace_prefix)]
        if plain := pushed_down(op.filter):
            wanted["value"] = plain
        asked = op.offset + op.limit
        k = min(MAX_K, asked * 3 if op.filter else asked)
        return {
            "room": self.room,
            "kind": self.kind,
            "metadata": {FIELD: wanted},
            "k": max(k, 1),
            "mode": self.mode,
        }

    @classmethod
    def _item(cls, memory: Memory, score: float | None = None) -> SearchItem:
        record = record_of(memory) or {}
        created = memory.created_at
        assert created is not None  # the hub always sends it
        return SearchItem(
            namespace=tuple(record.get("namespace", ())),
            key=str(record.get("key", "")),
            value=dict(record.get("value") or {}),
            created_at=created,
            updated_at=memory.updated_at or created,
            score=score,
        )

    def _refreshed(self, memory: Memory, refresh: bool) -> dict[str, Any] | None:
        """The metadata with a new expiry, when this read refreshes the item's TTL."""
        record = record_of(memory) or {}
        if not refresh or record.get("ttl") is None:
            return None
        if (self.ttl_config or {}).get("refresh_on_read") is False:
            return None
        renewed = {**record, "expires_at": time.time() + float(record["ttl"]) * 60}
        return {**memory.metadata, FIELD: renewed}

    def _wanted(self, memory: Memory, op: SearchOp) -> bool:
        record = record_of(memory)
        if record is None or expired(memory):
            return False
        prefix = tuple(op.namespace_prefix)
        namespace = tuple(record.get("namespace", ()))
        value = record.get("value") or {}
        return namespace[: len(prefix)] == prefix and all(
            filter_matches(value.get(name), part) for name, part in (op.filter or {}).items()
        )

    # sync

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run LangGraph's ops in order, one or two hub calls each."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            else:
                raise ValueError(f"unknown operation: {op!r}")
        return results

    def _put(self, op: PutOp) -> None:
        memory_id = self.memory_id(op.namespace, op.key)
        if op.value is None:
            self._forget(memory_id)
            return
        fields = self._add_fields(op)
        try:
            created = self.hub.memories.add(**fields).created
        except Conflict:  # the id holds another text: this item's older value
            created = False
        if not created:
            self.hub.memories.update(
                memory_id, content=fields["content"], metadata=fields["metadata"]
            )

    def _forget(self, memory_id: str) -> None:
        """Delete a memory; one already gone is no error (LangGraph's delete is too)."""
        with contextlib.suppress(NotFound):
            self.hub.memories.delete(memory_id)

    def _fresh(self, memory: Memory, refresh: bool) -> Memory | None:
        """The memory as a live item (its TTL refreshed), or None when it expired
        (then deleted)."""
        if expired(memory):
            self._forget(memory.id)
            return None
        renewed = self._refreshed(memory, refresh)
        return self.hub.memories.update(memory.id, metadata=renewed) if renewed else memory

    def _get(self, op: GetOp) -> Item | None:
        try:
            memory = self.hub.memories.get(self.memory_id(op.namespace, op.key))
        except NotFound:
            return None
        fresh = self._fresh(memory, op.refresh_ttl)
        return self._item(fresh) if fresh is not None else None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.query:
            found = self.hub.search(op.query, **self._search_fields(op))
            scored: list[tuple[Memory, float | None]] = [
                (h.memory, min(1.0, max(0.0, h.similarity or 0.0))) for h in found.results
            ]
        else:
            scored = [(m, None) for m in self._room_memories()]
        kept = [(m, s) for m, s in scored if self._wanted(m, op)]
        for memory, _ in scored:
            if expired(memory):
                self._forget(memory.id)
        items = []
        for memory, score in kept[op.offset : op.offset + op.limit]:
            fresh = self._fresh(memory, op.refresh_ttl)
            items.append(self._item(fresh or memory, score))
        return items

    def _room_memories(self) -> list[Memory]:
        return list(self.hub.memories.list(room=self.room, kind=self.kind, limit=PAGE))

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        live = [m for m in self._room_memories() if not expired(m)]
        found = [self._item(m).namespace for m in live if record_of(m)]
        return namespaces_listed(found, op)

    # async: the same steps through the async client

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` through the async client."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(await self._aget(op))
            elif isinstance(op, SearchOp):
                results.append(await self._asearch(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._alist_namespaces(op))
            elif isinstance(op, PutOp):
                await self._aput(op)
                results.append(None)
            else:
                raise ValueError(f"unknown operation: {op!r}")
        return results

    async def _aput(self, op: PutOp) -> None:
        memory_id = self.memory_id(op.namespace, op.key)
        if op.value is None:
            await self._aforget(memory_id)
            return
        fields = self._add_fields(op)
        try:
            created = (await self.async_hub.memories.add(**fields)).created
        except Conflict:
            created = False
        if not created:
            await self.async_hub.memories.update(
                memory_id, content=fields["content"], metadata=fields["metadata"]
            )

    async def _aforget(self, memory_id: str) -> None:
        with contextlib.suppress(NotFound):
            await self.async_hub.memories.delete(memory_id)

    async def _afresh(self, memory: Memory, refresh: bool) -> Memory | None:
        if expired(memory):
            await self._aforget(memory.id)
            return None
        renewed = self._refreshed(memory, refresh)
        if renewed is None:
            return memory
        return await self.async_hub.memories.update(memory.id, metadata=renewed)

    async def _aget(self, op: GetOp) -> Item | None:
        try:
            memory = await self.async_hub.memories.get(self.memory_id(op.namespace, op.key))
        except NotFound:
            return None
        fresh = await self._afresh(memory, op.refresh_ttl)
        return self._item(fresh) if fresh is not None else None

    async def _asearch(self, op: SearchOp) -> list[SearchItem]:
        if op.query:
            found = await self.async_hub.search(op.query, **self._search_fields(op))
            scored: list[tuple[Memory, float | None]] = [
                (h.memory, min(1.0, max(0.0, h.similarity or 0.0))) for h in found.results
            ]
        else:
            scored = [(m, None) for m in await self._aroom_memories()]
        kept = [(m, s) for m, s in scored if self._wanted(m, op)]
        for memory, _ in scored:
            if expired(memory):
                await self._aforget(memory.id)
        items = []
        for memory, score in kept[op.offset : op.offset + op.limit]:
            fresh = await self._afresh(memory, op.refresh_ttl)
            items.append(self._item(fresh or memory, score))
        return items

    async def _aroom_memories(self) -> list[Memory]:
        pager = self.async_hub.memories.list(room=self.room, kind=self.kind, limit=PAGE)
        return await pager.collect()

    async def _alist_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        live = [m for m in await self._aroom_memories() if not expired(m)]
        found = [self._item(m).namespace for m in live if record_of(m)]
        return namespaces_listed(found, op)

    def close(self) -> None:
        self.hub.close()

    async def aclose(self) -> None:
        if self._async_hub is not None:
            await self._async_hub.aclose()
        self.hub.close()
