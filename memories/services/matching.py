"""A batch of memories to create matched against what the project stores: the client ids
it already has (retries), the `unique` texts it already holds, and the pk each new
memory gets (memory_create_batch)."""

from __future__ import annotations

import uuid
from typing import Any

from memories.models import Memory, Project


class MemoryConflict(Exception):
    """A client-chosen id is already used by a different memory of the project."""


def _unique_key(memory: Memory) -> tuple[Any, ...]:
    return (memory.end_user_id, memory.room_id, memory.kind, memory.content_hash)


def _existing_unique(project: Project, memories: list[Memory]) -> dict[tuple[Any, ...], Memory]:
    """Already stored `unique` memories with the same text, user, room and kind."""
    wanted = [m for m in memories if m.is_unique]
    if not wanted:
        return {}
    found = Memory.objects.filter(
        project=project,
        is_unique=True,
        content_hash__in={m.content_hash for m in wanted},
    ).select_related("end_user", "room")
    return {_unique_key(m): m for m in found}


def _ids_assign(project: Project, memories: list[Memory]) -> dict[uuid.UUID, Memory]:
    """Choose the pk of each memory with a client id and return the project's stored
    memories with those public ids (the retries).

    A client id is scoped to the project: another project's memory with the same public
    id or pk is never read, named or blocking. The pk is the client id when no memory
    anywhere has it (most memories then have pk == public id), else a fresh uuid4. A
    concurrent writer taking that pk first makes the insert fail; the caller's retry
    then sees it taken."""
    client_ids = {m.public_id for m in memories if m.public_id is not None}
    if not client_ids:
        for memory in memories:
            memory.public_id = memory.pk
        return {}
    stored = (
        Memory.objects.for_project(project)
        .filter(public_id__in=client_ids)
        .select_related("end_user", "room")
    )
    by_id = {memory.public_id: memory for memory in stored}
    wanted = client_ids - by_id.keys()
    taken = set(Memory.objects.filter(pk__in=wanted).values_list("pk", flat=True))
    for memory in memories:
        if memory.public_id is None:
            memory.public_id = memory.pk
        elif memory.public_id not in taken:
            memory.pk = memory.public_id
        # else: keep the fresh uuid4 the model gave it
    return by_id


def stored_or_new(*, project: Project, built: list[Memory]) -> list[tuple[Memory, bool]]:
    """Each built memory paired with created=True, or the stored memory it retries (the
    same client id, or the same `unique` text of the user, room and kind; a repeat
    within the batch too) with created=False. MemoryConflict for a client id the
    project uses for another text."""
    by_id = _ids_assign(project, built)
    by_unique = _existing_unique(project, built)
    results: list[tuple[Memory, bool]] = []
    for memory in built:
        existing = by_id.get(memory.public_id) or (
            by_unique.get(_unique_key(memory)) if memory.is_unique else None
        )
        if existing is not None:
            if (
                existing.public_id == memory.public_id
                and existing.content_hash != memory.content_hash
            ):
                raise MemoryConflict(f"id {memory.public_id} is already used by a different memory")
            results.append((existing, False))
            continue
        by_id[memory.public_id] = memory
        if memory.is_unique:
            by_unique[_unique_key(memory)] = memory
        results.append((memory, True))
    return results
