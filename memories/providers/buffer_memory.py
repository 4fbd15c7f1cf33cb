"""MUXI's buffer memory, standalone: a FIFO of recent items searched by
``(1 - recency_bias) x semantic + recency_bias x recency`` with FAISS.

``semantic`` is the cosine similarity (an inner product of unit vectors) and ``recency``
1 for the newest item, falling linearly to 0 for the oldest. MUXI's text writes
``1/(1+L2)`` and ``1 - idx/len``; read literally, with ``idx`` counted from the oldest,
that ranks the oldest message first, which a buffer of recent messages cannot mean. Kept
as the intent (issue 42); tests/memories/providers/test_buffer_memory.py pins it.

Importable without a database or Django (numpy and faiss only), so the server, the
benchmarks and an agent process can all hold one. ``max_size`` is the window an agent
reads (``recent()``); ``max_size x buffer_multiplier`` is what the buffer keeps and
searches. Names follow MUXI's ``ShortTermMemory`` (muxi-ai/runtime, short_term.py).
Its items and results (buffer_items.py) and its vectors (buffer_vectors.py) have
modules of their own; the names a caller needs are importable from here.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import faiss
import numpy as np

from memories.providers.buffer_items import (
    ADD_ARGUMENTS,
    ITEM_FIELDS,
    BufferHit,
    BufferItem,
    BufferSearch,
    TimestampLike,
    bias,
    buffer_item,
    metadata_matches,
    positive_int,
)
from memories.providers.buffer_vectors import (
    BatchEmbeddingModel,
    EmbeddingModel,
    VectorLike,
    search_vector,
    text_embed,
    texts_embed,
)

__all__ = [
    "BatchEmbeddingModel",
    "BufferHit",
    "BufferItem",
    "BufferMemory",
    "BufferSearch",
    "EmbeddingModel",
    "TimestampLike",
    "VectorLike",
]

SERIAL_VERSION = 1


class BufferMemory:
    """A window of recent items and a FIFO of ``capacity`` items searched semantically.

    Thread safety: one ``threading.RLock`` guards the items and the FAISS index; every
    public method may be called from any thread. The model is always called outside the
    lock (an add embeds first, then appends under the lock; a search embeds its query
    first), so a slow model never blocks other searches or adds. Items are appended in
    the order their adds take the lock. An item whose id is already in the buffer
    replaces it (the new one is the newest).
    """

    def __init__(
        self,
        max_size: int = 10,
        buffer_multiplier: int = 10,
        model: Any = None,
        vector_dimension: int = 384,
        recency_bias: float = 0.3,
    ) -> None:
        self._max_size = positive_int(max_size, "max_size")
        self._buffer_multiplier = positive_int(buffer_multiplier, "buffer_multiplier")
        self._vector_dimension = positive_int(vector_dimension, "vector_dimension")
        self._recency_bias = bias(recency_bias, "recency_bias")
        self.model = model
        self._lock = threading.RLock()
        self._items: deque[BufferItem] = deque()
        self._by_id: dict[str, BufferItem] = {}
        self._index: faiss.IndexFlatIP | None = None
        self._rows: list[BufferItem] = []  # the item of each row of the index

    @property
    def max_size(self) -> int:
        return self._max_size

    @property
    def buffer_multiplier(self) -> int:
        return self._buffer_multiplier

    @property
    def capacity(self) -> int:
        return self._max_size * self._buffer_multiplier

    buffer_size = capacity  # MUXI's name

    @property
    def vector_dimension(self) -> int:
        return self._vector_dimension

    @property
    def recency_bias(self) -> float:
        return self._recency_bias

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __repr__(self) -> str:
        return (
            f"BufferMemory(max_size={self._max_size}, buffer_multiplier="
            f"{self._buffer_multiplier}, items={len(self)}/{self.capacity})"
        )

    # Writing

    def add(
        self,
        content: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        role: str | None = None,
        timestamp: TimestampLike | None = None,
        vector: VectorLike | None = None,
        id: str | None = None,
    ) -> BufferItem:
        """Append one item (embedded by the model unless ``vector`` is given; a failing
        model stores it without a vector); beyond capacity the oldest items go."""
        arguments = {"content": content, "metadata": metadata, "role": role, "id": id}
        item = buffer_item(
            {**arguments, "timestamp": timestamp, "vector": vector},
            dimension=self._vector_dimension,
        )
        if item.vector is None and self.model is not None:
            item = replace(item, vector=text_embed(self.model, content, self._vector_dimension))
        self._append([item])
        return item

    def add_many(self, items: Iterable[Mapping[str, Any]]) -> list[BufferItem]:
        """Append several items, each a dict of ``add()``'s arguments, oldest first; the
        texts without a vector are embedded in one ``embed_batch`` call. All are checked
        before any is added."""
        drafts = []
        for position, arguments in enumerate(items):
            unknown = set(arguments) - ADD_ARGUMENTS
            if unknown or "content" not in arguments:
                raise ValueError(
                    f"items[{position}]: needs content and only add()'s arguments"
                    + (f" (unknown: {', '.join(sorted(unknown))})" if unknown else "")
                )
            drafts.append(buffer_item(arguments, dimension=self._vector_dimension))
        missing = [n for n, item in enumerate(drafts) if item.vector is None]
        if missing and self.model is not None:
            texts = [drafts[n].content for n in missing]
            vectors = texts_embed(self.model, texts, self._vector_dimension)
            for n, embedded in zip(missing, vectors, strict=True):
                drafts[n] = replace(drafts[n], vector=embedded)
        self._append(drafts)
        return drafts

    async def aadd(
        self,
        content: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        role: str | None = None,
        timestamp: TimestampLike | None = None,
        vector: VectorLike | None = None,
        id: str | None = None,
    ) -> BufferItem:
        """``add()`` in a worker thread, for async callers."""
        return await asyncio.to_thread(
            self.add, content, metadata, role=role, timestamp=timestamp, vector=vector, id=id
        )

    async def aadd_many(self, items: Iterable[Mapping[str, Any]]) -> list[BufferItem]:
        """``add_many()`` in a worker thread, for async callers."""
        return await asyncio.to_thread(self.add_many, list(items))

    def remove(self, id: str) -> bool:
        """Drop the item with this id; False when the buffer does not hold it."""
        with self._lock:
            item = self._by_id.pop(id, None)
            if item is None:
                return False
            self._items.remove(item)
            self._index = None
            return True

    def clear(self) -> None:
        """Forget every item."""
        with self._lock:
            self._items.clear()
            self._by_id.clear()
            self._index, self._rows = None, []

    # Reading

    def recent(self, n: int | None = None) -> list[BufferItem]:
        """The window: the last ``n`` items (default ``max_size``), oldest first."""
        count = self._max_size if n is None else n
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"n must be a whole number >= 0, got {n!r}")
        with self._lock:
            return list(self._items)[len(self._items) - count :] if count else []

    def items(self) -> list[BufferItem]:
        """Every item, oldest first."""
        with self._lock:
            return list(self._items)

    def search(
        self,
        query: str | None = None,
        limit: int = 10,
        filter_metadata: Mapping[str, Any] | None = None,
        query_vector: VectorLike | None = None,
        recency_bias: float | None = None,
    ) -> list[dict[str, Any]]:
        """``search_detailed()`` as plain dicts (id, content, metadata, role, timestamp,
        score, semantic, recency), best first."""
        found = self.search_detailed(query, limit, filter_metadata, query_vector, recency_bias)
        return [
            {
                "id": hit.item.id,
                "content": hit.item.content,
                "metadata": copy.deepcopy(hit.item.metadata),
                "role": hit.item.role,
                "timestamp": hit.item.timestamp,
                "score": hit.score,
                "semantic": hit.semantic,
                "recency": hit.recency,
            }
            for hit in found.hits
        ]

    def search_detailed(
        self,
        query: str | None = None,
        limit: int = 10,
        filter_metadata: Mapping[str, Any] | None = None,
        query_vector: VectorLike | None = None,
        recency_bias: float | None = None,
    ) -> BufferSearch:
        """The ``limit`` best items matching every ``filter_metadata`` key exactly, scored
        ``(1 - recency_bias) x semantic + recency_bias x recency`` when the query has a
        vector (``query_vector`` or the model's), by recency alone otherwise."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a whole number >= 1, got {limit!r}")
        weight = self._recency_bias if recency_bias is None else bias(recency_bias, "recency_bias")
        if filter_metadata is not None and not isinstance(filter_metadata, Mapping):
            raise ValueError("filter_metadata must be a dict")
        vector, reason = search_vector(self.model, query, query_vector, self._vector_dimension)
        with self._lock:
            items = list(self._items)
            similarity = self._similarities(vector) if vector is not None else {}
        last = max(len(items) - 1, 1)
        hits, unembedded = [], 0
        for position, item in enumerate(items):
            if filter_metadata and not metadata_matches(item.metadata, filter_metadata):
                continue
            recency = position / last if len(items) > 1 else 1.0
            unembedded += item.vector is None
            semantic = similarity.get(item.id) if item.vector is not None else None
            score = recency if semantic is None else (1 - weight) * semantic + weight * recency
            hits.append(BufferHit(item=item, score=score, semantic=semantic, recency=recency))
        hits.sort(key=lambda hit: (hit.score, hit.recency), reverse=True)
        method = "semantic" if vector is not None else "recency"
        return BufferSearch(hits=hits[:limit], method=method, reason=reason, unembedded=unembedded)

    async def asearch(
        self,
        query: str | None = None,
        limit: int = 10,
        filter_metadata: Mapping[str, Any] | None = None,
        query_vector: VectorLike | None = None,
        recency_bias: float | None = None,
    ) -> list[dict[str, Any]]:
        """``search()`` in a worker thread, for async callers."""
        return await asyncio.to_thread(
            self.search, query, limit, filter_metadata, query_vector, recency_bias
        )

    async def asearch_detailed(
        self,
        query: str | None = None,
        limit: int = 10,
        filter_metadata: Mapping[str, Any] | None = None,
        query_vector: VectorLike | None = None,
        recency_bias: float | None = None,
    ) -> BufferSearch:
        """``search_detailed()`` in a worker thread, for async callers."""
        return await asyncio.to_thread(
            self.search_detailed, query, limit, filter_metadata, query_vector, recency_bias
        )

    # Serialization

    def to_json(self) -> str:
        """The settings and every item, oldest first (vectors as lists, or null)."""
        with self._lock:
            items = list(self._items)
        return json.dumps(
            {
                "version": SERIAL_VERSION,
                "settings": {
                    "max_size": self._max_size,
                    "buffer_multiplier": self._buffer_multiplier,
                    "vector_dimension": self._vector_dimension,
                    "recency_bias": self._recency_bias,
                },
                "items": [
                    {
                        "id": item.id,
                        "content": item.content,
                        "metadata": item.metadata,
                        "role": item.role,
                        "timestamp": item.timestamp,
                        "vector": None if item.vector is None else item.vector.tolist(),
                    }
                    for item in items
                ],
            }
        )

    @classmethod
    def from_json(cls, data: str, model: Any = None) -> BufferMemory:
        """A buffer from ``to_json()``'s text: same settings, items, ids, order, vectors."""
        try:
            state = json.loads(data)
            buffer = cls(model=model, **state["settings"])
            items = [
                buffer_item(
                    {key: item[key] for key in ITEM_FIELDS},  # a key missing: not serialized
                    dimension=buffer._vector_dimension,
                )
                for item in state["items"]
            ]
        except (TypeError, KeyError, json.JSONDecodeError) as error:
            raise ValueError(f"not a serialized BufferMemory: {error!r}") from error
        buffer._append(items)
        return buffer

    # Internals

    def _append(self, items: list[BufferItem]) -> None:
        with self._lock:
            for item in items:
                previous = self._by_id.pop(item.id, None)
                if previous is not None:
                    self._items.remove(previous)
                    self._index = None
                self._items.append(item)
                self._by_id[item.id] = item
                if len(self._items) > self.capacity:
                    del self._by_id[self._items.popleft().id]
                    self._index = None
                elif self._index is not None and item.vector is not None:
                    self._index.add(item.vector.reshape(1, -1))
                    self._rows.append(item)

    def _similarities(self, vector: np.ndarray) -> dict[str, float]:
        """Cosine similarity of ``vector`` and every embedded item, by item id (call
        with the lock held)."""
        if self._index is None:  # rebuilt lazily: changes other than appends drop it
            self._rows = [item for item in self._items if item.vector is not None]
            self._index = faiss.IndexFlatIP(self._vector_dimension)
            if self._rows:
                vectors = [row.vector for row in self._rows if row.vector is not None]
                self._index.add(np.stack(vectors))
        if not self._rows:
            return {}
        scores, rows = self._index.search(vector.reshape(1, -1), len(self._rows))
        return {
            self._rows[row].id: float(score)
            for score, row in zip(scores[0], rows[0], strict=True)
            if row >= 0
        }
