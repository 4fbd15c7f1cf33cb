"""Project-level results: documents and chunks, pruning runs, imports, settings, the
embedding model and its switch."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memoryhub_client.models.base import Model

__all__ = [
    "Chunk",
    "CreatedExisting",
    "Document",
    "EmbeddingChoice",
    "EmbeddingState",
    "EmbeddingSwitch",
    "ImportMemories",
    "ImportResult",
    "ImportVectors",
    "Progress",
    "PruneRun",
    "Settings",
    "SettingsRevision",
]

DOCUMENT_SETTLED = ("done", "failed")


@dataclass(frozen=True, kw_only=True)
class Progress(Model):
    """Chunks embedded (``done``) of ``total``."""

    __schema__ = ("ProgressOutput",)

    done: int
    total: int
    percent: float


@dataclass(frozen=True, kw_only=True)
class Document(Model):
    """An ingested document: ``status`` queued, parsing, chunking, embedding, done or
    failed (``error`` says why); ``duplicate`` is True when an upload found the same
    bytes already there (then this is that document)."""

    __schema__ = ("DocumentOutput", "DocumentUploadOutput")

    id: str
    source: str
    sha256: str
    scope: str
    chunker: str
    progress: Progress
    user: str | None = None
    title: str = ""
    mime_type: str = ""
    size: int = 0
    status: str = "queued"
    error: str = ""
    timings: Any = None
    chunker_settings: Any = None
    version: int = 1
    served_version: int | None = None
    metadata: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    duplicate: bool = False

    @property
    def settled(self) -> bool:
        """True once ingestion ended (done or failed)."""
        return self.status in DOCUMENT_SETTLED


@dataclass(frozen=True, kw_only=True)
class Chunk(Model):
    """A chunk of a document, in order, with its ``citation`` (source, page, heading)."""

    __schema__ = ("ChunkOutput",)

    id: str
    content: str
    citation: Any
    chunk_index: int | None = None
    status: str = "active"
    embedding_status: str = "pending"
    created_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class PruneRun(Model):
    """A pruning run (or dry run): counts per policy; a detail also lists the ``ids``
    per policy (``truncated`` when there were too many to list)."""

    __schema__ = ("PruneRunOutput", "PruneRunDetailOutput")

    id: int
    task: str
    dry_run: bool
    status: str
    counts: dict[str, int]
    error: str = ""
    user: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    ids: dict[str, list[str]] = field(default_factory=dict)
    truncated: bool = False


@dataclass(frozen=True, kw_only=True)
class CreatedExisting(Model):
    __schema__ = ("CreatedExisting",)

    created: int
    existing: int


@dataclass(frozen=True, kw_only=True)
class ImportMemories(Model):
    __schema__ = ("ImportMemories",)

    created: int
    skipped: int


@dataclass(frozen=True, kw_only=True)
class ImportVectors(Model):
    __schema__ = ("ImportVectors",)

    stored: int
    ignored: int


@dataclass(frozen=True, kw_only=True)
class ImportResult(Model):
    """What an import wrote: ids the project already had are ``existing``/``skipped``."""

    __schema__ = ("ImportOutput",)

    users: CreatedExisting
    rooms: CreatedExisting
    agents: CreatedExisting
    memories: ImportMemories
    vectors: ImportVectors
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Settings(Model):
    """The project's configuration by section: effective ``values``, ``defaults``, its
    ``overrides`` and the ``schema`` (type, range, description of each setting)."""

    __schema__ = ("SettingsOutput",)

    values: dict[str, dict[str, Any]]
    defaults: dict[str, dict[str, Any]] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    schema: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class SettingsRevision(Model):
    """One settings change: who, when, before/after."""

    __schema__ = ("SettingsRevisionOutput",)

    actor_type: str
    actor: str
    before: Any = None
    after: Any = None
    created_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class LlmUsage(Model):
    """The project's LLM tokens this calendar month (UTC) against its monthly budget
    (``budget`` 0: no limit). ``spent``: until ``resets_at`` the hub's workers summarize,
    extract facts and write synopses offline (writes never fail)."""

    __schema__ = ("LlmUsageOutput",)

    month: str
    tokens: int
    budget: int
    remaining: int | None = None
    spent: bool = False
    resets_at: datetime | None = None
    llm_configured: bool = False


@dataclass(frozen=True, kw_only=True)
class EmbeddingChoice(Model):
    """A model the project can switch to (``key``: what ``embedding.switch`` takes)."""

    __schema__ = ("ModelOutput",)

    key: str
    provider: str
    model: str
    dimension: int
    description: str = ""


@dataclass(frozen=True, kw_only=True)
class EmbeddingSwitch(Model):
    """A switch of the project's embedding model: ``status`` running (the project still
    serves from the old model), completed, cancelled or failed; ``done`` of ``total``
    memories embedded by the new model, the rate and the seconds left."""

    __schema__ = ("SwitchOutput",)

    id: int
    status: str
    from_model: str
    to_model: str
    done: int
    total: int
    rate_per_second: float | None = None
    eta_seconds: int | None = None
    requested_by: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    old_vectors_kept_until: datetime | None = None
    error: str = ""

    @property
    def settled(self) -> bool:
        """True once the switch ended (completed, cancelled or failed)."""
        return self.status != "running"


@dataclass(frozen=True, kw_only=True)
class EmbeddingState(Model):
    """The model the project's searches use, the models it can switch to, its last switch."""

    __schema__ = ("EmbeddingOutput",)

    model: str
    dimension: int
    models: list[EmbeddingChoice] = field(default_factory=list)
    switch: EmbeddingSwitch | None = None
