"""/memories/: store one or a batch, list and count with filters, get, update, delete,
delete by filter, revisions. Keyword arguments are the API's field names; None leaves
a field out (the hub's default applies)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from memoryhub_client.endpoints.base import (
    Call,
    as_count,
    as_model,
    as_models,
    as_nothing,
    as_page,
    body,
    jsonable,
    kinds,
    query,
    segment,
    vector,
)
from memoryhub_client.models import Memory, MemoryCreated, MemoryRevision, Page

__all__ = [
    "memories_count",
    "memories_delete_where",
    "memories_page",
    "memory_add",
    "memory_add_batch",
    "memory_delete",
    "memory_get",
    "memory_revisions_page",
    "memory_update",
]


def memory_add(
    content: str,
    *,
    user: str | None = None,
    room: str | None = None,
    agent: str | None = None,
    kind: str | None = None,
    role: str | None = None,
    content_json: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    importance: float | None = None,
    pinned: bool | None = None,
    confidence: float | None = None,
    unique: bool | None = None,
    created_at: datetime | str | None = None,
    id: str | None = None,
    embedding: Sequence[float] | None = None,
) -> Call[MemoryCreated]:
    """Store one memory (``kind`` message, summary, fact, knowledge, relationship or
    goal; default message). Returns at once; a worker embeds it, unless ``embedding``
    gives its vector (by the project's model, of its dimension): then it is stored
    embedded. ``created`` is False when the hub already had it (the same ``id``, or
    ``unique`` and the same text)."""
    payload = body(
        content=content,
        user=user,
        room=room,
        agent=agent,
        kind=kind,
        role=role,
        content_json=content_json,
        metadata=metadata,
        importance=importance,
        pinned=pinned,
        confidence=confidence,
        unique=unique,
        created_at=created_at,
        id=id,
        embedding=vector(embedding),
    )
    return Call("POST", "memories/", as_model(MemoryCreated), json=payload)


def memory_add_batch(
    memories: Iterable[Mapping[str, Any]],
    *,
    user: str | None = None,
    room: str | None = None,
) -> Call[list[MemoryCreated]]:
    """Store up to 1,000 memories in one transaction, all or nothing; each a dict of
    ``add``'s fields (``embedding`` too). ``user``/``room`` fill the items that name none."""
    items = []
    for item in memories:
        defaults = {"user": user, "room": room}
        given = {**{k: v for k, v in defaults.items() if v is not None}, **item}
        if given.get("embedding") is not None:
            given["embedding"] = vector(given["embedding"])
        items.append(jsonable(given))
    return Call(
        "POST", "memories/batch/", as_models(MemoryCreated, "results"), json={"memories": items}
    )


def memories_page(
    *,
    user: str | None = None,
    room: str | None = None,
    agent: str | None = None,
    world: str | None = None,
    kind: str | Sequence[str] | None = None,
    status: str | None = None,
    category: str | None = None,
    goal_status: str | None = None,
    subject: str | None = None,
    predicate: str | None = None,
    object: str | None = None,
    start: datetime | str | None = None,
    end: datetime | str | None = None,
    order: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[Memory]]:
    """Memories matching the filters (active ones unless ``status`` is given), newest
    first (``order="asc"``: oldest first); ``limit`` 1-500 a page. ``agent``: an agent's
    external id; ``world``: the world_id of the memories' rooms."""
    params = query(
        user=user,
        room=room,
        agent=agent,
        world=world,
        kind=kinds(kind),
        status=status,
        category=category,
        goal_status=goal_status,
        subject=subject,
        predicate=predicate,
        object=object,
        start=start,
        end=end,
        order=order,
        limit=limit,
        cursor=cursor,
    )
    return Call("GET", "memories/", as_page(Memory), params=params)


def memories_count(
    *,
    user: str | None = None,
    room: str | None = None,
    agent: str | None = None,
    world: str | None = None,
    kind: str | Sequence[str] | None = None,
    status: str | None = None,
    category: str | None = None,
    goal_status: str | None = None,
    subject: str | None = None,
    predicate: str | None = None,
    object: str | None = None,
    start: datetime | str | None = None,
    end: datetime | str | None = None,
) -> Call[int]:
    """How many memories match the filters (active ones unless ``status`` is given);
    ``agent`` and ``world`` as for ``memories_page``."""
    params = query(
        user=user,
        room=room,
        agent=agent,
        world=world,
        kind=kinds(kind),
        status=status,
        category=category,
        goal_status=goal_status,
        subject=subject,
        predicate=predicate,
        object=object,
        start=start,
        end=end,
    )
    return Call("GET", "memories/count/", as_count("count"), params=params)


def memories_delete_where(
    *,
    user: str | None = None,
    room: str | None = None,
    kind: str | Sequence[str] | None = None,
    status: str | None = None,
    category: str | None = None,
    goal_status: str | None = None,
    subject: str | None = None,
    predicate: str | None = None,
    object: str | None = None,
    start: datetime | str | None = None,
    end: datetime | str | None = None,
) -> Call[int]:
    """Delete every memory of a room, a user and/or kinds (at least one of the three;
    each deletion recorded). Returns how many went."""
    params = query(
        user=user,
        room=room,
        kind=kinds(kind),
        status=status,
        category=category,
        goal_status=goal_status,
        subject=subject,
        predicate=predicate,
        object=object,
        start=start,
        end=end,
    )
    return Call("DELETE", "memories/", as_count("deleted"), params=params)


def memory_get(memory_id: str) -> Call[Memory]:
    """One memory by id (NotFound when the project has none)."""
    return Call("GET", f"memories/{segment(memory_id, 'memory_id')}/", as_model(Memory))


def memory_update(
    memory_id: str,
    *,
    content: str | None = None,
    content_json: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    role: str | None = None,
    importance: float | None = None,
    pinned: bool | None = None,
    confidence: float | None = None,
    status: str | None = None,
) -> Call[Memory]:
    """Change a memory (the fields given; ``metadata`` replaces the whole object); new
    content is embedded again. The change is recorded as a revision."""
    payload = body(
        content=content,
        content_json=content_json,
        metadata=metadata,
        role=role,
        importance=importance,
        pinned=pinned,
        confidence=confidence,
        status=status,
    )
    path = f"memories/{segment(memory_id, 'memory_id')}/"
    return Call("PATCH", path, as_model(Memory), json=payload)


def memory_delete(memory_id: str) -> Call[None]:
    """Delete a memory (its revisions stay)."""
    path = f"memories/{segment(memory_id, 'memory_id')}/"
    return Call("DELETE", path, as_nothing, gone_ok=True)


def memory_revisions_page(
    memory_id: str, *, limit: int | None = None, cursor: str | None = None
) -> Call[Page[MemoryRevision]]:
    """Every change of a memory, newest first (``limit`` default 500)."""
    path = f"memories/{segment(memory_id, 'memory_id')}/revisions/"
    return Call("GET", path, as_page(MemoryRevision), params=query(limit=limit, cursor=cursor))
