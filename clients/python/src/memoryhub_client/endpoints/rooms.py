"""A room's buffer (its recent turns) and working memory (short-lived notes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memoryhub_client.endpoints.base import (
    Call,
    as_count,
    as_model,
    as_nothing,
    body,
    segment,
)
from memoryhub_client.models import (
    BufferSearchResult,
    BufferWindow,
    WorkingItem,
    WorkingList,
    WorkingSearchResult,
)

__all__ = [
    "buffer_search",
    "buffer_window",
    "working_add",
    "working_clear",
    "working_delete",
    "working_list",
    "working_search",
]


def buffer_window(room: str | None = None) -> Call[BufferWindow]:
    """The room's window (last ``max_size`` active turns, oldest first), its newest
    summary and how many turns are not summarized yet."""
    return Call("GET", f"rooms/{segment(room, 'room')}/buffer/", as_model(BufferWindow))


def buffer_search(
    query: str,
    *,
    room: str | None = None,
    limit: int | None = None,
    recency_bias: float | None = None,
    filter_metadata: Mapping[str, Any] | None = None,
) -> Call[BufferSearchResult]:
    """The room's turns in capacity ranked by ``(1 - recency_bias) x semantic +
    recency_bias x recency`` (``limit`` 1-100; ``recency_bias`` default the room's)."""
    payload = body(
        query=query, limit=limit, recency_bias=recency_bias, filter_metadata=filter_metadata
    )
    path = f"rooms/{segment(room, 'room')}/buffer/search/"
    return Call("POST", path, as_model(BufferSearchResult), json=payload)


def working_add(
    content: str,
    *,
    room: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    ttl_seconds: int | None = None,
) -> Call[WorkingItem]:
    """Keep a short-lived note in the room (Redis only; gone after ``ttl_seconds``,
    default the project's). Not sent twice after an attempt that may have reached the
    hub: a second copy would be a second note."""
    payload = body(content=content, metadata=metadata, ttl_seconds=ttl_seconds)
    path = f"rooms/{segment(room, 'room')}/working/"
    return Call("POST", path, as_model(WorkingItem), json=payload)


def working_list(room: str | None = None) -> Call[WorkingList]:
    """The room's live working memory, oldest first."""
    return Call("GET", f"rooms/{segment(room, 'room')}/working/", as_model(WorkingList))


def working_search(
    query: str,
    *,
    room: str | None = None,
    limit: int | None = None,
    filter_metadata: Mapping[str, Any] | None = None,
) -> Call[WorkingSearchResult]:
    """The room's working memory by cosine similarity to ``query``."""
    payload = body(query=query, limit=limit, filter_metadata=filter_metadata)
    path = f"rooms/{segment(room, 'room')}/working/search/"
    return Call("POST", path, as_model(WorkingSearchResult), json=payload)


def working_delete(item_id: str, *, room: str | None = None) -> Call[None]:
    """Drop one working-memory item."""
    path = f"rooms/{segment(room, 'room')}/working/{segment(item_id, 'item_id')}/"
    return Call("DELETE", path, as_nothing, gone_ok=True)


def working_clear(room: str | None = None) -> Call[int]:
    """Drop all of the room's working memory; returns how many items went."""
    path = f"rooms/{segment(room, 'room')}/working/"
    return Call("DELETE", path, as_count("deleted"))
