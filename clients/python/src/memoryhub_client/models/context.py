"""The context (what to put in the prompt) and a user's synopsis."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memoryhub_client.models.base import Model

__all__ = [
    "Context",
    "ContextItem",
    "ContextSection",
    "Synopsis",
    "SynopsisPart",
    "SynopsisRefresh",
]


@dataclass(frozen=True, kw_only=True)
class ContextItem(Model):
    """One line of a section: the memory's id and kind, its rendered text and tokens."""

    __schema__ = ("ContextItemOutput",)

    id: str
    kind: str
    text: str
    score: float
    tokens: int
    why: str = ""


@dataclass(frozen=True, kw_only=True)
class ContextSection(Model):
    """A section (synopsis, facts, working, history, retrieved) within its budget."""

    __schema__ = ("ContextSectionOutput",)

    name: str
    budget: int
    tokens: int
    items: list[ContextItem]
    dropped: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Context(Model):
    """What to put in the prompt: ``prompt`` (``total_tokens <= max_tokens``, counted
    with ``encoding``) and the sections it was built from."""

    __schema__ = ("ContextOutput",)

    prompt: str
    total_tokens: int
    max_tokens: int
    encoding: str
    sections: list[ContextSection]
    query: str | None = None
    notes: list[str] = field(default_factory=list)
    full_history_tokens: int = 0
    saved_tokens: int = 0
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)

    def section(self, name: str) -> ContextSection | None:
        """The section called ``name``, or None when the context has none."""
        return next((section for section in self.sections if section.name == name), None)


@dataclass(frozen=True, kw_only=True)
class SynopsisPart(Model):
    """The identity or context part of a synopsis, with its freshness."""

    __schema__ = ("SynopsisPartOutput",)

    text: str
    freshness: str
    locked: bool = False
    generated_at: datetime | None = None
    age_seconds: float | None = None
    ttl_seconds: float | None = None
    generator: str = ""
    token_count: int = 0
    source_ids: list[str] = field(default_factory=list)
    edited_by: str = ""


@dataclass(frozen=True, kw_only=True)
class Synopsis(Model):
    """A user's synopsis: who they are (``identity``) and what is going on (``context``)."""

    __schema__ = ("SynopsisOutput",)

    user: str
    identity: SynopsisPart
    context: SynopsisPart
    refresh_scheduled: bool = False


@dataclass(frozen=True, kw_only=True)
class SynopsisRefresh(Model):
    """A queued regeneration: the ``parts`` queued and those left alone as ``locked``."""

    __schema__ = ("SynopsisRefreshOutput",)

    user: str
    parts: list[str]
    locked: list[str] = field(default_factory=list)
