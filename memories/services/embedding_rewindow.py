"""Re-windowing: the embedded memories whose stored windows (in the space their project
serves from) are not the ones their text gets now (embedded whole by an older version,
or before the window setting changed) embedded again, batch by batch, while search
keeps serving (``manage.py reembed``)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count

from memories.models import Embedding, Memory
from memories.services.embedding_spaces import memory_spaces, space_provider
from memories.services.embedding_store import embeddings_replace


def embedding_rewindow(  # type: ignore[no-untyped-def]
    *, batch_size: int = 64, progress=None
) -> int:
    """Re-embed the embedded memories whose stored windows are not the ones their text
    gets now: long memories embedded before texts were windowed, or after the window
    setting changed. Returns how many were re-embedded.

    Batches of ``batch_size`` memories (in id order) commit one by one, each memory's
    new windows replacing its old ones at once: search keeps serving throughout. A
    memory being changed meanwhile is skipped (the change re-embeds it anyway).
    ``progress`` (optional) is called with each batch's count of memories examined.
    """
    redone = 0
    after = None
    while True:
        with transaction.atomic():
            batch = _embedded_after(after, size=batch_size)
            if not batch:
                return redone
            redone += _stale_replace(batch)
        after = batch[-1].pk
        if progress is not None:
            progress(len(batch))


def _stale_replace(batch: list[Memory]) -> int:
    """Re-embed the memories of ``batch`` whose windows in the space their project
    serves from are not the ones their text gets now; returns how many."""
    spaces = memory_spaces({memory.project_id for memory in batch})
    redone = 0
    for space in {found[0].pk: found[0] for found in spaces.values()}.values():
        provider = space_provider(space)
        mine = [memory for memory in batch if spaces[memory.project_id][0] == space]
        stored = dict(
            Embedding.objects.filter(space=space, memory__in=mine)
            .values("memory")
            .annotate(count=Count("*"))
            .values_list("memory", "count")
        )
        stale = [
            (memory, spans)
            for memory in mine
            if len(spans := provider.windows(memory.content)) != stored.get(memory.pk, 0)
        ]
        if stale:
            memories, windows = (list(part) for part in zip(*stale, strict=True))
            embeddings_replace(memories=memories, windows=windows, space=space, provider=provider)
            redone += len(stale)
    return redone


def _embedded_after(after: Any, *, size: int) -> list[Memory]:
    """The next ``size`` embedded memories after id ``after``, locked (skipping those
    locked by a change)."""
    queryset = Memory.objects.filter(embedding_status=Memory.EmbeddingStatus.DONE)
    if after is not None:
        queryset = queryset.filter(pk__gt=after)
    return list(
        queryset.order_by("pk")
        .select_for_update(skip_locked=True)
        .only("id", "project", "content", "content_hash")[:size]
    )


def embedded_count() -> int:
    return Memory.objects.filter(embedding_status=Memory.EmbeddingStatus.DONE).count()
