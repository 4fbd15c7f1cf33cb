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
import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import redis
from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from memories.models import EmbeddingSpace, Memory, Project
from memories.providers.embeddings import (
    EmbeddingError,
    EmbeddingProvider,
    get_provider,
    torch_threads_set,
)
from memories.providers.redis_client import redis_client
from memories.providers.task_sending import TaskNotSent, sending_failed, sending_paused, task_send
from memories.services.embedding_spaces import (
    embedding_space_get,
    embedding_space_index_ensure,
    memory_spaces,
    space_provider,
)
from memories.services.embedding_store import embeddings_replace

logger = logging.getLogger(__name__)
QUEUED_FLAG = "memoryhub:embedding:queued"
QUEUED_FLAG_TTL = 60
# the task (memories.tasks) that calls embedding_run in a worker
EMBEDDING_RUN_TASK = "memories.tasks.embedding_run_task"


def _redis() -> redis.Redis:
    # not paused by a request's failure: the queued flag and the heartbeats say what
    # Redis holds now
    return redis_client(pausing=False)


def embedding_model_check() -> None:
    """Load the embedding model and refuse to start if its dimension mismatches the space
    (EmbeddingDimensionMismatch); make sure the space's index exists.

    Runs in a worker's main process before the pool forks (memoryhub/celery.py). torch
    runs on one thread here: an OpenMP thread pool created before fork() hangs the
    forked children.
    """
    provider = get_provider()
    if hasattr(provider, "load"):
        provider.load()
        torch_threads_set(1)
    vector = provider.embed(["MemoryHub start-up check"])  # loads the model, checks its dimension
    space = embedding_space_get(provider=provider)
    embedding_space_index_ensure(space=space)
    logger.info("embedding model ready: %s, %d dimensions", space, vector.shape[1])


def embedding_enqueue() -> None:
    """Ask a worker to embed pending memories. Never raises: a write is already durable,
    and with Redis down (task_sending.py) the beat backfill embeds it later."""
    if sending_paused():
        return
    try:
        if _redis().set(QUEUED_FLAG, "1", nx=True, ex=QUEUED_FLAG_TTL):
            try:
                task_send(EMBEDDING_RUN_TASK)
            except TaskNotSent:
                _redis().delete(QUEUED_FLAG)
    except redis.RedisError as error:
        sending_failed(error, "the embedding task (its queued flag)")


def embedding_process_batch(
    *,
    size: int,
    memory_ids: list[Any] | None = None,
    space: EmbeddingSpace | None = None,
    provider: EmbeddingProvider | None = None,
) -> int:
    """Claim up to ``size`` pending memories, embed them and mark them done; returns the count.

    Each memory is embedded into its project's space, and also into the target of its
    project's running model switch (embedding_spaces.memory_spaces); with ``space`` and
    ``provider`` (tests, benches) every one into that space by that provider.

    The claim, the vectors and the status change commit together, so a worker killed
    mid-batch leaves the rows pending for the next one and a re-run does no harm. The
    claimed rows stay locked until then: a delete of one of them (or of its user, room or
    project) waits for the batch and deletes its vectors with it (the lock order of
    memories/services/concurrency.py), so no row is gone under the write; a row a delete
    holds is not claimed. A
    batch takes at most WINDOWS_PER_MEMORY x ``size`` windows (at least one memory):
    long texts make smaller batches; the rest stay pending for the next.

    With ``memory_ids`` only those memories are claimed (a document's staged chunks,
    which the ingestion pipeline embeds); without, every pending memory but the staged
    ones, so that a long document never stands in front of the messages.
    """
    with transaction.atomic():
        claimed = list(
            _claimable(memory_ids)
            .order_by("created_at")
            .select_for_update(skip_locked=True)
            .only("id", "project", "content", "content_hash")[:size]
        )
        if not claimed:
            return 0
        # read after the claim: see memory_spaces
        if space is not None and provider is not None:
            spaces = {m.project_id: [space] for m in claimed}
        else:
            spaces = memory_spaces({m.project_id for m in claimed})
        claimed = _spaces_fill(claimed, spaces, provider, budget=WINDOWS_PER_MEMORY * size)
        Memory.objects.filter(pk__in=[m.pk for m in claimed]).update(
            embedding_status=Memory.EmbeddingStatus.DONE, embedded_at=timezone.now()
        )
        return len(claimed)


def _providers_made(
    spaces: list[EmbeddingSpace], provider: EmbeddingProvider | None
) -> tuple[dict[int, EmbeddingProvider], dict[int, EmbeddingError]]:
    """Each space's provider (or ``provider``) by space id, made and loaded here, and
    the error of each space whose model could not be (not configured, not installed,
    broken)."""
    providers: dict[int, EmbeddingProvider] = {}
    failed: dict[int, EmbeddingError] = {}
    for space in spaces:
        try:
            providers[space.pk] = provider or space_provider(space)
            providers[space.pk].windows("")
        except EmbeddingError as broken:
            failed[space.pk] = broken
    return providers, failed


def _spaces_fill(
    claimed: list[Memory],
    spaces: dict[int, list[EmbeddingSpace]],
    provider: EmbeddingProvider | None,
    *,
    budget: int,
) -> list[Memory]:
    """Embed the first of ``claimed`` whose windows (in the space each is served from)
    fit ``budget`` into each of their project's ``spaces``, by each space's provider
    (or ``provider``); returns the memories embedded into the space they are served
    from (those of a space whose model failed stay pending, and that space is paused:
    _claimable; a switch's target that failed is left to its job). Raises the model's
    EmbeddingError when no memory could be embedded."""
    distinct = list({s.pk: s for found in spaces.values() for s in found}.values())
    providers, failed = _providers_made(distinct, provider)
    claimed = [m for m in claimed if spaces[m.project_id][0].pk not in failed]
    windows = _windows_within(
        claimed,
        lambda memory: providers[spaces[memory.project_id][0].pk],
        budget=budget,
    )
    claimed = claimed[: len(windows)]
    served = dict(zip([m.pk for m in claimed], windows, strict=True))
    for target in distinct:
        if target.pk in failed:
            continue
        into = [m for m in claimed if target in spaces[m.project_id]]
        embedder = providers[target.pk]
        try:
            spans = [
                served[m.pk] if spaces[m.project_id][0] == target else embedder.windows(m.content)
                for m in into
            ]
            if into:
                embeddings_replace(memories=into, windows=spans, space=target, provider=embedder)
        except EmbeddingError as broken:
            failed[target.pk] = broken
    if not failed:
        return claimed
    embedded = [m for m in claimed if spaces[m.project_id][0].pk not in failed]
    if not embedded:
        raise next(iter(failed.values()))  # the task's retries and backoff, as before
    for space_id, reason in failed.items():
        logger.warning("embedding space %d paused for %.0f s: %s", space_id, PAUSE_SECONDS, reason)
        _paused[space_id] = time.monotonic() + PAUSE_SECONDS
    return embedded


def _claimable(memory_ids: list[Any] | None) -> QuerySet[Memory]:
    pending = Memory.objects.pending_embedding()
    if memory_ids is not None:
        return pending.filter(pk__in=memory_ids)
    pending = pending.exclude(status=Memory.Status.STAGED)
    now = time.monotonic()
    paused = [space_id for space_id, until in list(_paused.items()) if until > now]
    if not paused:
        return pending
    # the memories of the projects served from a paused space wait; the others go on
    # (ids, not a join: the claim's FOR UPDATE would lock the projects' rows too)
    served_there = Q(embedding_space__in=paused)
    if embedding_space_get().pk in paused:
        served_there |= Q(embedding_space__isnull=True)
    waiting = list(Project.objects.filter(served_there).values_list("pk", flat=True))
    return pending.exclude(project_id__in=waiting)


def embedding_pauses_forget() -> None:
    """Forget the paused spaces (tests: the next test's database is another)."""
    _paused.clear()


# a space whose model failed in a batch beside other spaces' memories (an endpoint down,
# a model not installed): its projects' memories are not claimed in this process for
# this long, so that they never take every batch's places (_claimable)
PAUSE_SECONDS = 60.0
_paused: dict[int, float] = {}

# windows a batch embeds, per memory claimed: room for long texts, a bound on the
# time and memory one batch takes
WINDOWS_PER_MEMORY = 4


def _windows_within(
    memories: list[Memory],
    provider_of: Callable[[Memory], EmbeddingProvider],
    *,
    budget: int,
) -> list[list[tuple[int, int]]]:
    """The windows (by the provider of the space each memory is served from) of the
    first memories whose windows fit ``budget`` (at least one)."""
    windows: list[list[tuple[int, int]]] = []
    total = 0
    for memory in memories:
        spans = provider_of(memory).windows(memory.content)
        total += len(spans)
        if windows and total > budget:
            break
        windows.append(spans)
    return windows


def embedding_run(  # type: ignore[no-untyped-def]
    *, batch_size: int | None = None, max_seconds: float | None = None, progress=None
) -> int:
    """Embed pending memories, batch after batch; returns how many were embedded.

    ``batch_size`` memories are claimed at a time (default EMBEDDING_CLAIM_SIZE).
    With ``max_seconds`` it stops after that long and queues a follow-up run if any
    memory still waits (the worker's tasks do so; commands drain everything).
    ``progress`` (optional) is called with each batch's count, for progress bars.

    EMBEDDING_LANES lanes run at once, each claiming its own batches (SKIP LOCKED) on
    its own connection: while one lane's vectors are written (PostgreSQL updating the
    HNSW index on the other core), another's are computed. Inside a transaction (a
    caller's atomic block) one lane runs in it, as another connection could not see
    its rows.
    """
    with contextlib.suppress(redis.RedisError):
        _redis().delete(QUEUED_FLAG)  # writes from now on enqueue a follow-up run
    embedding_space_get()  # the configured model's space exists before any claim
    size = batch_size or settings.EMBEDDING["CLAIM_SIZE"]
    lanes = max(1, int(settings.EMBEDDING["LANES"]))
    started = time.monotonic()
    lane = functools.partial(
        _lane_run,
        size=size,
        started=started,
        max_seconds=max_seconds,
        progress=_locked(progress) if progress else None,
    )
    if lanes == 1 or connection.in_atomic_block:
        total = lane()
    else:
        with ThreadPoolExecutor(lanes - 1, thread_name_prefix="embedding-lane") as pool:
            others = [pool.submit(_closing(lane)) for _ in range(lanes - 1)]
            total = lane()
            total += sum(other.result() for other in others)  # a lane's error raises here
    if total:
        elapsed = time.monotonic() - started
        logger.info("embedded %d memories in %.2fs (%.0f/s)", total, elapsed, total / elapsed)
    return total


def _lane_run(  # type: ignore[no-untyped-def]
    *,
    size: int,
    started: float,
    max_seconds: float | None,
    progress,
) -> int:
    """One lane of embedding_run: batches until none is left or the time is up."""
    total = 0
    while done := embedding_process_batch(size=size):
        total += done
        if progress is not None:
            progress(done)
        if max_seconds is not None and time.monotonic() - started > max_seconds:
            embedding_enqueue()  # the rest in a new task: a fair share for other tasks
            break
    return total


def _closing(function: Callable[[], int]) -> Callable[[], int]:
    """``function`` run on a thread of its own, closing that thread's connection after."""

    def run() -> int:
        try:
            return function()
        finally:
            connections.close_all()  # this thread's connections only

    return run


def _locked(progress: Callable[[int], Any]) -> Callable[[int], Any]:
    lock = threading.Lock()

    def report(done: int) -> Any:
        with lock:
            return progress(done)

    return report


def embedding_pending_count(*, older_than_seconds: int = 0) -> int:
    """How many memories wait for a vector (optionally only those waiting that long);
    staged memories wait for whoever staged them, not for the embedding workers."""
    queryset = Memory.objects.pending_embedding().exclude(status=Memory.Status.STAGED)
    if older_than_seconds:
        queryset = queryset.filter(
            created_at__lt=timezone.now() - timedelta(seconds=older_than_seconds)
        )
    return queryset.count()
