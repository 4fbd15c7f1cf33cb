"""What a BufferMemory (memories/providers/buffer_memory.py) holds and answers:
``BufferItem``, ``BufferHit``, ``BufferSearch``, and the checks that turn an add's
arguments into an item (its own copy of the metadata, unix-seconds timestamps, a unit
vector) and a search's into its filter. Numpy only, like the buffer itself."""

from __future__ import annotations

import copy
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memories.providers.buffer_vectors import unit_vector

TimestampLike = float | datetime | str
# add()'s arguments, in the order a serialized item is read
ITEM_FIELDS = ("content", "metadata", "role", "timestamp", "vector", "id")
ADD_ARGUMENTS = frozenset(ITEM_FIELDS)


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


def buffer_item(arguments: Mapping[str, Any], *, dimension: int) -> BufferItem:
    """An item from ``add()``'s arguments (``content`` required, the others optional),
    each checked (ValueError naming it); not embedded yet unless a vector is given."""
    content, metadata = arguments["content"], arguments.get("metadata")
    role, identifier = arguments.get("role"), arguments.get("id")
    if not isinstance(content, str):
        raise ValueError(f"content must be a string, got {type(content).__name__}")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValueError(f"metadata must be a dict, got {type(metadata).__name__}")
    if role is not None and not isinstance(role, str):
        raise ValueError(f"role must be a string, got {type(role).__name__}")
    if identifier is not None and (not isinstance(identifier, str) or not identifier):
        raise ValueError(f"id must be a non-empty string, got {identifier!r}")
    stored = copy.deepcopy(dict(metadata or {}))
    if role is None and isinstance(stored.get("role"), str):
        role = stored["role"]
    timestamp = arguments.get("timestamp")
    if timestamp is None:
        timestamp = stored.get("timestamp")
    seconds = time.time() if timestamp is None else timestamp_seconds(timestamp)
    stored["role"], stored["timestamp"] = role, seconds
    vector = arguments.get("vector")
    return BufferItem(
        id=identifier or uuid.uuid4().hex,
        content=content,
        metadata=stored,
        role=role,
        timestamp=seconds,
        vector=None if vector is None else unit_vector(vector, dimension, "vector"),
    )


def positive_int(value: Any, name: str) -> int:
    """``value`` if it is a whole number of at least 1, else ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    return value


def bias(value: Any, name: str) -> float:
    """``value`` as a float if it is a number from 0 to 1, else ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number from 0 to 1, got {value!r}")
    return float(value)


def timestamp_seconds(value: Any) -> float:
    """Unix seconds from a number, a datetime (naive means UTC) or a string holding
    either a number or an ISO 8601 date and time."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.timestamp()
    if isinstance(value, str):
        try:
            return timestamp_seconds(float(value))
        except ValueError:
            pass
        try:
            return timestamp_seconds(datetime.fromisoformat(value))
        except ValueError:
            raise ValueError(f"timestamp is neither a number nor ISO 8601: {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"timestamp must be unix seconds, a datetime or a string: {value!r}")
    return float(value)


def metadata_matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Every wanted key present with an equal value (True is not 1 here)."""
    for key, value in wanted.items():
        if key not in metadata:
            return False
        held = metadata[key]
        if isinstance(held, bool) != isinstance(value, bool) or held != value:
            return False
    return True
