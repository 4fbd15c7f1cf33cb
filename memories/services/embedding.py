"""The embedding pipeline: spaces and their indexes, enqueueing, claiming and embedding.

Writes commit with embedding status ``pending`` and call ``embedding_enqueue`` on
commit, which sends the worker's task by name (services never import the tasks
module). At most one embedding task waits in the queue at a time (a Redis flag);
the worker drains every pending memory in batches, claimed with SKIP LOCKED so
several workers can run side by side, and a beat backfill catches whatever a
lost message or a Redis outage left behind.
"""

from __future__ import annotations

import contextlib
import logging
import time
from datetime import timedelta
from functools import cache

import redis
from celery import current_app
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from memories.embeddings import EmbeddingDimensionMismatch, EmbeddingProvider, get_provider
from memories.models import Embedding, EmbeddingSpace, Memory

logger = logging.getLogger(__name__)
QUEUED_FLAG = "memoryhub:embedding:queued"
QUEUED_FLAG_TTL = 60
# the task (memories.tasks) that calls embedding_run in a worker
EMBEDDING_RUN_TASK = "memories.tasks.embedding_run_task"


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=0.5, socket_timeout=1.0)


def embedding_space_get(*, provider: EmbeddingProvider | None = None) -> EmbeddingSpace:
    """The space of the configured model, created with its HNSW index on first use.

    Refuses (EmbeddingDimensionMismatch) a configuration whose dimension differs from
    the one the space was created with: its stored vectors would be unusable.
    """
    provider = provider or get_provider()
    space, created = EmbeddingSpace.objects.get_or_create(
        provider=provider.name, model=provider.model, defaults={"dimension": provider.dimension}
    )
    if space.dimension != provider.dimension:
        raise EmbeddingDimensionMismatch(
            f"embedding space {space} stores {space.dimension}-dimensional vectors but the "
            f"configured model gives {provider.dimension}; configure a new model name to "
            "start a new space, or set EMBEDDING_DIMENSION back"
        )
    if created:
        embedding_space_index_ensure(space=space)
    return space


def embedding_space_index_ensure(*, space: EmbeddingSpace) -> None:
    """Create the space's partial HNSW index on the untyped vector column if missing.

    pgvector indexes a mixed-dimension column through an expression cast to the
    space's dimension, restricted to the space's rows; searches must use the same
    expression and predicate (memories.services.retrieval).
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {space.index_name} ON memories_embedding "
            f"USING hnsw ((vector::vector({int(space.dimension)})) vector_cosine_ops) "
            f"WHERE space_id = {int(space.pk)}"
        )


def embedding_enqueue() -> None:
    """Ask a worker to embed pending memories. Never raises: a write is already durable."""
    try:
        if _redis().set(QUEUED_FLAG, "1", nx=True, ex=QUEUED_FLAG_TTL):
            try:
                current_app.send_task(EMBEDDING_RUN_TASK, retry=False)
            except Exception:
                _redis().delete(QUEUED_FLAG)
                raise
    except Exception as exc:  # noqa: BLE001 - Redis down: the beat backfill embeds it later
        logger.warning("could not enqueue embedding (%s); the backfill will pick it up", exc)


def embedding_process_batch(
    *, space: EmbeddingSpace, provider: EmbeddingProvider, size: int
) -> int:
    """Claim up to ``size`` pending memories, embed them and mark them done; returns the count.

    The claim, the vectors and the status change commit together, so a worker killed
    mid-batch leaves the rows pending for the next one and a re-run does no harm.
    Texts whose vector the space already has (same content hash) are not embedded again.
    """
    with transaction.atomic():
        claimed = list(
            Memory.objects.pending_embedding()
            .order_by("created_at")
            .select_for_update(skip_locked=True)
            .only("id", "content", "content_hash")[:size]
        )
        if not claimed:
            return 0
        hashes = {memory.content_hash for memory in claimed}
        vectors = dict(
            Embedding.objects.filter(space=space, memory__content_hash__in=hashes).values_list(
                "memory__content_hash", "vector"
            )
        )
        missing = {m.content_hash: m.content for m in claimed if m.content_hash not in vectors}
        if missing:
            embedded = provider.embed(list(missing.values()))
            vectors.update(zip(missing.keys(), embedded, strict=True))
        now = timezone.now()
        Embedding.objects.bulk_create(
            [
                Embedding(
                    memory_id=m.pk, space=space, vector=vectors[m.content_hash], created_at=now
                )
                for m in claimed
            ],
            update_conflicts=True,
            unique_fields=["memory", "space"],
            update_fields=["vector", "created_at"],
        )
        Memory.objects.filter(pk__in=[m.pk for m in claimed]).update(
            embedding_status=Memory.EmbeddingStatus.DONE, embedded_at=now
        )
        return len(claimed)


def embedding_run(  # type: ignore[no-untyped-def]
    *, batch_size: int | None = None, max_seconds: float | None = None, progress=None
) -> int:
    """Embed pending memories, batch after batch; returns how many were embedded.

    ``batch_size`` memories are claimed at a time (default EMBEDDING_CLAIM_SIZE).
    With ``max_seconds`` it stops after that long and queues a follow-up run if any
    memory still waits (the worker's tasks do so; commands drain everything).
    ``progress`` (optional) is called with each batch's count, for progress bars.
    """
    with contextlib.suppress(redis.RedisError):
        _redis().delete(QUEUED_FLAG)  # writes from now on enqueue a follow-up run
    provider = get_provider()
    space = embedding_space_get(provider=provider)
    size = batch_size or settings.EMBEDDING["CLAIM_SIZE"]
    total = 0
    started = time.monotonic()
    while done := embedding_process_batch(space=space, provider=provider, size=size):
        total += done
        if progress is not None:
            progress(done)
        if max_seconds is not None and time.monotonic() - started > max_seconds:
            embedding_enqueue()  # the rest in a new task: a fair share for other tasks
            break
    if total:
        elapsed = time.monotonic() - started
        logger.info("embedded %d memories in %.2fs (%.0f/s)", total, elapsed, total / elapsed)
    return total


def embedding_pending_count(*, older_than_seconds: int = 0) -> int:
    """How many memories wait for a vector (optionally only those waiting that long)."""
    queryset = Memory.objects.pending_embedding()
    if older_than_seconds:
        queryset = queryset.filter(
            created_at__lt=timezone.now() - timedelta(seconds=older_than_seconds)
        )
    return queryset.count()
