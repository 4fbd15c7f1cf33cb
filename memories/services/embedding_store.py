"""A batch of memories' vectors written into a space: each memory's windows embedded
(or copied from a memory of the same project holding the same text), replacing what it
had there (the pipeline, a model switch, re-windowing)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from memories.models import Embedding, EmbeddingSpace, Memory
from memories.providers.embeddings import EmbeddingProvider


def embeddings_replace(
    *,
    memories: list[Memory],
    windows: list[list[tuple[int, int]]],
    space: EmbeddingSpace,
    provider: EmbeddingProvider,
) -> None:
    """Store the vectors of each memory's ``windows`` in ``space``, replacing whatever
    it had there, in the caller's transaction: a reader sees the old windows or the
    new, never a mix. A text the project already holds complete in the space (same
    content hash, same number of windows) is copied, not embedded again: never another
    project's, whose vector a client may have given (an import, a write's `embedding`)."""
    wanted = {
        (m.project_id, m.content_hash): spans for m, spans in zip(memories, windows, strict=True)
    }
    vectors = _cached_windows(space, wanted)
    missing = {
        key: [m.content[a:b] for a, b in spans]
        for m, spans in zip(memories, windows, strict=True)
        if (key := (m.project_id, m.content_hash)) not in vectors
    }
    if missing:
        embedded = iter(provider.embed([text for texts in missing.values() for text in texts]))
        vectors |= {key: [next(embedded) for _ in texts] for key, texts in missing.items()}
    now = timezone.now()
    Embedding.objects.filter(space=space, memory__in=[m.pk for m in memories]).delete()
    Embedding.objects.bulk_create(
        Embedding(memory_id=m.pk, space=space, window=n, vector=vector, created_at=now)
        for m in memories
        for n, vector in enumerate(vectors[(m.project_id, m.content_hash)])
    )


def _cached_windows(
    space: EmbeddingSpace, wanted: dict[tuple[int, str], list[tuple[int, int]]]
) -> dict[tuple[int, str], list[Any]]:
    """The vectors of each wanted (project, text) some memory of that project already
    has in the space, window by window, from a memory holding as many windows as
    wanted."""
    rows = (
        Embedding.objects.filter(
            space=space,
            memory__project_id__in={project for project, _ in wanted},
            memory__content_hash__in=[digest for _, digest in wanted],
        )
        .order_by("memory_id", "window")
        .values_list("memory__project_id", "memory__content_hash", "memory_id", "vector")
    )
    by_memory: dict[tuple[int, str, Any], list[Any]] = {}
    for project, digest, memory_id, vector in rows:
        by_memory.setdefault((project, digest, memory_id), []).append(vector)
    return {
        (project, digest): found
        for (project, digest, _), found in by_memory.items()
        if (project, digest) in wanted and len(found) == len(wanted[(project, digest)])
    }
