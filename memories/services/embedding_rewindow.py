"""Re-windowing: the embedded memories whose stored windows are not the ones their text
gets now (embedded whole by an older version, or before the window setting changed)
embedded again, batch by batch, while search keeps serving (``manage.py reembed``)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count

from memories.models import Embedding, EmbeddingSpace, Memory
from memories.providers.embeddings import get_provider
from memories.services.embedding import embedding_space_get, embeddings_replace


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
    provider = get_provider()
    space = embedding_space_get(provider=provider)
    redone = 0
    after = None
    while True:
        with transaction.atomic():
            batch = _embedded_after(after, space=space, size=batch_size)
            if not batch:
                return redone
            stale = [
                (memory, spans)
                for memory, stored in batch
                if len(spans := provider.windows(memory.content)) != stored
            ]
            if stale:
                memories, windows = (list(part) for part in zip(*stale, strict=True))
                embeddings_replace(
                    memories=memories, windows=windows, space=space, provider=provider
                )
        redone += len(stale)
        after = batch[-1][0].pk
        if progress is not None:
            progress(len(batch))


def _embedded_after(after: Any, *, space: EmbeddingSpace, size: int) -> list[tuple[Memory, int]]:
    """The next ``size`` embedded memories after id ``after``, locked (skipping those
    locked by a change), each with the number of its windows in ``space``."""
    queryset = Memory.objects.filter(embedding_status=Memory.EmbeddingStatus.DONE)
    if after is not None:
        queryset = queryset.filter(pk__gt=after)
    memories = list(
        queryset.order_by("pk")
        .select_for_update(skip_locked=True)
        .only("id", "content", "content_hash")[:size]
    )
    stored = dict(
        Embedding.objects.filter(space=space, memory__in=memories)
        .values("memory")
        .annotate(count=Count("*"))
        .values_list("memory", "count")
    )
    return [(memory, stored.get(memory.pk, 0)) for memory in memories]


def embedded_count() -> int:
    return Memory.objects.filter(embedding_status=Memory.EmbeddingStatus.DONE).count()
