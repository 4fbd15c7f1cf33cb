"""Export of a user's or a room's memories as one JSON document.

The document (FORMAT, VERSION) holds the users, rooms and agents the memories refer to,
in their API representation, and every memory of any kind and status with its ids,
times, provenance and, on request, its vectors. Importing it back
(memories.services.imports) gives the same document on the next export: ids, times and
order are kept.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.db import connection, models, transaction
from django.utils import timezone

from memories.models import Agent, Embedding, EmbeddingSpace, EndUser, Memory, MemoryQuerySet, Room

FORMAT = "memoryhub-export"
VERSION = 1
# rows read or written per round trip: bounds what an export or import holds at once
CHUNK_SIZE = 1000

Progress = Callable[[int], None]
T = TypeVar("T")


def chunked(items: Iterable[T]) -> Iterator[list[T]]:
    """The items in lists of CHUNK_SIZE (the last one shorter)."""
    chunk: list[T] = []
    size = CHUNK_SIZE
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _time(value: datetime | None) -> str | None:
    """A time as the API renders it (ISO 8601, UTC as Z)."""
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat()
    return text[: -len("+00:00")] + "Z" if text.endswith("+00:00") else text


# a memory's identity and text, its weight and state, its provenance and times
MEMORY_FIELDS = (
    *("id", "public_id", "kind", "role", "content", "content_json", "metadata"),
    *("importance", "pinned", "confidence", "access_count", "accessed_at", "status"),
    *("is_unique", "source_ids", "document_id", "chunk_index", "created_at", "updated_at"),
)


def export_memories(*, end_user: EndUser | None = None, room: Room | None = None) -> MemoryQuerySet:
    """The memories an export of this user (all rooms) or this room (all users) holds."""
    if end_user is not None:
        return Memory.objects.for_project(end_user.project_id).filter(end_user=end_user)
    if room is not None:
        return Memory.objects.for_project(room.project_id).filter(room=room)
    raise ValueError("Export a user or a room.")


def end_user_export(
    *, end_user: EndUser, vectors: bool = False, progress: Progress | None = None
) -> dict[str, Any]:
    """The export document of a user: all its memories (every status, every room), the
    rooms and agents they refer to; with ``vectors`` each memory's embedding windows."""
    with _snapshot():
        memories, refs = _memories_export(export_memories(end_user=end_user), vectors, progress)
        refs["users"].add(end_user.pk)
        return _document({"type": "user", "id": end_user.external_id}, memories, refs)


def room_export(
    *, room: Room, vectors: bool = False, progress: Progress | None = None
) -> dict[str, Any]:
    """The export document of a room: all its memories (every user, every status), those
    users and the agents; with ``vectors`` each memory's embedding windows."""
    with _snapshot():
        memories, refs = _memories_export(export_memories(room=room), vectors, progress)
        refs["rooms"].add(room.pk)
        return _document({"type": "room", "id": room.external_id}, memories, refs)


@contextlib.contextmanager
def _snapshot() -> Iterator[None]:
    """One consistent view for the whole export (a REPEATABLE READ transaction): no
    memory refers to a room deleted while the export ran. Inside the caller's
    transaction, that one."""
    if connection.in_atomic_block:
        yield
        return
    with connection.cursor():
        pass  # connect (and health-check) now: SET TRANSACTION must be the first query
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


def _memories_export(
    queryset: MemoryQuerySet, vectors: bool, progress: Progress | None
) -> tuple[list[dict[str, Any]], dict[str, set[Any]]]:
    """The memories' documents, oldest first, and the users, rooms and agents they name."""
    rows = (
        queryset.order_by("created_at", "public_id")  # the same order in every project
        .values(*MEMORY_FIELDS, "end_user_id", "room_id", "agent_id")
        .annotate(
            user_external_id=models.F("end_user__external_id"),
            room_external_id=models.F("room__external_id"),
            agent_external_id=models.F("agent__external_id"),
        )
    )
    refs: dict[str, set[Any]] = {"users": set(), "rooms": set(), "agents": set()}
    memories: list[dict[str, Any]] = []
    for chunk in chunked(rows.iterator(chunk_size=CHUNK_SIZE)):
        windows = _windows_export([row["id"] for row in chunk]) if vectors else {}
        for row in chunk:
            refs["users"].add(row["end_user_id"])
            refs["rooms"].add(row["room_id"])
            refs["agents"].add(row["agent_id"])
            memory = memory_document(row)
            if vectors:
                memory["embeddings"] = windows.get(row["id"], [])
            memories.append(memory)
        if progress is not None:
            progress(len(chunk))
    for ids in refs.values():
        ids.discard(None)
    return memories, refs


def memory_document(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(row["public_id"]),  # the id clients know; the pk is the hub's own
        "user": row["user_external_id"],
        "room": row["room_external_id"],
        "agent": row["agent_external_id"],
        "kind": row["kind"],
        "role": row["role"],
        "content": row["content"],
        "content_json": row["content_json"],
        "metadata": row["metadata"],
        "importance": row["importance"],
        "pinned": row["pinned"],
        "confidence": row["confidence"],
        "access_count": row["access_count"],
        "accessed_at": _time(row["accessed_at"]),
        "status": row["status"],
        "unique": row["is_unique"],
        "source_ids": row["source_ids"],
        "document_id": str(row["document_id"]) if row["document_id"] else None,
        "chunk_index": row["chunk_index"],
        "created_at": _time(row["created_at"]),
        "updated_at": _time(row["updated_at"]),
    }


def _windows_export(memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[dict[str, Any]]]:
    """Each memory's vectors by space: ``[{"space": {...}, "windows": [[...], ...]}]``."""
    spaces = {
        space.pk: {"provider": space.provider, "model": space.model, "dimension": space.dimension}
        for space in EmbeddingSpace.objects.all()
    }
    found: dict[uuid.UUID, dict[int, list[list[float]]]] = {}
    rows = (
        Embedding.objects.filter(memory__in=memory_ids)
        .order_by("memory_id", "space_id", "window")
        .values_list("memory_id", "space_id", "vector")
    )
    for memory_id, space_id, vector in rows:
        found.setdefault(memory_id, {}).setdefault(space_id, []).append([float(x) for x in vector])
    return {
        memory_id: [
            {"space": spaces[space_id], "windows": windows}
            for space_id, windows in by_space.items()
        ]
        for memory_id, by_space in found.items()
    }


def _document(
    scope: dict[str, str], memories: list[dict[str, Any]], refs: dict[str, set[Any]]
) -> dict[str, Any]:
    users = EndUser.objects.filter(pk__in=refs["users"]).order_by("external_id")
    rooms = list(
        Room.objects.filter(pk__in=refs["rooms"]).select_related("agent").order_by("external_id")
    )
    refs["agents"] |= {room.agent_id for room in rooms if room.agent_id}
    agents = Agent.objects.filter(pk__in=refs["agents"]).order_by("external_id")
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": _time(timezone.now()),
        "scope": scope,
        "users": [
            {
                "external_id": user.external_id,
                "name": user.name,
                "metadata": user.metadata,
                "created_at": _time(user.created_at),
                "updated_at": _time(user.updated_at),
            }
            for user in users
        ],
        "rooms": [
            {
                "external_id": room.external_id,
                "name": room.name,
                "agent": room.agent.external_id if room.agent else None,
                "world_id": room.world_id,
                "metadata": room.metadata,
                "settings": room.settings,
                "created_at": _time(room.created_at),
                "updated_at": _time(room.updated_at),
            }
            for room in rooms
        ],
        "agents": [
            {"external_id": a.external_id, "name": a.name, "created_at": _time(a.created_at)}
            for a in agents
        ],
        "memories": memories,
    }
