"""The context builder (the query planner): what an agent puts in its prompt before an
LLM call, fitted to a token budget counted exactly.

Sections, filled in this order (a section's unused budget flows to the next): the
user's synopsis, the facts ranked by similarity and confidence, working-memory notes,
the room's recent turns and newest summary, and older memories found by the project's
default search. A memory or a near-identical text appears once, in its most valuable
section. The rendered text is re-counted, never summed, so it is always within the
budget. Modules: query.py (the query from the last turns), sources.py (each
section's candidates), retrieved.py (the retrieved section's, by search), fitting.py
(budgets, de-duplication, rendering), history.py (what the room's full history would
have cost).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memories.config import BufferSettings, ContextSettings
from memories.models import EmbeddingSpace, EndUser, Project, Room
from memories.services.access import accesses_record
from memories.services.configuration import project_settings_get, room_settings_get
from memories.services.context.derived import fact_sources
from memories.services.context.fitting import (
    Section,
    budgets_split,
    deduplicate,
    fit,
    sections_fill,
)
from memories.services.context.history import history_tokens, savings_record
from memories.services.context.query import query_from_messages
from memories.services.context.retrieved import (
    Retrieval,
    relevance_floor,
    retrieved_candidates,
)
from memories.services.context.sources import (
    Candidate,
    fact_candidates,
    fact_rows,
    history_candidates,
    replaced_texts,
    synopsis_candidates,
    working_candidates,
)
from memories.services.search.query_embedding import QueryEmbedding, query_embedding_start

logger = logging.getLogger(__name__)

__all__ = ["ContextResult", "context_build"]


@dataclass
class ContextResult:
    query: str | None
    sections: list[Section]
    duplicates: list[Candidate]
    prompt: str
    total_tokens: int
    max_tokens: int
    encoding: str
    notes: list[str]
    full_history_tokens: int
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def saved_tokens(self) -> int:
        return max(0, self.full_history_tokens - self.total_tokens)


@dataclass(frozen=True)
class _Build:
    """One context's inputs once resolved: for whom (``end_user``, ``room``), about what
    (``query``), within which budgets (``max_tokens`` split into ``budgets``, counted in
    ``encoding``), the room's ``buffer`` settings and the facts' (similarity, confidence)
    ``weights``; each part records its milliseconds in ``timings``, and what the reader
    should know in ``notes``."""

    end_user: EndUser
    room: Room | None
    query: str | None
    max_tokens: int
    budgets: dict[str, int]
    encoding: str
    buffer: BufferSettings
    weights: tuple[float, float]
    timings: dict[str, float]
    notes: list[str]
    now: datetime | None = None
    agent: str | None = None  # the retrieved memories' agent and world (retrieved.py)
    world: str | None = None


def context_build(
    *,
    end_user: EndUser,
    room: Room | None = None,
    query: str | None = None,
    agent: str | None = None,
    world: str | None = None,
    messages: list[dict[str, Any]] | None = None,
    max_tokens: int | None = None,
    shares: dict[str, float] | None = None,
    encoding: str | None = None,
    similarity_weight: float | None = None,
    confidence_weight: float | None = None,
    record_access: bool = True,
    now: datetime | None = None,
) -> ContextResult:
    """What to put in the prompt for this user (and room) and this query (or the last
    turns of ``messages``), within ``max_tokens`` (default: the project's). Without
    ``record_access`` (the console's preview: an operator looking, not an agent using
    the memories) nothing is recorded: no accesses, no savings in the user's totals.
    ``now``: what a time the query names ("last year") is read against (default: now).
    ``agent``, ``world``: only that agent's, that world's retrieved memories (retrieved.py)."""
    clock = time.perf_counter()
    config = project_settings_get(project=end_user.project)
    settings = config.context
    max_tokens = max_tokens or settings.max_tokens
    if query is None and messages:
        query = query_from_messages(messages) or None
    build = _Build(
        end_user=end_user,
        room=room,
        query=query,
        max_tokens=max_tokens,
        budgets=_budgets(settings, max_tokens, shares),
        encoding=encoding or settings.encoding,
        buffer=room_settings_get(room=room).buffer if room is not None else config.buffer,
        weights=_weights(settings, similarity_weight, confidence_weight),
        timings={},
        notes=[],
        now=now,
        agent=agent,
        world=world,
    )
    # embedded on its thread while the synopsis and the facts are read
    started = _query_embedding_start(build.query, build.notes, build.end_user.project)
    candidates, retrieved = _candidates_gather(build, started)
    result = _fitted(build, candidates, retrieved, record_access=record_access)
    build.timings["total"] = (time.perf_counter() - clock) * 1000
    return result


def _budgets(
    settings: ContextSettings, max_tokens: int, shares: dict[str, float] | None
) -> dict[str, int]:
    """Each section's tokens: the caller's shares, else the project's."""
    return budgets_split(
        max_tokens,
        history=settings.history_share,
        retrieved=settings.retrieved_share,
        shares=shares,
    )


def _weights(
    settings: ContextSettings, similarity: float | None, confidence: float | None
) -> tuple[float, float]:
    """The facts' ranking weights: the caller's, else the project's."""
    return (
        settings.similarity_weight if similarity is None else similarity,
        settings.confidence_weight if confidence is None else confidence,
    )


def _fitted(
    build: _Build, candidates: list[Candidate], retrieved: list[Candidate], *, record_access: bool
) -> ContextResult:
    """The candidates fitted to the budgets and rendered; with ``record_access``, the
    savings and the served memories' accesses recorded."""
    timings, encoding = build.timings, build.encoding
    with _timed(timings, "ranking"):
        budget = build.budgets["retrieved"]
        candidates, below = _relevant(candidates, retrieved, budget, encoding)
        candidates += fact_sources(
            end_user=build.end_user,
            facts=[c for c in candidates if c.section == "facts"],
            retrieved=retrieved,
            budget=budget,
            encoding=encoding,
        )
        kept, duplicates = deduplicate(candidates)
    with _timed(timings, "token_counting"):
        sections = sections_fill(kept, build.budgets, encoding)
        for section in sections:
            section.dropped += [(c, why) for c, why in below if c.section == section.name]
    with _timed(timings, "rendering"):
        prompt, total = fit(sections, build.max_tokens, encoding)
    with _timed(timings, "accounting"):
        full = history_tokens(end_user=build.end_user, room=build.room, encoding=encoding)
        if record_access:
            savings_record(end_user=build.end_user, served=total, full=full)
            served = [c.memory_pk for s in sections if s.name == "retrieved" for c in s.items]
            accesses_record(project=build.end_user.project, memory_ids=served)
    return ContextResult(
        query=build.query,
        sections=sections,
        duplicates=duplicates,
        prompt=prompt,
        total_tokens=total,
        max_tokens=build.max_tokens,
        encoding=encoding,
        notes=build.notes,
        full_history_tokens=full,
        timings_ms=timings,
    )


def _candidates_gather(
    build: _Build, started: QueryEmbedding | None
) -> tuple[list[Candidate], list[Candidate]]:
    """Every section's candidates, each source timed; and the retrieved ones apart,
    searched last: as many as the room the other sections leave can hold. The query's
    vector (``started``) is waited for once the synopsis and the facts are read."""
    end_user, timings = build.end_user, build.timings
    candidates: list[Candidate] = []
    with _timed(timings, "synopsis"):
        candidates += synopsis_candidates(end_user=end_user)
    with _timed(timings, "facts"):
        facts = fact_rows(end_user=end_user)
        replaced = replaced_texts(facts)
    query_vector, space = _query_vector(started, build.notes, timings)
    with _timed(timings, "facts"):
        candidates += fact_candidates(
            facts,
            query_vector=query_vector,
            space_id=space.pk if space is not None else None,
            similarity_weight=build.weights[0],
            confidence_weight=build.weights[1],
            replaced=replaced,
        )
    with _timed(timings, "history"):
        candidates += history_candidates(end_user=end_user, room=build.room, buffer=build.buffer)
    with _timed(timings, "working"):
        working, note = working_candidates(room=build.room, query=build.query)
        candidates += working
        build.notes.extend([note] if note else [])
    with _timed(timings, "retrieval"):
        retrieval = _retrieval(build, candidates, query_vector=query_vector, space=space)
    # the search's own steps, so a slow retrieval says which one took the time
    steps = {step: ms for step, ms in retrieval.timings_ms.items() if step != "total"}
    timings.update({f"retrieval.{step}": round(ms, 2) for step, ms in steps.items()})
    return candidates + retrieval.candidates, retrieval.candidates


def _retrieval(
    build: _Build,
    candidates: list[Candidate],
    *,
    query_vector: np.ndarray | None,
    space: EmbeddingSpace | None,
) -> Retrieval:
    """The retrieved section's candidates, as many as its budget can hold once the
    other sections (``candidates``) have taken what they can."""
    room_left = sections_fill(candidates, build.budgets, build.encoding)[-1].budget
    return retrieved_candidates(
        end_user=build.end_user,
        query=build.query,
        query_vector=query_vector,
        space=space,
        room=room_left,
        encoding=build.encoding,
        now=build.now,
        agent=build.agent,
        world=build.world,
        # the turns the search may find again (facts are other kinds)
        taken=sum(c.section in ("history", "working") for c in candidates),
    )


def _relevant(
    candidates: list[Candidate], retrieved: list[Candidate], budget: int, encoding: str
) -> tuple[list[Candidate], list[tuple[Candidate, str]]]:
    """The candidates without the facts and the project's document chunks less similar
    to the query than the user's search results they would displace (relevance_floor);
    those, with the reason. A chunk ranked first by a search of its own was interleaved
    with the user's first memory whatever its similarity: a console preview spent
    70-80% of its retrieved tokens on chunks of similarity 0.0."""
    floor = relevance_floor(retrieved, budget, encoding)
    if floor is None:
        return candidates, []
    kept, below = [], []
    for candidate in candidates:
        similarity = candidate.parts.get("similarity")
        floored = candidate.section == "facts" or candidate.shared
        if floored and similarity is not None and similarity < floor:
            reason = f"less similar to the query than the memories it would displace ({floor})"
            below.append((candidate, reason))
        else:
            kept.append(candidate)
    return kept, below


def _query_embedding_start(
    query: str | None, notes: list[str], project: Project
) -> QueryEmbedding | None:
    """The query's vector, started on its thread; None without a query or a model."""
    if not query:
        return None
    try:
        return query_embedding_start(query, None, project=project)
    except Exception as error:  # the model is unavailable: keyword search and recency
        _model_unavailable(error, notes)
        return None


def _query_vector(
    started: QueryEmbedding | None, notes: list[str], timings: dict[str, float]
) -> tuple[np.ndarray | None, EmbeddingSpace | None]:
    """The query's vector (normalized) and its space once embedded (``embed_query``: its
    embedding's time, ``embed_wait``: the context's wait for it); (None, None) without
    a query or a model."""
    if started is None:
        return None, None
    try:
        vector = np.asarray(started.wait(timings), dtype=np.float32)
    except Exception as error:
        _model_unavailable(error, notes)
        return None, None
    norm = float(np.linalg.norm(vector))
    return (vector / norm if norm else vector), started.space


def _model_unavailable(error: Exception, notes: list[str]) -> None:
    logger.warning("context: query embedding failed: %s", error)
    notes.append(f"embedding model unavailable ({error}): keyword search and recency only")


@contextmanager
def _timed(timings: dict[str, float], step: str) -> Iterator[None]:
    """The step's milliseconds, added to what an earlier part of it took."""
    start = time.perf_counter()
    yield
    timings[step] = round(timings.get(step, 0.0) + (time.perf_counter() - start) * 1000, 2)
