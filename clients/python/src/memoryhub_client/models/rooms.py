"""Users, rooms, a room's buffer and its working memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memoryhub_client.models.base import Model
from memoryhub_client.models.memories import Memory

__all__ = [
    "BufferHit",
    "BufferSearchResult",
    "BufferSettings",
    "BufferWindow",
    "Room",
    "User",
    "WorkingHit",
    "WorkingItem",
    "WorkingList",
    "WorkingSearchResult",
]


@dataclass(frozen=True, kw_only=True)
class User(Model):
    """An end user, named by your own ``external_id``."""

    __schema__ = ("EndUserOutput",)

    external_id: str
    name: str = ""
    metadata: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Room(Model):
    """A conversation, named by your own ``external_id``; ``settings`` are its own
    overrides of the project's ``buffer`` and ``working`` sections."""

    __schema__ = ("RoomOutput",)

    external_id: str
    name: str = ""
    agent: str | None = None
    world_id: str = ""
    metadata: Any = None
    settings: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class BufferSettings(Model):
    """The room's buffer: a window of ``max_size`` turns, ``capacity`` searched."""

    __schema__ = ("BufferSettingsOutput",)

    max_size: int
    buffer_multiplier: int
    capacity: int
    recency_bias: float
    summarize: bool = True


@dataclass(frozen=True, kw_only=True)
class BufferWindow(Model):
    """The window (last ``max_size`` active turns, oldest first), the newest summary
    and how many turns are not summarized yet."""

    __schema__ = ("BufferOutput",)

    room: str
    settings: BufferSettings
    messages: list[Memory]
    summary: Memory | None = None
    unsummarized: int = 0


@dataclass(frozen=True, kw_only=True)
class BufferHit(Model):
    """``score = (1 - recency_bias) x semantic + recency_bias x recency``."""

    __schema__ = ("BufferHitOutput",)

    memory: Memory
    score: float
    recency: float
    semantic: float | None = None


@dataclass(frozen=True, kw_only=True)
class BufferSearchResult(Model):
    """Buffer search hits, best first; ``method`` is ``semantic`` or ``recency`` (no
    model: ``reason`` says why)."""

    __schema__ = ("BufferSearchOutput",)

    method: str
    results: list[BufferHit]
    recency_bias: float
    searched: int = 0
    unembedded: int = 0
    reason: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class WorkingItem(Model):
    """A short-lived note of a room (in Redis, until ``expires_at``)."""

    __schema__ = ("WorkingItemOutput",)

    id: str
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class WorkingList(Model):
    """A room's live working memory and its size against ``max_bytes``."""

    __schema__ = ("WorkingListOutput",)

    room: str
    results: list[WorkingItem]
    count: int = 0
    bytes: int = 0
    max_bytes: int = 0
    ttl_seconds: int = 0


@dataclass(frozen=True, kw_only=True)
class WorkingHit(Model):
    """A found working-memory item and its cosine similarity (None: by recency)."""

    __schema__ = ("WorkingHitOutput",)

    item: WorkingItem
    score: float | None = None


@dataclass(frozen=True, kw_only=True)
class WorkingSearchResult(Model):
    """Working-memory hits, best first."""

    __schema__ = ("WorkingSearchOutput",)

    method: str
    results: list[WorkingHit]
    searched: int = 0
    embedded: int = 0
    reason: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
