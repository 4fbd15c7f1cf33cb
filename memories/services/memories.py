"""Writing memories: create (single, batch, `unique`), update, delete, bulk delete.

Every write commits with embedding status ``pending`` and asks a worker to embed
after the commit; nothing here waits on a model. A memory created with its own vector
(client_vectors.py) commits embedded instead.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memories.models import (
    Agent,
    Embedding,
    EndUser,
    Memory,
    MemoryQuerySet,
    MemoryRevision,
    Project,
    Room,
    content_hash,
)
from memories.services.client_vectors import client_vectors_mark
from memories.services.concurrency import (
    conflict_retried,
    deadlock_retried,
    memories_lock,
    owners_share_lock,
)
from memories.services.embedding import embedding_enqueue
from memories.services.erasure import ErasureReceipt, memories_erase
from memories.services.exports import chunked
from memories.services.matching import stored_or_new
from memories.services.revisions import Actor, revision_build
from memories.services.stored import memories_stored


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
    embedding: list[float] | None = None  # the client's own vector (client_vectors.py)


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


def memory_create_batch(
    *, project: Project, items: list[MemoryInput], actor: Actor
) -> list[tuple[Memory, bool]]:
    """Store memories in one transaction; returns (memory, created) in input order.

    Idempotent: an item whose client id the project already has, or a `unique` item
    whose text the same user/room/kind already has, returns the stored memory with
    created=False; a client id the project uses for a different text is a
    MemoryConflict. Client ids are public ids (Memory), scoped to the project. The
    created ones are finished by memories_stored: a ``create`` revision each, then,
    after the commit, the embedding task and memories_created. A created item with its
    own ``embedding`` is stored with that vector and embedded (client_vectors.py): no
    embedding task for it; a retried one keeps the vector it was stored with.

    Concurrent writes of the same ids or `unique` texts (a single create, a batch, an
    import) end the same way: the one that commits second is tried again until it sees
    the first's rows (concurrency.conflict_retried), so it never fails on a unique
    constraint and never stores a second row.
    """
    return conflict_retried(
        lambda: _memory_create_batch(project=project, items=items, actor=actor),
        # the keys an item can collide on: its pk, its public id, its `unique` text
        keys=3 * len(items),
    )


def _memory_create_batch(
    *, project: Project, items: list[MemoryInput], actor: Actor
) -> list[tuple[Memory, bool]]:
    rows = {
        "user": _external_ids_resolve(EndUser, project, {i.user for i in items if i.user}),
        "room": _external_ids_resolve(Room, project, {i.room for i in items if i.room}),
        "agent": _external_ids_resolve(Agent, project, {i.agent for i in items if i.agent}),
    }
    built = [_build(project, item, rows) for item in items]
    results = stored_or_new(project=project, built=built)
    new = [memory for memory, created in results if created]
    given = [
        (memory, item.embedding)
        for (memory, created), item in zip(results, items, strict=True)
        if created and item.embedding is not None
    ]
    vectors = client_vectors_mark(project=project, given=given)
    # inserted in pk order: two batches taking the same ids wait for each other in one
    # order, never each for the other (a deadlock)
    Memory.objects.bulk_create(sorted(new, key=lambda memory: memory.pk))
    Embedding.objects.bulk_create(vectors)
    memories_stored(project=project, memories=new, actor=actor)
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
def memory_update(
    *, memory: Memory, changes: dict[str, Any], actor: Actor, intent: str = ""
) -> Memory:
    """Apply field changes; new content is re-embedded. Records before and after (and
    ``intent``: MemoryRevision.intent)."""
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
        memory=memory,
        action="update",
        actor=actor,
        before=before,
        after=memory.snapshot(),
        intent=intent,
    ).save()
    return memory


RESTORED_FIELDS = ("content", "metadata", "importance")


class RevisionNotRestorable(Exception):
    """The revision is not one of this memory's versions (another memory, a delete)."""


def memory_restore(*, memory: Memory, revision: MemoryRevision, actor: Actor) -> Memory:
    """Write back the content, metadata and importance the memory had right after
    ``revision`` (one of its own), through memory_update: recorded as an update by
    ``actor`` with the intent "restore", re-embedded if the text changes."""
    if revision.memory_id != memory.pk or revision.project_id != memory.project_id:
        raise RevisionNotRestorable("the revision belongs to another memory")
    if revision.after is None:
        raise RevisionNotRestorable("a deletion has no version to restore")
    changes = {name: revision.after[name] for name in RESTORED_FIELDS if name in revision.after}
    return memory_update(memory=memory, changes=changes, actor=actor, intent="restore")


def memories_status_change(
    *, memories: list[Memory], status: str, action: str, actor: Actor, intent: str = ""
) -> None:
    """Give memories a new status (archive, supersede, prune, trash), recording each
    change (with ``intent``). The caller holds them locked in its transaction; nothing
    is deleted."""
    _field_set(memories, "status", status, action=action, actor=actor, intent=intent)


def memories_pin_change(
    *, memories: list[Memory], pinned: bool, actor: Actor, intent: str = ""
) -> None:
    """Pin or unpin memories (never pruned; importance counts as 1) in one statement,
    recording each change (with ``intent``). The caller holds them locked in its
    transaction; memories already so are the caller's to leave out."""
    _field_set(memories, "pinned", pinned, action="update", actor=actor, intent=intent)


def _field_set(
    memories: list[Memory], name: str, value: Any, *, action: str, actor: Actor, intent: str
) -> None:
    """One field of locked memories set in one statement, a revision of each."""
    now = timezone.now()
    before = [memory.snapshot() for memory in memories]
    for memory in memories:
        setattr(memory, name, value)
        memory.updated_at = now
    Memory.objects.bulk_update(memories, [name, "updated_at"])
    MemoryRevision.objects.bulk_create(
        [
            revision_build(
                memory=memory,
                action=action,
                actor=actor,
                before=old,
                after=memory.snapshot(),
                intent=intent,
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


def memory_delete(*, memory: Memory, actor: Actor) -> bool:
    """Erase one memory (memories.services.erasure: its revisions keep no words, what
    derives from it alone goes with it); False if it was gone already (deleted
    meanwhile). Waits for a worker that holds it (an embedding batch,
    a summary archiving it): its vectors are then deleted with it."""
    return deadlock_retried(lambda: _memory_delete(memory, actor))


def _memory_delete(memory: Memory, actor: Actor) -> bool:
    if not owners_share_lock(project_id=memory.project_id):  # the lock order: concurrency.py
        return False
    locked = Memory.objects.select_for_update(of=("self",)).filter(pk=memory.pk).first()
    if locked is None:
        return False
    memories_erase(project_id=locked.project_id, ids=[locked.pk], actor=actor, reason="delete")
    return True


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
) -> ErasureReceipt:
    """Erase every memory of a user, room and/or kind (memories.services.erasure), each
    recorded; returns the receipt (``counts["memories"]``: every memory erased, those
    derived from them included).

    ``status``, ``start`` (created_at >= start) and ``end`` (created_at < end) narrow it.
    The memories are locked first (concurrency.memories_lock: after any worker holding
    one has committed its vectors or summary) and exactly those are recorded and deleted.
    """
    narrowed = {
        "end_user": end_user,
        "room": room,
        "kind__in": kinds or None,
        "status": status or None,
        "created_at__gte": start,
        "created_at__lt": end,
    }
    queryset = Memory.objects.for_project(project).filter(
        **{name: value for name, value in narrowed.items() if value is not None}
    )
    return deadlock_retried(lambda: _memories_delete(project, queryset, end_user, actor))


def _memories_delete(
    project: Project, memories: MemoryQuerySet, end_user: EndUser | None, actor: Actor
) -> ErasureReceipt:
    receipt = ErasureReceipt()
    if not owners_share_lock(project_id=project.pk):  # the lock order: concurrency.py
        return receipt
    if end_user is not None:
        # as the fact workers do before they lock the user's facts (in their own order)
        EndUser.objects.select_for_update(no_key=True).filter(pk=end_user.pk).first()
    reason = "user delete" if end_user is not None else "delete"
    scope = Q(pk__in=memories.values("pk"))  # the later chunks': never restored or unlinked
    for ids in chunked(memories_lock(memories)):
        receipt.add(
            memories_erase(project_id=project.pk, ids=ids, actor=actor, reason=reason, scope=scope)
        )
    return receipt
