"""The project's calls: search, context, pruning, import, settings, the embedding model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memoryhub_client.endpoints.base import (
    Call,
    as_model,
    as_page,
    body,
    kinds,
    query,
    required,
    segment,
    vector,
)
from memoryhub_client.models import (
    Context,
    EmbeddingState,
    EmbeddingSwitch,
    ImportResult,
    LlmUsage,
    Page,
    PruneRun,
    SearchResult,
    Settings,
    SettingsRevision,
)

__all__ = [
    "context_build",
    "embedding_get",
    "embedding_switch",
    "embedding_switch_cancel",
    "import_data",
    "prune_preview",
    "prune_run",
    "prune_run_get",
    "prune_runs_page",
    "search",
    "settings_get",
    "settings_revisions_page",
    "settings_update",
]


def search(
    query: str | None = None,
    *,
    embedding: Sequence[float] | None = None,
    mode: str | None = None,
    user: str | None = None,
    room: str | None = None,
    agent: str | None = None,
    world: str | None = None,
    kind: str | Sequence[str] | None = None,
    status: str | Sequence[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    start: datetime | str | None = None,
    end: datetime | str | None = None,
    document: str | None = None,
    k: int | None = None,
    threshold: float | None = None,
    explain: bool | None = None,
) -> Call[SearchResult]:
    """The ``k`` best memories for ``query`` (and/or a raw ``embedding``) in ``mode``
    auto, vector, keyword or hybrid (default the project's); ``metadata`` is a
    containment filter, ``threshold`` a minimum cosine similarity (0..1); ``agent`` an
    agent's external id, ``world`` the world_id of the memories' rooms."""
    payload = body(
        query=query,
        embedding=vector(embedding),
        mode=mode,
        user=user,
        room=room,
        agent=agent,
        world=world,
        kind=kinds(kind),
        status=kinds(status),
        metadata=metadata,
        start=start,
        end=end,
        document=document,
        k=k,
        threshold=threshold,
        explain=explain,
    )
    return Call("POST", "search/", as_model(SearchResult), json=payload)


def context_build(
    query: str | None = None,
    *,
    user: str | None = None,
    room: str | None = None,
    agent: str | None = None,
    world: str | None = None,
    messages: Sequence[Mapping[str, Any]] | None = None,
    max_tokens: int | None = None,
    budgets: Mapping[str, float] | None = None,
    encoding: str | None = None,
    similarity_weight: float | None = None,
    confidence_weight: float | None = None,
    explain: bool | None = None,
) -> Call[Context]:
    """What to put in the prompt for ``user`` (and ``room``) and a ``query`` or the
    conversation's ``messages``: synopsis, facts, working notes, history, retrieved
    memories, within ``max_tokens`` (re-counted: ``total_tokens <= max_tokens``).
    ``agent``/``world`` narrow the retrieved memories to an agent's, a world's rooms'."""
    payload = body(
        user=required(user, "user"),
        room=room,
        agent=agent,
        world=world,
        query=query,
        messages=list(messages) if messages is not None else None,
        max_tokens=max_tokens,
        budgets=budgets,
        encoding=encoding,
        similarity_weight=similarity_weight,
        confidence_weight=confidence_weight,
        explain=explain,
    )
    return Call("POST", "context/", as_model(Context), json=payload)


def prune_preview(*, user: str | None = None) -> Call[PruneRun]:
    """A dry run: the exact ids each pruning policy would take (nothing changes)."""
    return Call("POST", "prune/", as_model(PruneRun), json=body(dry_run=True, user=user))


def prune_run(*, user: str | None = None) -> Call[PruneRun]:
    """Prune now (queued for a worker); follow the run with ``prune.get(run.id)``."""
    payload = body(dry_run=False, user=user)
    return Call("POST", "prune/", as_model(PruneRun), json=payload)


def prune_runs_page(*, limit: int | None = None, cursor: str | None = None) -> Call[Page[PruneRun]]:
    """The project's pruning runs, newest first."""
    params = query(limit=limit, cursor=cursor)
    return Call("GET", "prune/runs/", as_page(PruneRun), params=params)


def prune_run_get(run_id: int | str) -> Call[PruneRun]:
    """One pruning run with the ids per policy."""
    return Call("GET", f"prune/runs/{segment(str(run_id), 'run_id')}/", as_model(PruneRun))


def import_data(document: Mapping[str, Any]) -> Call[ImportResult]:
    """An exported document (``users.export``/``rooms.export``) into this key's project:
    checked whole, then one transaction; ids the project has are skipped, so a retry
    or a second import writes nothing more."""
    return Call("POST", "import/", as_model(ImportResult), json=dict(document))


def settings_get() -> Call[Settings]:
    """The project's configuration: values, defaults, overrides and the schema."""
    return Call("GET", "settings/", as_model(Settings))


def settings_update(changes: Mapping[str, Any]) -> Call[Settings]:
    """Change settings by section: ``{"search": {"keyword_weight": 0.7}}``; a null
    puts a setting back to its default. Validated whole, recorded."""
    return Call("PATCH", "settings/", as_model(Settings), json=dict(changes))


def settings_revisions_page(
    *, limit: int | None = None, cursor: str | None = None
) -> Call[Page[SettingsRevision]]:
    """Every settings change, newest first."""
    params = query(limit=limit, cursor=cursor)
    return Call("GET", "settings/revisions/", as_page(SettingsRevision), params=params)


def embedding_get() -> Call[EmbeddingState]:
    """The project's embedding model, the models it can switch to and its last switch."""
    return Call("GET", "embedding/", as_model(EmbeddingState))


def embedding_switch(model: str) -> Call[EmbeddingSwitch]:
    """Switch the project to another embedding model (a key of ``embedding.get().models``)
    in the background, without downtime; follow it with ``embedding.get().switch``."""
    return Call("POST", "embedding/switch/", as_model(EmbeddingSwitch), json=body(model=model))


def embedding_switch_cancel() -> Call[EmbeddingSwitch]:
    """Cancel the running switch: the project keeps its model."""
    return Call("POST", "embedding/switch/cancel/", as_model(EmbeddingSwitch))


def llm_usage_get() -> Call[LlmUsage]:
    """The project's LLM tokens this month against its ``llm.monthly_token_budget``."""
    return Call("GET", "llm-usage/", as_model(LlmUsage))
