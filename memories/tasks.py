"""Celery tasks of the core: thin wrappers that call one service each.

Task names are explicit: the beat schedule (settings.CELERY_BEAT_SCHEDULE) and
``embedding_enqueue`` (services.embedding.EMBEDDING_RUN_TASK) send them by name.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError

from memories.models import Project
from memories.providers.embeddings import EmbeddingError
from memories.services.access import accesses_flush
from memories.services.embedding import (
    EMBEDDING_RUN_TASK,
    embedding_pending_count,
    embedding_run,
)
from memories.services.idempotency import idempotency_keys_purge
from memories.services.importance import importance_recompute
from memories.services.maintenance import maintenance_run, maintenance_runs_purge
from memories.services.pruning import (
    PRUNE_QUEUED_TASK,
    prune_queued_run,
    prune_run,
    pruning_due,
)
from memories.services.revisions import Actor
from memories.services.working import working_trim
from memories.worker import DATABASE_RETRY

logger = logging.getLogger(__name__)


@shared_task(
    name=EMBEDDING_RUN_TASK,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=5,
    **DATABASE_RETRY,
)
def embedding_run_task(self) -> int:  # type: ignore[no-untyped-def]
    """Embed every pending memory (claims in batches; safe to run twice)."""
    try:
        return embedding_run(max_seconds=settings.EMBEDDING["RUN_SECONDS"])
    except EmbeddingError as exc:
        if exc.retryable:  # e.g. an embedding endpoint that is down: back off and retry
            raise self.retry(exc=exc, countdown=2 ** (self.request.retries + 2)) from exc
        raise  # a configuration error: the backfill tries again once it is fixed


@shared_task(name="memories.tasks.embedding_backfill_task", acks_late=True)
def embedding_backfill_task() -> int:
    """Embed memories left pending too long (lost messages, a Redis outage)."""
    waiting = embedding_pending_count(
        older_than_seconds=settings.EMBEDDING["BACKFILL_AFTER_SECONDS"]
    )
    if not waiting:
        return 0  # nothing to do: not recorded (it runs every minute)
    with maintenance_run(task="embedding_backfill") as run:
        done = embedding_run(max_seconds=settings.EMBEDDING["RUN_SECONDS"])
        run.counts = {"waiting": waiting, "embedded": done}
    return done


@shared_task(name="memories.tasks.idempotency_keys_purge_task")
def idempotency_keys_purge_task() -> int:
    """Forget stored responses to Idempotency-Key requests older than their TTL."""
    return idempotency_keys_purge()


@shared_task(name="memories.tasks.maintenance_runs_purge_task")
def maintenance_runs_purge_task() -> int:
    """Forget the records of maintenance runs older than MAINTENANCE_RUNS_KEEP_DAYS."""
    return maintenance_runs_purge(older_than_days=settings.MAINTENANCE_RUNS_KEEP_DAYS)


@shared_task(name="memories.tasks.working_memory_trim_task", soft_time_limit=120, time_limit=150)
def working_memory_trim_task() -> int:
    """Purge expired ids and apply each room's working-memory cap (FIFO); clear rooms
    that are gone. Redis down: the next beat run tries again."""
    with maintenance_run(task="working_memory_trim") as run:
        removed = working_trim()
        run.counts = {"removed": removed}
    return removed


@shared_task(
    name="memories.tasks.accesses_flush_task",
    soft_time_limit=120,
    time_limit=150,
    max_retries=5,
    **DATABASE_RETRY,
)
def accesses_flush_task() -> int:
    """Write the reads counted in Redis to the memories' access_count and accessed_at."""
    return accesses_flush()


@shared_task(name="memories.tasks.importance_recompute_task", soft_time_limit=3000, time_limit=3300)
def importance_recompute_task() -> int:
    """Recompute every project's importance scores, one maintenance run per project (a
    project whose run fails, e.g. on a deadlock, is recorded and the others go on)."""
    changed = 0
    for project in Project.objects.order_by("pk"):
        covered: list[int] = []  # the memories of each chunk
        try:
            with maintenance_run(task="importance", project=project) as run:
                done = importance_recompute(project=project, progress=covered.append)
                run.counts = {"memories": sum(covered), "changed": done}
        except DatabaseError:
            logger.exception("importance recompute of project %s failed", project.pk)
            continue
        changed += done
    return changed


@shared_task(name="memories.tasks.prune_task", soft_time_limit=3000, time_limit=3300)
def prune_task() -> int:
    """Prune every project with a pruning policy on and purge what was pruned longer than
    its retention ago, one maintenance run per project (a project whose run fails is
    recorded and the others go on); returns how many memories were pruned."""
    pruned = 0
    for project in Project.objects.order_by("pk"):
        if not pruning_due(project=project):
            continue
        try:
            run = prune_run(project=project, actor=Actor.system("prune"), purge=True)
        except DatabaseError:
            logger.exception("pruning of project %s failed", project.pk)
            continue
        pruned += run.counts["total"]
    return pruned


@shared_task(name=PRUNE_QUEUED_TASK, soft_time_limit=3000, time_limit=3300)
def prune_queued_task(run_id: int) -> int:
    """Carry out a pruning run asked for through the API (recorded in its own row)."""
    run = prune_queued_run(run_id=run_id)
    return 0 if run is None else int(run.counts.get("total", 0))
