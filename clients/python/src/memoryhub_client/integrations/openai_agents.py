"""The OpenAI Agents SDK's ``Session`` over a room of MemoryHub: an agent's conversation
history kept by the hub (shared by every process of the agent, embedded and summarized
by its workers, searchable, seen in its console).

``MemoryHubSession(session_id, hub=None, *, user=None, session_settings=None)``
implements ``agents.memory.Session`` (openai-agents 0.24) and behaves as the SDK's own
``SQLiteSession``: ``get_items(limit)`` returns the items in the order they were added
(``limit``: the latest N, still oldest first; 0 none; a negative limit or None all,
None taking ``session_settings.limit``), ``add_items(items)`` appends, ``pop_item()``
removes and returns the latest (None when empty), ``clear_session()`` removes them all.

Storage: the session id is the room's external id (the hub creates the room with the
first item); ``user`` (default: the client's default user, else none) is the end user
the turns belong to, and a session is its room and user: the same id with another user
is another session. Each item is one memory of kind ``message``: its ``content`` the
item's readable text (a message's text, ``name(arguments)`` of a function call, a tool's
output, a reasoning summary), its ``role`` the item's where the hub has one (developer
-> system, a function call -> assistant, a tool output -> tool), and the item itself
in ``metadata`` as the JSON text ``SQLiteSession`` stores, so ``get_items`` returns it
unchanged. An item whose JSON exceeds the hub's metadata cap (16 KB) is stored as that
JSON in ``content`` instead (a 32,000-character cap; a larger item is the hub's 400).

Only what a session wrote counts: memories of the room without this module's marker
(turns another writer appended, summaries, derived facts) never appear in
``get_items``, are never popped and survive ``clear_session``. ``clear_session`` keeps
the room (its settings) and what the hub derived from the turns (summaries, facts).

Order is the hub's (created_at, id): items of one ``add_items`` get increasing
time-ordered ids, so they keep their order even when the hub stamps them in the same
microsecond. A retried call carries the client's Idempotency-Key; items of one call are
stored in one transaction per 500 items.

``hub`` is an ``AsyncMemoryHub`` (default: one from MEMORYHUB_URL / MEMORYHUB_API_KEY)
or a ``MemoryHub``, whose blocking calls then run in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, cast

from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings, resolve_session_limit

from memoryhub_client.client import AsyncMemoryHub, MemoryHub
from memoryhub_client.models import Memory, Page

__all__ = ["MemoryHubSession", "item_fields"]

MARKER = "openai_agents_session"  # metadata key: the session id that wrote the memory
ITEM = "item"  # metadata key: the item's JSON (absent: the content holds it)
METADATA_CAP = 16_384  # the hub's MEMORYHUB_MAX_METADATA_BYTES default
CHUNK_ITEMS = 500  # items a batch request (the hub takes up to 1,000)
CHUNK_CHARS = 4_000_000  # ... and characters of JSON (its body cap is 16 MB)
PAGE = 500  # the list endpoint's largest page
ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _part_text(part: Any) -> str:
    """The text of one content part (input_text, output_text, refusal, image...)."""
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return ""
    for key in ("text", "refusal", "transcript"):
        if isinstance(part.get(key), str):
            return cast(str, part[key])
    kind = part.get("type")
    return f"[{kind}]" if isinstance(kind, str) else ""


def _parts_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence):
        return "\n".join(text for text in map(_part_text, value) if text)
    return ""


def _readable(item: Mapping[str, Any], item_json: str) -> str:
    """What a person (and the hub's search) reads of an item; never blank."""
    kind = item.get("type")
    if "content" in item and kind in (None, "message"):
        text = _parts_text(item["content"])
    elif kind == "function_call":
        text = f"{item.get('name', '')}({item.get('arguments', '')})"
    elif isinstance(kind, str) and kind.endswith("_output") and "output" in item:
        text = _parts_text(item["output"])
    elif kind == "reasoning":
        text = _parts_text(item.get("summary"))
    else:
        text = item_json
    return text.replace("\x00", "") if text.strip() else f"[{kind or item.get('role', 'item')}]"


def _role(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind in (None, "message"):
        return ROLES.get(str(item.get("role")), "")
    if kind == "function_call":
        return "assistant"
    return "tool" if isinstance(kind, str) and kind.endswith("_output") else ""


def item_fields(item: Mapping[str, Any], session_id: str) -> dict[str, Any]:
    """The memory fields (content, role, metadata) that store ``item`` for the session."""
    if not isinstance(item, Mapping):
        raise TypeError(f"a session item is a dict (a TResponseInputItem), not {type(item)!r}")
    item_json = json.dumps(item)
    metadata = {MARKER: session_id, ITEM: item_json}
    if len(json.dumps(metadata)) > METADATA_CAP:  # as the hub measures it
        return {"content": item_json, "role": _role(item), "metadata": {MARKER: session_id}}
    return {"content": _readable(item, item_json), "role": _role(item), "metadata": metadata}


def _item_of(memory: Memory, session_id: str) -> TResponseInputItem | None:
    """The item a memory stores for the session; None for any other memory."""
    metadata = memory.metadata if isinstance(memory.metadata, dict) else {}
    if metadata.get(MARKER) != session_id:
        return None
    text = metadata.get(ITEM, memory.content)
    try:
        item = json.loads(text) if isinstance(text, str) else None
    except json.JSONDecodeError:
        return None  # as SQLiteSession: an undecodable row is skipped
    return cast(TResponseInputItem, item) if isinstance(item, dict) else None


def ordered_ids(count: int) -> list[str]:
    """``count`` new ids, increasing (UUIDv7 layout: milliseconds, then random bits
    whose low 32 count up), so the hub's (created_at, id) order keeps the items' order."""
    millis = time.time_ns() // 1_000_000
    high = (millis << 16) | 0x7000 | secrets.randbits(12)  # 48-bit time, version 7
    low = (0b10 << 62) | (secrets.randbits(30) << 32)  # variant, random, counter
    return [str(uuid.UUID(int=(high << 64) | low | n)) for n in range(count)]


def _chunks(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The rows in batches of at most CHUNK_ITEMS items and ~CHUNK_CHARS of JSON."""
    chunks: list[list[dict[str, Any]]] = [[]]
    size = 0
    for row in rows:
        weight = len(row["content"]) + len(json.dumps(row["metadata"]))
        if chunks[-1] and (len(chunks[-1]) >= CHUNK_ITEMS or size + weight > CHUNK_CHARS):
            chunks.append([])
            size = 0
        chunks[-1].append(row)
        size += weight
    return chunks


class MemoryHubSession:
    """``agents.memory.Session`` backed by a MemoryHub room (see the module doc):
    ``Runner.run(agent, text, session=MemoryHubSession("chat-1", user="alice"))``."""

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        hub: AsyncMemoryHub | MemoryHub | None = None,
        *,
        user: str | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip() or "/" in session_id:
            raise ValueError(f"a session id is a non-empty room id without '/': {session_id!r}")
        self.session_id = session_id
        self.hub = hub if hub is not None else AsyncMemoryHub()
        self.user = user if user is not None else self.hub.user
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )

    async def _call(self, method: Callable[..., Any], /, **kwargs: Any) -> Any:
        """One client call: awaited (async client) or run in a thread (sync client)."""
        if isinstance(self.hub, AsyncMemoryHub):
            return await cast(Awaitable[Any], method(**kwargs))
        return await asyncio.to_thread(method, **kwargs)

    async def _page(self, order: str, size: int, cursor: str | None) -> Page[Memory]:
        page = await self._call(
            self.hub.memories.page,
            user=self.user,
            room=self.session_id,
            kind="message",
            order=order,
            limit=max(1, min(size, PAGE)),
            cursor=cursor,
        )
        return cast(Page[Memory], page)

    async def _stored(self, order: str, wanted: int | None) -> list[tuple[Memory, Any]]:
        """(memory, item) of the session in ``order`` (asc/desc), the first ``wanted``
        of them (None: all), reading pages until they are found: a page of ``wanted``,
        then larger ones (other writers' turns in the room make a page fall short)."""
        found: list[tuple[Memory, Any]] = []
        cursor: str | None = None
        size = PAGE if wanted is None else wanted
        while wanted is None or len(found) < wanted:
            page = await self._page(order, size, cursor)
            size = min(PAGE, size * 2)
            for memory in page.results:
                item = _item_of(memory, self.session_id)
                if item is not None:
                    found.append((memory, item))
            cursor = page.next_cursor
            if not cursor:
                break
        return found if wanted is None else found[:wanted]

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items oldest first; ``limit``: the latest N of them (None:
        ``session_settings.limit``; 0: none; negative: all, as SQLiteSession)."""
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted is None or wanted < 0:
            return [item for _, item in await self._stored("asc", None)]
        if wanted == 0:
            return []
        newest_first = await self._stored("desc", wanted)
        return [item for _, item in reversed(newest_first)]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items in order (one batch request per 500 items)."""
        if not items:
            return
        rows = [item_fields(cast(Mapping[str, Any], item), self.session_id) for item in items]
        for row, memory_id in zip(rows, ordered_ids(len(rows)), strict=True):
            row.update(id=memory_id, kind="message")
        for chunk in _chunks(rows):
            await self._call(
                self.hub.memories.add_batch, memories=chunk, user=self.user, room=self.session_id
            )

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the latest item; None when the session has none."""
        latest = await self._stored("desc", 1)
        if not latest:
            return None
        memory, item = latest[0]
        await self._call(self.hub.memories.delete, memory_id=memory.id)
        return cast(TResponseInputItem, item)

    async def clear_session(self) -> None:
        """Delete every item of the session (the room, other writers' turns and what the
        hub derived stay). One request when the room holds only this session's turns."""
        everything = await self._stored("asc", None)
        if not everything:
            return
        turns = await self._call(
            self.hub.memories.count, user=self.user, room=self.session_id, kind="message"
        )
        newest = everything[-1][0].created_at
        if turns == len(everything) and newest is not None:
            # the turns listed and none newer: a turn another writer adds meanwhile stays
            await self._call(
                self.hub.memories.delete_where,
                user=self.user,
                room=self.session_id,
                kind="message",
                end=newest + timedelta(microseconds=1),
            )
            return
        for memory, _ in everything:
            await self._call(self.hub.memories.delete, memory_id=memory.id)
