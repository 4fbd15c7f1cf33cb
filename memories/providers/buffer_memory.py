"""MUXI's buffer memory, standalone: a FIFO of recent items searched by
``(1 - recency_bias) x semantic + recency_bias x recency`` with FAISS.

Importable without a database or Django (numpy and faiss only), so the server, the
benchmarks and an agent process can all hold one. ``max_size`` is the window an agent
reads (``recent()``); ``max_size x buffer_multiplier`` is what the buffer keeps and
searches. Names follow MUXI's ``ShortTermMemory`` (muxi-ai/runtime, short_term.py).
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import faiss
import numpy as np

VectorLike = Sequence[float] | np.ndarray
TimestampLike = float | datetime | str
ADD_ARGUMENTS = frozenset({"content", "metadata", "role", "timestamp", "vector", "id"})
SERIAL_VERSION = 1


class EmbeddingModel(Protocol):
    """What the buffer needs from a model: one text in, one vector out. A model may also
    have ``embed_batch(texts) -> vectors`` (see ``BatchEmbeddingModel``), which
    ``add_many`` uses for all its texts at once."""

    def embed(self, text: str) -> VectorLike: ...


class BatchEmbeddingModel(EmbeddingModel, Protocol):
    def embed_batch(self, texts: list[str]) -> Sequence[VectorLike] | np.ndarray: ...


# eq=False: the vector is an array, whose == is element-wise; items compare by identity.
@dataclass(frozen=True, eq=False)
class BufferItem:
    """One remembered item. ``metadata`` is the buffer's own copy and also holds
    ``role`` and ``timestamp``; ``vector`` is read-only, float32 and unit length."""

    id: str
    content: str
    metadata: dict[str, Any]
    role: str | None
    timestamp: float
    vector: np.ndarray | None


@dataclass(frozen=True)
class BufferHit:
    """A search result: ``score`` orders the results; ``semantic`` is the cosine
    similarity (None when not scored semantically); ``recency`` runs linearly from 0.0
    (the oldest item in the buffer) to 1.0 (the newest)."""

    item: BufferItem
    score: float
    semantic: float | None
    recency: float


@dataclass(frozen=True)
class BufferSearch:
    """Hits, best first, and how they were found: ``method`` is "semantic" or "recency";
    ``reason`` says why recency was used; ``unembedded`` counts the candidates (items
    passing the filter) without a vector, scored by recency alone."""

    hits: list[BufferHit]
    method: str
    reason: str | None
    unembedded: int


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
        self._max_size = _positive_int(max_size, "max_size")
        self._buffer_multiplier = _positive_int(buffer_multiplier, "buffer_multiplier")
        self._vector_dimension = _positive_int(vector_dimension, "vector_dimension")
        self._recency_bias = _bias(recency_bias, "recency_bias")
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
        item = self._draft(content, metadata, role, timestamp, vector, id)
        if item.vector is None and self.model is not None:
            item = replace(item, vector=self._embed_one(content))
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
            drafts.append(
                self._draft(
                    arguments["content"],
                    arguments.get("metadata"),
                    arguments.get("role"),
                    arguments.get("timestamp"),
                    arguments.get("vector"),
                    arguments.get("id"),
                )
            )
        missing = [n for n, item in enumerate(drafts) if item.vector is None]
        if missing and self.model is not None:
            vectors = self._embed_many([drafts[n].content for n in missing])
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
        bias = self._recency_bias if recency_bias is None else _bias(recency_bias, "recency_bias")
        if filter_metadata is not None and not isinstance(filter_metadata, Mapping):
            raise ValueError("filter_metadata must be a dict")
        vector, reason = self._query_vector(query, query_vector)
        with self._lock:
            items = list(self._items)
            similarity = self._similarities(vector) if vector is not None else {}
        last = max(len(items) - 1, 1)
        hits, unembedded = [], 0
        for position, item in enumerate(items):
            if filter_metadata and not _matches(item.metadata, filter_metadata):
                continue
            recency = position / last if len(items) > 1 else 1.0
            unembedded += item.vector is None
            semantic = similarity.get(item.id) if item.vector is not None else None
            score = recency if semantic is None else (1 - bias) * semantic + bias * recency
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
                buffer._draft(
                    item["content"],
                    item["metadata"],
                    item["role"],
                    item["timestamp"],
                    item["vector"],
                    item["id"],
                )
                for item in state["items"]
            ]
        except (TypeError, KeyError, json.JSONDecodeError) as error:
            raise ValueError(f"not a serialized BufferMemory: {error!r}") from error
        buffer._append(items)
        return buffer

    # Internals

    def _draft(
        self,
        content: Any,
        metadata: Any,
        role: Any,
        timestamp: Any,
        vector: Any,
        id: Any,
    ) -> BufferItem:
        if not isinstance(content, str):
            raise ValueError(f"content must be a string, got {type(content).__name__}")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ValueError(f"metadata must be a dict, got {type(metadata).__name__}")
        if role is not None and not isinstance(role, str):
            raise ValueError(f"role must be a string, got {type(role).__name__}")
        if id is not None and (not isinstance(id, str) or not id):
            raise ValueError(f"id must be a non-empty string, got {id!r}")
        stored = copy.deepcopy(dict(metadata or {}))
        if role is None and isinstance(stored.get("role"), str):
            role = stored["role"]
        if timestamp is None:
            timestamp = stored.get("timestamp")
        seconds = time.time() if timestamp is None else _seconds(timestamp)
        stored["role"], stored["timestamp"] = role, seconds
        return BufferItem(
            id=id or uuid.uuid4().hex,
            content=content,
            metadata=stored,
            role=role,
            timestamp=seconds,
            vector=None if vector is None else _unit(vector, self._vector_dimension, "vector"),
        )

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

    def _query_vector(
        self, query: str | None, query_vector: VectorLike | None
    ) -> tuple[np.ndarray | None, str | None]:
        if query_vector is not None:
            return _unit(query_vector, self._vector_dimension, "query_vector"), None
        if query is not None and not isinstance(query, str):
            raise ValueError(f"query must be a string, got {type(query).__name__}")
        if not query or not query.strip():
            return None, "no query"
        model = self.model
        if model is None:
            return None, "no embedding model"
        try:
            return _unit(model.embed(query), self._vector_dimension, "the model's vector"), None
        except Exception as error:
            return None, f"model failed: {error}"

    def _embed_one(self, text: str) -> np.ndarray | None:
        try:
            return _unit(self.model.embed(text), self._vector_dimension, "the model's vector")
        except Exception:  # an item without a vector is still found by recency
            return None

    def _embed_many(self, texts: list[str]) -> list[np.ndarray | None]:
        if not hasattr(self.model, "embed_batch"):
            return [self._embed_one(text) for text in texts]
        try:
            vectors = list(self.model.embed_batch(texts))
        except Exception:
            return [None] * len(texts)
        if len(vectors) != len(texts):
            return [None] * len(texts)
        embedded: list[np.ndarray | None] = []
        for vector in vectors:
            try:
                embedded.append(_unit(vector, self._vector_dimension, "the model's vector"))
            except ValueError:
                embedded.append(None)
        return embedded


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    return value


def _bias(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number from 0 to 1, got {value!r}")
    return float(value)


def _unit(value: Any, dimension: int, name: str) -> np.ndarray:
    """``value`` as a read-only float32 unit vector of ``dimension`` numbers (a single
    row, shape (1, dimension), is accepted too)."""
    try:
        vector = np.array(value, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} is not a vector of numbers: {error}") from error
    if vector.ndim == 2 and vector.shape[0] == 1:
        vector = vector[0]
    if vector.shape != (dimension,):
        raise ValueError(f"{name} must have {dimension} numbers, got shape {vector.shape}")
    if not np.isfinite(vector).all():
        raise ValueError(f"{name} has a number that is not finite")
    norm = float(np.linalg.norm(vector))
    if norm == 0:
        raise ValueError(f"{name} is all zeros")
    if abs(norm - 1) > 1e-6:  # already unit length: keep the numbers as they are
        vector = (vector / norm).astype(np.float32)
    vector.flags.writeable = False
    return vector


def _seconds(value: Any) -> float:
    """Unix seconds from a number, a datetime (naive means UTC) or a string holding
    either a number or an ISO 8601 date and time."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.timestamp()
    if isinstance(value, str):
        try:
            return _seconds(float(value))
        except ValueError:
            pass
        try:
            return _seconds(datetime.fromisoformat(value))
        except ValueError:
            raise ValueError(f"timestamp is neither a number nor ISO 8601: {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"timestamp must be unix seconds, a datetime or a string: {value!r}")
    return float(value)


def _matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Every wanted key present with an equal value (True is not 1 here)."""
    for key, value in wanted.items():
        if key not in metadata:
            return False
        held = metadata[key]
        if isinstance(held, bool) != isinstance(value, bool) or held != value:
            return False
    return True
