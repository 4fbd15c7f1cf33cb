"""Memories, their revisions and search results."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memoryhub_client.models.base import Model

__all__ = ["Memory", "MemoryCreated", "MemoryRevision", "SearchHit", "SearchResult"]


@dataclass(frozen=True, kw_only=True)
class Memory(Model):
    """One memory: a turn (``message``), ``summary``, ``fact``, ``knowledge`` chunk,
    ``relationship`` or ``goal``. ``user``/``room``/``agent`` are external ids."""

    __schema__ = ("MemoryOutput",)

    id: str
    content: str
    user: str | None = None
    room: str | None = None
    agent: str | None = None
    kind: str = "message"
    role: str = ""
    content_json: Any = None
    metadata: Any = None
    importance: float | None = None
    pinned: bool = False
    importance_score: float | None = None
    confidence: float | None = None
    access_count: int = 0
    accessed_at: datetime | None = None
    status: str = "active"
    embedding_status: str | None = None
    source_ids: Any = None
    document_id: str | None = None
    chunk_index: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class MemoryCreated(Model):
    """The answer to a create: ``created`` is False when the hub already had it (the
    same client id, or ``unique`` and the same text), and then ``memory`` is that one."""

    __schema__ = ("MemoryCreatedOutput",)

    created: bool
    memory: Memory


@dataclass(frozen=True, kw_only=True)
class MemoryRevision(Model):
    """One change of a memory: who (``actor_type``, ``actor``), when, before/after, and
    why beyond the action (``intent``: restore, undo, bulk, review; "" for a plain one)."""

    __schema__ = ("MemoryRevisionOutput",)

    id: int
    memory_id: str
    action: str
    actor_type: str
    actor: str
    intent: str = ""
    before: Any = None
    after: Any = None
    created_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class SearchHit(Model):
    """A found memory: ``score`` ranks it in the mode; ``similarity`` is its cosine
    similarity to the query, 0..1 (None when it was not embedded yet, found by words)."""

    __schema__ = ("SearchHitOutput",)

    memory: Memory
    score: float
    similarity: float | None = None
    explain: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class SearchResult(Model):
    """A search's hits, best first, the mode that ran and each step's time (ms)."""

    __schema__ = ("SearchOutput",)

    mode: str
    results: list[SearchHit]
    timings_ms: dict[str, float] = field(default_factory=dict)
