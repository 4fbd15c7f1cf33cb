"""Writing memories: create (single, batch, `unique`), update, delete, bulk delete.

Every write commits with embedding status ``pending`` and asks a worker to embed
after the commit; nothing here waits on a model.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memories.models import (
    Agent,
    Embedding,
    EndUser,
    Memory,
    MemoryRevision,
    Project,
    Room,
    content_hash,
)
from memories.services.embedding import embedding_enqueue
from memories.services.revisions import Actor, revision_build
from memories.services.stored import memories_stored


class MemoryConflict(Exception):
    """A client-chosen id is already used by a different memory of the project."""


@dataclass
class MemoryInput:
    """One memory to write, as validated by the API (ids are external ids)."""

    content: str
    kind: str = Memory.Kind.MESSAGE
    user: str | None = None
    room: str | None = None
    agent: str | None = None
    role: str = ""
    content_json: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    importance: float | None = None
    pinned: bool = False
    confidence: float | None = None
    unique: bool = False
    id: uuid.UUID | None = None
    created_at: datetime | None = None
    source_ids: list[str] = field(default_factory=list)  # what a summary or fact derives from
    status: str = Memory.Status.ACTIVE
    document_id: uuid.UUID | None = None  # a knowledge chunk's document and position in it
    chunk_index: int | None = None


def _external_ids_resolve(
    model: type[EndUser] | type[Room] | type[Agent], project: Project, external_ids: set[str]
) -> dict[str, Any]:
    """Map external ids to rows, creating the missing ones (race-safe)."""
    if not external_ids:
        return {}
    manager: Any = model.objects
    found = {
        row.external_id: row
        for row in manager.filter(project=project, external_id__in=external_ids)
    }
    missing = external_ids - found.keys()
    if missing:
        manager.bulk_create(
            [model(project=project, external_id=external_id) for external_id in missing],
            ignore_conflicts=True,
        )
        found.update(
            (row.external_id, row)
            for row in manager.filter(project=project, external_id__in=missing)
        )
    return found


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


def _build(project: Project, item: MemoryInput, rows: dict[str, dict[str, Any]]) -> Memory:
    memory = Memory(
        project=project,
        end_user=rows["user"].get(item.user) if item.user else None,
        room=rows["room"].get(item.room) if item.room else None,
        agent=rows["agent"].get(item.agent) if item.agent else None,
        kind=item.kind,
        role=item.role,
        content=item.content,
        content_json=item.content_json,
        metadata=item.metadata,
        content_hash=content_hash(item.content),
        is_unique=item.unique,
        pinned=item.pinned,
        created_at=item.created_at or timezone.now(),
        source_ids=item.source_ids,
        status=item.status,
        document_id=item.document_id,
        chunk_index=item.chunk_index,
    )
    if item.id is not None:
        memory.public_id = item.id  # the pk is chosen by _ids_assign
    if item.importance is not None:
        memory.importance = item.importance
    if item.confidence is not None:
        memory.confidence = item.confidence
    return memory


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


def memory_create_batch(
    *, project: Project, items: list[MemoryInput], actor: Actor
) -> list[tuple[Memory, bool]]:
    """Store memories in one transaction; returns (memory, created) in input order.

    Idempotent: an item whose client id the project already has, or a `unique` item
    whose text the same user/room/kind already has, returns the stored memory with
    created=False; a client id the project uses for a different text is a
    MemoryConflict. Client ids are public ids (Memory), scoped to the project. The
    created ones are finished by memories_stored: a ``create`` revision each, then,
    after the commit, the embedding task and memories_created.
    """
    try:
        with transaction.atomic():
            return _memory_create_batch(project=project, items=items, actor=actor)
    except IntegrityError:
        # a concurrent writer stored the same unique text or id first: look again
        with transaction.atomic():
            return _memory_create_batch(project=project, items=items, actor=actor)


def _memory_create_batch(
    *, project: Project, items: list[MemoryInput], actor: Actor
) -> list[tuple[Memory, bool]]:
    rows = {
        "user": _external_ids_resolve(EndUser, project, {i.user for i in items if i.user}),
        "room": _external_ids_resolve(Room, project, {i.room for i in items if i.room}),
        "agent": _external_ids_resolve(Agent, project, {i.agent for i in items if i.agent}),
    }
    built = [_build(project, item, rows) for item in items]
    results = _stored_or_new(project, built)
    new = [memory for memory, created in results if created]
    Memory.objects.bulk_create(new)
    memories_stored(project=project, memories=new, actor=actor)
    return results


def _stored_or_new(project: Project, built: list[Memory]) -> list[tuple[Memory, bool]]:
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


UPDATABLE_FIELDS = (
    "content",
    "content_json",
    "metadata",
    "role",
    "importance",
    "pinned",
    "confidence",
    "status",
    "source_ids",  # e.g. a fact confirmed again by another message
)


@transaction.atomic
def memory_update(*, memory: Memory, changes: dict[str, Any], actor: Actor) -> Memory:
    """Apply field changes; new content is re-embedded. Records before and after."""
    memory = Memory.objects.select_for_update().get(pk=memory.pk)
    before = memory.snapshot()
    fields = [
        name
        for name in UPDATABLE_FIELDS
        if name in changes and changes[name] != getattr(memory, name)
    ]
    if not fields:
        return memory
    for name in fields:
        setattr(memory, name, changes[name])
    if "content" in fields:
        memory.content_hash = content_hash(memory.content)
        memory.embedding_status = Memory.EmbeddingStatus.PENDING
        memory.embedded_at = None
        fields += ["content_hash", "embedding_status", "embedded_at"]
        # the old vector no longer describes the text; keyword search still finds it
        Embedding.objects.filter(memory=memory).delete()
        transaction.on_commit(embedding_enqueue)
    memory.save(update_fields=[*fields, "updated_at"])
    revision_build(
        memory=memory, action="update", actor=actor, before=before, after=memory.snapshot()
    ).save()
    return memory


RESTORED_FIELDS = ("content", "metadata", "importance")


class RevisionNotRestorable(Exception):
    """The revision is not one of this memory's versions (another memory, a delete)."""


def memory_restore(*, memory: Memory, revision: MemoryRevision, actor: Actor) -> Memory:
    """Write back the content, metadata and importance the memory had right after
    ``revision`` (one of its own), through memory_update: recorded as an update by
    ``actor``, re-embedded if the text changes."""
    if revision.memory_id != memory.pk or revision.project_id != memory.project_id:
        raise RevisionNotRestorable("the revision belongs to another memory")
    if revision.after is None:
        raise RevisionNotRestorable("a deletion has no version to restore")
    changes = {name: revision.after[name] for name in RESTORED_FIELDS if name in revision.after}
    return memory_update(memory=memory, changes=changes, actor=actor)


def memories_status_change(
    *, memories: list[Memory], status: str, action: str, actor: Actor
) -> None:
    """Give memories a new status (archive, supersede, prune), recording each change.
    The caller holds them locked in its transaction; nothing is deleted."""
    now = timezone.now()
    before = [memory.snapshot() for memory in memories]
    for memory in memories:
        memory.status = status
        memory.updated_at = now
    Memory.objects.bulk_update(memories, ["status", "updated_at"])
    MemoryRevision.objects.bulk_create(
        [
            revision_build(
                memory=memory, action=action, actor=actor, before=old, after=memory.snapshot()
            )
            for memory, old in zip(memories, before, strict=True)
        ]
    )


@transaction.atomic
def memory_supersede(*, memory: Memory, successor: Memory, actor: Actor) -> Memory:
    """Mark ``memory`` superseded by ``successor`` (the link in its metadata), recorded
    as a `supersede` revision; it stays readable in history."""
    memory = Memory.objects.select_for_update().get(pk=memory.pk)
    before = memory.snapshot()
    memory.status = Memory.Status.SUPERSEDED
    memory.metadata = {**memory.metadata, "superseded_by": str(successor.public_id)}
    memory.save(update_fields=["status", "metadata", "updated_at"])
    revision_build(
        memory=memory, action="supersede", actor=actor, before=before, after=memory.snapshot()
    ).save()
    return memory


@transaction.atomic
def memory_delete(*, memory: Memory, actor: Actor) -> None:
    """Delete one memory, keeping its last state in a revision."""
    revision_build(
        memory=memory, action="delete", actor=actor, before=memory.snapshot(), after=None
    ).save()
    memory.delete()


_SNAPSHOT_SQL = "jsonb_build_object({})".format(
    ", ".join(f"'{name}', {name}" for name in Memory.SNAPSHOT_FIELDS)
)


@transaction.atomic
def memories_delete(
    *,
    project: Project,
    actor: Actor,
    end_user: EndUser | None = None,
    room: Room | None = None,
    kinds: list[str] | None = None,
    status: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> int:
    """Delete every memory of a user, room and/or kind, recording each; returns the count.

    ``status``, ``start`` (created_at >= start) and ``end`` (created_at < end) narrow it.
    """
    queryset = Memory.objects.for_project(project)
    if end_user is not None:
        queryset = queryset.filter(end_user=end_user)
    if room is not None:
        queryset = queryset.filter(room=room)
    if kinds:
        queryset = queryset.of_kind(*kinds)
    if status:
        queryset = queryset.filter(status=status)
    if start is not None:
        queryset = queryset.filter(created_at__gte=start)
    if end is not None:
        queryset = queryset.filter(created_at__lt=end)
    ids_sql, params = queryset.values("id").query.sql_with_params()
    with connection.cursor() as cursor:
        # one statement for any number of rows: the revisions are built in SQL
        cursor.execute(
            f"""
            INSERT INTO memories_memoryrevision
                (project_id, memory_id, memory_public_id, action, actor_type, actor, before,
                 after, created_at)
            SELECT project_id, id, public_id, 'delete', %s, %s, {_SNAPSHOT_SQL}, NULL, %s
            FROM memories_memory WHERE id IN ({ids_sql})
            """,
            # the app's clock, as for every other revision: the database's now() is the
            # transaction's start on another host's clock and can sort a delete first
            [actor.type, actor.name, timezone.now(), *params],
        )
    _, per_model = queryset.delete()
    return per_model.get(Memory._meta.label, 0)
