"""A room's conversation buffer (MUXI's buffer memory, durable and shared by every
process): the window of recent messages, the newest summary of the older ones, the
search over the messages still in capacity, and which rooms have overflowed.

The messages are the room's ``message`` memories; "unsummarized" means active (the
summarizer in ``synopsis`` archives what it condenses). The search loads the room's
capacity with its vectors into a
:class:`memories.providers.buffer_memory.BufferMemory` and ranks there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import connection

from memories.config import BufferSettings, settings_from_overrides
from memories.models import Memory, Project, Room
from memories.providers.buffer_memory import BufferHit, BufferMemory
from memories.services.configuration import room_settings_get
from memories.services.embedding_vectors import memory_vectors
from memories.services.search.query_embedding import QueryEmbedding, query_embedding_start

logger = logging.getLogger(__name__)


def room_messages(room: Room) -> Any:
    """The room's unsummarized (active) messages, as a queryset."""
    return Memory.objects.filter(
        project_id=room.project_id, room=room, kind=Memory.Kind.MESSAGE, status=Memory.Status.ACTIVE
    )


def room_summary_latest(room: Room) -> Memory | None:
    """The room's newest summary: with the window, an account of the whole room."""
    return (
        Memory.objects.filter(
            project_id=room.project_id,
            room=room,
            kind=Memory.Kind.SUMMARY,
            status=Memory.Status.ACTIVE,
        )
        .order_by("-created_at", "-id")
        .first()
    )


@dataclass
class BufferView:
    """What GET .../buffer/ shows: the window (oldest first) and the newest summary."""

    room: Room
    settings: BufferSettings
    messages: list[Memory]
    summary: Memory | None
    unsummarized: int


def buffer_get(*, room: Room) -> BufferView:
    """The room's window (its last max_size active messages, oldest first), its newest
    summary, and how many messages are unsummarized."""
    config = room_settings_get(room=room).buffer
    messages = room_messages(room).with_external_ids()
    window = list(messages.order_by("-created_at", "-id")[: config.max_size])
    window.reverse()
    return BufferView(
        room=room,
        settings=config,
        messages=window,
        summary=room_summary_latest(room),
        unsummarized=room_messages(room).count(),
    )


@dataclass
class BufferSearchResult:
    """Buffer search hits with how they were scored: ``method`` is "semantic" or
    "recency" (``reason`` says why), ``unembedded`` counts messages scored by recency
    alone because their vectors are not there yet."""

    hits: list[tuple[Memory, BufferHit]]
    method: str
    reason: str | None
    unembedded: int
    searched: int
    recency_bias: float
    timings_ms: dict[str, float] = field(default_factory=dict)


def buffer_search(
    *,
    room: Room,
    query: str,
    limit: int = 10,
    recency_bias: float | None = None,
    filter_metadata: dict[str, Any] | None = None,
) -> BufferSearchResult:
    """The room's messages in capacity ranked by (1 - recency_bias) x semantic +
    recency_bias x recency (recency 1 for the newest, falling linearly to 0 for the
    oldest). Without the model, or for messages not embedded yet, recency alone."""
    clock = time.perf_counter()
    timings: dict[str, float] = {}
    config = room_settings_get(room=room).buffer
    bias = config.recency_bias if recency_bias is None else recency_bias
    started, reason = _query_started(query, room.project)
    messages, vectors = _messages_in_capacity(room, config.capacity, started)
    timings["load"] = (time.perf_counter() - clock) * 1000
    query_vector, reason = _query_vector(started, reason, timings)
    buffer = _buffer_of(
        messages,
        vectors if query_vector is not None else {},
        dimension=len(query_vector) if query_vector is not None else 1,
        config=config,
        bias=bias,
    )
    rank_start = time.perf_counter()
    found = buffer.search_detailed(
        query,
        limit=limit,
        filter_metadata=filter_metadata,
        query_vector=query_vector,
        recency_bias=bias,
    )
    timings["rank"] = (time.perf_counter() - rank_start) * 1000
    by_id = {str(memory.pk): memory for memory in messages}
    timings["total"] = (time.perf_counter() - clock) * 1000
    return BufferSearchResult(
        hits=[(by_id[hit.item.id], hit) for hit in found.hits],
        method=found.method,
        reason=reason if found.method == "recency" else None,
        unembedded=found.unembedded if found.method == "semantic" else 0,
        searched=len(messages),
        recency_bias=bias,
        timings_ms=timings,
    )


def _messages_in_capacity(
    room: Room, capacity: int, started: QueryEmbedding | None
) -> tuple[list[Memory], dict[Any, np.ndarray]]:
    """The room's last ``capacity`` unsummarized messages, oldest first, and their
    vectors in the query's space (none without a query vector on its way)."""
    messages = list(
        room_messages(room)
        .with_external_ids()
        .defer("search_vector")
        .order_by("-created_at", "-id")[:capacity]
    )
    messages.reverse()
    if started is None:
        return messages, {}
    return messages, memory_vectors(memory_ids=[m.pk for m in messages], space_id=started.space.pk)


def _query_vector(
    started: QueryEmbedding | None, reason: str | None, timings: dict[str, float]
) -> tuple[np.ndarray | None, str | None]:
    """The query's vector once embedded, or None and why not (``reason``, when it was
    not started)."""
    if started is None:
        return None, reason
    try:
        return started.wait(timings), reason
    except Exception as error:  # the model failed: the buffer still answers
        logger.warning("buffer search: query embedding failed: %s", error)
        return None, f"embedding model unavailable: {error}"


def _buffer_of(
    messages: list[Memory],
    vectors: dict[Any, np.ndarray],
    *,
    dimension: int,
    config: BufferSettings,
    bias: float,
) -> BufferMemory:
    """The room's messages in capacity, oldest first, as a BufferMemory (with the
    vectors given; none when the query has no vector: then recency alone ranks)."""
    buffer = BufferMemory(
        max_size=config.max_size,
        buffer_multiplier=config.buffer_multiplier,
        vector_dimension=dimension,
        recency_bias=bias,
    )
    for memory in messages:
        buffer.add(
            memory.content,
            memory.metadata,
            role=memory.role or None,
            timestamp=memory.created_at,
            vector=vectors.get(memory.pk),
            id=str(memory.pk),
        )
    return buffer


def _query_started(query: str, project: Project) -> tuple[QueryEmbedding | None, str | None]:
    """The query's vector on its way, or None and why not."""
    if not query.strip():
        return None, "no query text"
    try:
        return query_embedding_start(query, None, project=project), None
    except Exception as error:  # e.g. the model's files are missing or broken
        logger.warning("buffer search: embedding model unavailable: %s", error)
        return None, f"embedding model unavailable: {error}"


# rooms with more unsummarized messages than some capacity; the caller checks each
# room's own capacity (the settings may differ per project and room)
_OVER_SQL = """
    SELECT m.room_id, count(*) FROM memories_memory m
    WHERE m.project_id = %s AND m.room_id = ANY(%s) AND m.kind = 'message'
        AND m.status = 'active'
    GROUP BY m.room_id HAVING count(*) > %s
"""
_ROOMS_OF_SQL = """
    SELECT DISTINCT room_id FROM memories_memory
    WHERE id = ANY(%s) AND kind = 'message' AND room_id IS NOT NULL
"""
_ALL_OVER_SQL = """
    SELECT m.room_id, count(*) FROM memories_memory m
    WHERE m.kind = 'message' AND m.status = 'active' AND m.room_id IS NOT NULL
    GROUP BY m.room_id HAVING count(*) > %s
"""


def rooms_over_capacity(
    *,
    project_id: int | None = None,
    room_ids: Iterable[int] | None = None,
    memory_ids: Iterable[Any] | None = None,
) -> list[int]:
    """Ids of the rooms holding more unsummarized messages than their capacity (with
    summarization on): among the project's ``room_ids`` or the rooms of its
    ``memory_ids``, or every room of every project (the sweep)."""
    with connection.cursor() as cursor:
        if (room_ids is not None or memory_ids is not None) and project_id is None:
            raise ValueError("rooms_over_capacity: room_ids and memory_ids need project_id")
        if room_ids is None and memory_ids is not None:
            cursor.execute(_ROOMS_OF_SQL, [list(memory_ids)])
            room_ids = [row[0] for row in cursor.fetchall()]
        if room_ids is not None:
            room_ids = list(room_ids)
            if not room_ids:
                return []
            cursor.execute(_OVER_SQL, [project_id, room_ids, 1])
        else:
            cursor.execute(_ALL_OVER_SQL, [_smallest_capacity()])
        counts = dict(cursor.fetchall())
    over = []
    for room in Room.objects.filter(pk__in=counts).select_related("project"):
        config = room_settings_get(room=room).buffer
        if config.summarize and counts[room.pk] > config.capacity:
            over.append(room.pk)
    return sorted(over)


def _smallest_capacity() -> int:
    """A lower bound of every room's capacity, so the sweep's count skips the rooms
    that cannot be over it."""
    capacities = [BufferSettings().capacity]
    for overrides in Project.objects.exclude(settings={}).values_list("settings", flat=True):
        capacities.append(settings_from_overrides(overrides).buffer.capacity)
    for room in Room.objects.exclude(settings={}).select_related("project"):
        capacities.append(room_settings_get(room=room).buffer.capacity)
    return min(capacities)
