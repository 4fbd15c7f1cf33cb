"""Re-embedding: memories whose vectors are computed again by the embedding workers
(a vector made by a faulty provider, a failed embedding an operator retries now).

The memory itself does not change: its vectors go, its embedding status becomes
``pending`` and the workers embed it again (keyword search finds it meanwhile). No
revision is recorded, as for any embedding; the caller logs who asked where it keeps
such a log (the admin's LogEntry).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.db import transaction

from memories.models import Embedding, Memory, Project
from memories.services.concurrency import memories_lock
from memories.services.embedding import embedding_enqueue

BATCH = 500  # memories locked and queued per transaction


def memories_reembed(*, project: Project, ids: Iterable[uuid.UUID]) -> int:
    """Queue the project's memories with these pks for embedding again (those already
    waiting for the workers are left as they are); returns how many were queued. Each
    batch is locked (in pk order) and committed on its own."""
    wanted = list(ids)
    queued = 0
    for start in range(0, len(wanted), BATCH):
        with transaction.atomic():
            queued += _batch_reembed(project=project, ids=wanted[start : start + BATCH])
    return queued


def _batch_reembed(*, project: Project, ids: list[uuid.UUID]) -> int:
    batch = Memory.objects.for_project(project).filter(pk__in=ids)
    locked = memories_lock(batch.exclude(embedding_status=Memory.EmbeddingStatus.PENDING))
    if locked:
        locked_reembed(ids=locked)
    return len(locked)


def locked_reembed(*, ids: list[uuid.UUID]) -> None:
    """Queue these memories (locked by the caller, in its transaction) for embedding
    again: their vectors go, their status becomes pending, the workers are woken once
    the transaction commits."""
    # its own vectors go first: the worker would copy them back as its cache
    Embedding.objects.filter(memory_id__in=ids).delete()
    Memory.objects.filter(pk__in=ids).update(
        embedding_status=Memory.EmbeddingStatus.PENDING, embedded_at=None
    )
    transaction.on_commit(embedding_enqueue)
