"""A room's working memory (MUXI): short-lived items (tool outputs, session notes) held
in Redis with their vectors, never in PostgreSQL, each with its own TTL, capped per room
in bytes (the oldest go first) and searched by meaning with FAISS.

The Redis key layout and the Lua scripts that keep every change atomic are in
memories/services/working_store.py. A Redis restart loses working memory by design.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import faiss
import numpy as np

from memories.models import Room
from memories.providers.embeddings import EmbeddingProvider, normalize, query_cache
from memories.services.configuration import room_settings_get
from memories.services.embedding_spaces import project_dimension, project_space, space_provider
from memories.services.working_store import (
    WorkingMemoryUnavailable,
    index_key_room,
    index_keys,
    room_prefix,
    script_run,
)

logger = logging.getLogger(__name__)

MAX_TTL_SECONDS = 30 * 86400


class WorkingItemTooLarge(ValueError):
    """One item is larger than the room's whole cap: FIFO could not make room for it."""


@dataclass
class WorkingItem:
    id: str
    content: str
    metadata: dict[str, Any]
    created_at: datetime
    expires_at: datetime
    vector: np.ndarray | None = field(default=None, repr=False, compare=False)
    vector_model: str = field(default="", repr=False, compare=False)


@dataclass
class WorkingList:
    """A room's live items, oldest first, with its usage and cap in bytes."""

    items: list[WorkingItem]
    bytes: int
    max_bytes: int
    ttl_seconds: int


@dataclass
class WorkingHit:
    item: WorkingItem
    score: float | None  # cosine similarity; None when ranked by recency


@dataclass
class WorkingSearchResult:
    """Hits and how they were ranked: ``method`` "semantic" (FAISS, cosine) or "recency"
    (newest first; ``reason`` says why)."""

    hits: list[WorkingHit]
    method: str
    reason: str | None
    searched: int  # live items that passed filter_metadata
    embedded: int  # items this search embedded (the others had their vector)
    timings_ms: dict[str, float] = field(default_factory=dict)


def _prefix(room: Room) -> str:
    return room_prefix(room.project_id, room.pk)


def _datetime(ms: bytes | int) -> datetime:
    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC)


def _max_bytes(room: Room) -> int:
    return int(room_settings_get(room=room).working.max_memory_mb * 1024 * 1024)


def _vector_bytes(room: Room) -> int:
    """An item's vector's bytes, of the model of the space its project serves from."""
    return project_dimension(room.project) * 4


def working_add(
    *,
    room: Room,
    content: str,
    metadata: dict[str, Any] | None = None,
    ttl_seconds: int | None = None,
) -> WorkingItem:
    """Store an item (no vector yet: a search computes it) for ``ttl_seconds`` (default
    the room's working.ttl_seconds), then drop the room's oldest items until it is within
    working.max_memory_mb. An item counts its content and metadata bytes plus its vector's.
    Raises WorkingItemTooLarge if the item alone exceeds the cap."""
    config = room_settings_get(room=room).working
    metadata_json = json.dumps(metadata or {}, separators=(",", ":"))
    size = len(content.encode()) + len(metadata_json.encode()) + _vector_bytes(room)
    cap = int(config.max_memory_mb * 1024 * 1024)
    if size > cap:
        raise WorkingItemTooLarge(
            f"The item takes {size} bytes (content, metadata and its vector); the room's "
            f"working memory holds at most {cap} (working.max_memory_mb)."
        )
    item_id = str(uuid.uuid4())
    ttl_ms = (ttl_seconds or config.ttl_seconds) * 1000
    created, expires, dropped = script_run(
        "add", _prefix(room), item_id, content, metadata_json, ttl_ms, size, cap
    )
    if dropped:
        logger.info("working memory of room %s: %d oldest item(s) dropped (cap)", room.pk, dropped)
    return WorkingItem(
        id=item_id,
        content=content,
        metadata=metadata or {},
        created_at=_datetime(created),
        expires_at=_datetime(expires),
    )


def _items(room: Room, *, with_vectors: bool) -> tuple[list[WorkingItem], int]:
    """The room's live items, oldest first, and its bytes (expired ids purged first)."""
    used, *rows = script_run("read", _prefix(room), "1" if with_vectors else "0")
    items = []
    for row in rows:
        item_id, content, metadata, created, expires, *vector = row
        item = WorkingItem(
            id=item_id.decode(),
            content=content.decode(),
            metadata=json.loads(metadata),
            created_at=_datetime(created),
            expires_at=_datetime(expires),
        )
        if vector and vector[0] is not None:
            item.vector = np.frombuffer(vector[0], dtype=np.float32)
            item.vector_model = (vector[1] or b"").decode()
        items.append(item)
    return items, int(used)


def working_list(*, room: Room) -> WorkingList:
    """The room's live items, oldest first, with its usage and cap in bytes."""
    items, used = _items(room, with_vectors=False)
    config = room_settings_get(room=room).working
    return WorkingList(
        items=items,
        bytes=used,
        max_bytes=int(config.max_memory_mb * 1024 * 1024),
        ttl_seconds=config.ttl_seconds,
    )


def working_delete(*, room: Room, item_id: str) -> bool:
    """Delete one item; False if the room has no such live item."""
    return bool(script_run("delete", _prefix(room), item_id))


def working_clear(*, room: Room) -> int:
    """Delete every item of the room's working memory; returns how many were live.
    Deleting a room should call this (the beat trim also clears rooms that are gone)."""
    return int(script_run("clear", _prefix(room)))


def _matches(metadata: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    """Exact equality per key (as JSON: 1 is not true, "1" is not 1)."""

    def same(a: Any, b: Any) -> bool:
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)

    return all(
        key in metadata and same(metadata[key], value) for key, value in (wanted or {}).items()
    )


def _model_tag(provider: EmbeddingProvider) -> str:
    return f"{provider.name}/{provider.model}/{provider.dimension}"


def _embed(provider: EmbeddingProvider, texts: list[str]) -> np.ndarray:
    """One batch for every text: long texts as the model's windows (as memories are),
    each text's vector the normalized mean of its windows."""
    spans = [provider.windows(text) for text in texts]
    pieces = [
        text[start:end]
        for text, windows in zip(texts, spans, strict=True)
        for start, end in windows
    ]
    vectors = provider.embed(pieces)
    rows, first = [], 0
    for windows in spans:
        rows.append(vectors[first : first + len(windows)].mean(axis=0))
        first += len(windows)
    return normalize(np.asarray(rows, dtype=np.float32))


def _vectors_fill(room: Room, items: list[WorkingItem], provider: EmbeddingProvider) -> int:
    """Embed the items lacking a vector of this model in one batch and store the vectors
    back (an item that expired meanwhile is not revived); returns how many were embedded."""
    tag = _model_tag(provider)
    missing = [item for item in items if item.vector is None or item.vector_model != tag]
    if not missing:
        return 0
    vectors = _embed(provider, [item.content for item in missing])
    pairs: list[Any] = []
    for item, vector in zip(missing, vectors, strict=True):
        item.vector, item.vector_model = vector, tag
        pairs += [item.id, vector.astype(np.float32).tobytes()]
    try:
        script_run("vectors", _prefix(room), tag, *pairs)
    except WorkingMemoryUnavailable as error:  # the ranking below still has them
        logger.warning("working memory: vectors not stored back: %s", error)
    return len(missing)


def _ranked(items: list[WorkingItem], query_vector: np.ndarray, limit: int) -> list[WorkingHit]:
    """FAISS exact inner product over normalized vectors: cosine similarity."""
    vectors = [item.vector for item in items if item.vector is not None]  # all, once filled
    matrix = np.ascontiguousarray(np.vstack(vectors), dtype=np.float32)
    faiss.normalize_L2(matrix)
    index = faiss.IndexFlatIP(matrix.shape[1])
    index.add(matrix)
    query = np.ascontiguousarray(query_vector.reshape(1, -1), dtype=np.float32)
    faiss.normalize_L2(query)
    scores, rows = index.search(query, min(limit, len(items)))
    return [
        WorkingHit(item=items[row], score=float(score))
        for score, row in zip(scores[0], rows[0], strict=True)
        if row >= 0
    ]


def working_search(
    *, room: Room, query: str, limit: int = 10, filter_metadata: dict[str, Any] | None = None
) -> WorkingSearchResult:
    """The room's live items matching ``filter_metadata`` ranked by cosine similarity to
    ``query`` (FAISS), top ``limit``. Items without a vector are embedded now, in one
    batch, and their vectors kept. Without the model: the newest items, method "recency"."""
    clock = time.perf_counter()
    timings: dict[str, float] = {}
    reason: str | None = None
    provider: EmbeddingProvider | None = None
    pending: Future[np.ndarray] | None = None
    try:
        provider = space_provider(project_space(room.project))
        pending = query_cache.submit(provider, query)  # embeds while Redis answers
    except Exception as error:  # noqa: BLE001 - a broken configuration: recency still answers
        reason = f"embedding model unavailable: {error}"
    items, _ = _items(room, with_vectors=True)
    candidates = [item for item in items if _matches(item.metadata, filter_metadata)]
    timings["load"] = (time.perf_counter() - clock) * 1000
    embedded = 0
    if provider is not None and pending is not None:
        try:
            start = time.perf_counter()
            embedded = _vectors_fill(room, candidates, provider)
            timings["embed_items"] = (time.perf_counter() - start) * 1000
            query_vector = pending.result()
        except Exception as error:  # noqa: BLE001 - the model failed: recency still answers
            logger.warning("working memory search: embedding failed: %s", error)
            reason = f"embedding model unavailable: {error}"
        else:
            start = time.perf_counter()
            hits = _ranked(candidates, query_vector, limit) if candidates else []
            timings["rank"] = (time.perf_counter() - start) * 1000
            timings["total"] = (time.perf_counter() - clock) * 1000
            return WorkingSearchResult(hits, "semantic", None, len(candidates), embedded, timings)
    newest = [WorkingHit(item=item, score=None) for item in reversed(candidates)][:limit]
    timings["total"] = (time.perf_counter() - clock) * 1000
    return WorkingSearchResult(newest, "recency", reason, len(candidates), embedded, timings)


def _rooms(keys: list[bytes]) -> Iterator[tuple[str, Room | None]]:
    """Each index key's room prefix and its Room (None: the room is gone)."""
    found: dict[tuple[int, int], str] = {}
    for key in keys:
        ids = index_key_room(key)
        if ids:
            found[ids] = room_prefix(*ids)
    rooms = Room.objects.filter(pk__in=[room_id for _, room_id in found]).select_related("project")
    by_id = {room.pk: room for room in rooms}
    for (project_id, room_id), prefix in found.items():
        room = by_id.get(room_id)
        yield prefix, room if room is not None and room.project_id == project_id else None


def working_trim(*, project_id: int | None = None) -> int:
    """For every room with working memory (of one project, or all): purge the ids of
    expired items, drop the oldest items over the room's cap (its cap may have been
    lowered since the writes) and clear rooms that no longer exist. Returns the number
    of ids removed."""
    keys = index_keys(project_id=project_id)
    removed = 0
    for prefix, room in _rooms(keys):
        if room is None:
            removed += int(script_run("clear", prefix))
            continue
        purged, dropped = script_run("trim", prefix, _max_bytes(room))
        removed += int(purged) + int(dropped)
    if removed:
        logger.info("working memory trim: %d id(s) removed from %d room(s)", removed, len(keys))
    return removed
