"""/users/ and /rooms/: create, list, get, update, delete, export; a user's facts and
synopsis. Users and rooms are named by your own external ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memoryhub_client.endpoints.base import (
    Call,
    as_count,
    as_model,
    as_page,
    as_raw,
    body,
    kinds,
    query,
    required,
    segment,
)
from memoryhub_client.models import Memory, Page, Room, Synopsis, SynopsisRefresh, User

__all__ = [
    "room_create",
    "room_delete",
    "room_export",
    "room_get",
    "room_update",
    "rooms_page",
    "user_create",
    "user_delete",
    "user_export",
    "user_facts_page",
    "user_get",
    "user_synopsis",
    "user_synopsis_refresh",
    "user_synopsis_update",
    "user_update",
    "users_page",
]


def user_create(
    external_id: str, *, name: str | None = None, metadata: Mapping[str, Any] | None = None
) -> Call[User]:
    """Create a user; an existing ``external_id`` returns that user unchanged."""
    payload = body(external_id=external_id, name=name, metadata=metadata)
    return Call("POST", "users/", as_model(User), json=payload)


def users_page(
    *, external_id: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[User]]:
    """The project's users by external id."""
    params = query(external_id=external_id, limit=limit, cursor=cursor)
    return Call("GET", "users/", as_page(User), params=params)


def user_get(external_id: str) -> Call[User]:
    return Call("GET", f"users/{segment(external_id, 'external_id')}/", as_model(User))


def user_update(
    external_id: str, *, name: str | None = None, metadata: Mapping[str, Any] | None = None
) -> Call[User]:
    """Change a user's name and/or metadata (replaced whole)."""
    path = f"users/{segment(external_id, 'external_id')}/"
    return Call("PATCH", path, as_model(User), json=body(name=name, metadata=metadata))


def user_delete(external_id: str) -> Call[int]:
    """Delete the user and all their memories (each recorded); returns how many went."""
    path = f"users/{segment(external_id, 'external_id')}/"
    return Call("DELETE", path, as_count("deleted"))


def user_export(user: str | None = None, *, vectors: bool | None = None) -> Call[dict[str, Any]]:
    """Everything remembered of a user as one JSON document (``memoryhub-export``),
    which ``import_data`` takes back; ``vectors=True`` adds the vectors."""
    path = f"users/{segment(user, 'user')}/export/"
    return Call("GET", path, as_raw, params=query(vectors=vectors))


def user_facts_page(
    user: str | None = None,
    *,
    kind: str | Sequence[str] = "fact",
    category: str | None = None,
    status: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[Memory]]:
    """What the hub knows about a user: their ``fact`` memories (``kind`` may add
    ``relationship`` and ``goal``), newest first, by ``category`` if given."""
    params = query(
        user=required(user, "user"),
        kind=kinds(kind),
        category=category,
        status=status,
        limit=limit,
        cursor=cursor,
    )
    return Call("GET", "memories/", as_page(Memory), params=params)


def user_synopsis(user: str | None = None, *, refresh: bool | None = None) -> Call[Synopsis]:
    """The user's synopsis (identity and context parts with their freshness);
    ``refresh=True`` queues a regeneration of the stale parts."""
    path = f"users/{segment(user, 'user')}/synopsis/"
    return Call("GET", path, as_model(Synopsis), params=query(refresh=refresh))


def user_synopsis_update(
    user: str | None = None,
    *,
    identity: Mapping[str, Any] | None = None,
    context: Mapping[str, Any] | None = None,
) -> Call[Synopsis]:
    """Edit and/or lock a part: ``identity={"text": "...", "locked": True}``."""
    path = f"users/{segment(user, 'user')}/synopsis/"
    return Call("PATCH", path, as_model(Synopsis), json=body(identity=identity, context=context))


def user_synopsis_refresh(
    user: str | None = None, *, parts: Sequence[str] | None = None
) -> Call[SynopsisRefresh]:
    """Queue a regeneration of ``parts`` (identity, context; default both)."""
    path = f"users/{segment(user, 'user')}/synopsis/refresh/"
    payload = body(parts=list(parts) if parts is not None else None)
    return Call("POST", path, as_model(SynopsisRefresh), json=payload)


def room_create(
    external_id: str,
    *,
    name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    agent: str | None = None,
    world_id: str | None = None,
) -> Call[Room]:
    """Create a room; an existing ``external_id`` returns that room unchanged."""
    payload = body(
        external_id=external_id, name=name, metadata=metadata, agent=agent, world_id=world_id
    )
    return Call("POST", "rooms/", as_model(Room), json=payload)


def rooms_page(
    *, external_id: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[Room]]:
    """The project's rooms by external id."""
    params = query(external_id=external_id, limit=limit, cursor=cursor)
    return Call("GET", "rooms/", as_page(Room), params=params)


def room_get(external_id: str) -> Call[Room]:
    return Call("GET", f"rooms/{segment(external_id, 'external_id')}/", as_model(Room))


def room_update(
    external_id: str,
    *,
    name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    world_id: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Call[Room]:
    """Change a room; ``settings`` are its own ``buffer``/``working`` settings over the
    project's: ``{"buffer": {"max_size": 20}}`` (a null puts one back)."""
    path = f"rooms/{segment(external_id, 'external_id')}/"
    payload = body(name=name, metadata=metadata, world_id=world_id, settings=settings)
    return Call("PATCH", path, as_model(Room), json=payload)


def room_delete(external_id: str) -> Call[int]:
    """Delete the room, its memories (each recorded) and its working memory."""
    path = f"rooms/{segment(external_id, 'external_id')}/"
    return Call("DELETE", path, as_count("deleted"))


def room_export(room: str | None = None, *, vectors: bool | None = None) -> Call[dict[str, Any]]:
    """Everything in a room (of every user) as one JSON document for ``import_data``."""
    path = f"rooms/{segment(room, 'room')}/export/"
    return Call("GET", path, as_raw, params=query(vectors=vectors))
