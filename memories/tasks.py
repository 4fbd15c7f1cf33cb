"""Celery tasks of the core: thin wrappers that call one service each.

Task names are explicit: the beat schedule (settings.CELERY_BEAT_SCHEDULE) and
``embedding_enqueue`` (services.embedding.EMBEDDING_RUN_TASK) send them by name. Each
task's time limits are in memories/task_limits.py; memories/task_guard.py records what
a task stopped at its limit and parks an input that keeps failing.
"""

from __future__ import annotations

import logging
import time

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError

from memories.models import Project
from memories.providers.embeddings import EmbeddingError
from memories.services.access import accesses_flush
from memories.services.bulk import BULK_QUEUED_TASK, bulk_queued_run
from memories.services.embedding import (
    EMBEDDING_RUN_TASK,
    embedding_enqueue,
    embedding_pending_count,
    embedding_run,
)
from memories.services.embedding_isolation import (
    embedding_failed_retry,
    embedding_isolate,
    embedding_isolation_due,
    embedding_isolation_request,
)
from memories.services.embedding_switch import (
    SWITCH_TASK,
    embedding_switch_run,
    embedding_switch_sweep,
)
from memories.services.idempotency import idempotency_keys_purge
from memories.services.importance import importance_recompute
from memories.services.maintenance import maintenance_run, maintenance_runs_purge
from memories.services.parking import project_of_maintenance_run
from memories.services.pruning import (
    PRUNE_QUEUED_TASK,
    prune_queued_run,
    prune_run,
    pruning_due,
)
from memories.services.revisions import Actor
from memories.services.tallies import tallies_fold
from memories.services.working import working_trim
from memories.task_guard import Interruption, TaskInput, no_ids, task_options
from memories.worker import DATABASE_RETRY

logger = logging.getLogger(__name__)


def _embedding_interrupted(interruption: Interruption) -> None:
    """The memories the run had claimed stay pending (nothing is lost); the next run
    embeds them one at a time, to find one that keeps failing (embedding_isolation.py).
    Not when the provider failed: that is no memory's doing."""
    if not isinstance(interruption.exception, EmbeddingError):
        embedding_isolation_request()


EMBEDDING_RUN = TaskInput(ids=no_ids, interrupted=_embedding_interrupted)


@shared_task(
    **task_options(EMBEDDING_RUN_TASK, EMBEDDING_RUN),
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=5,
    **DATABASE_RETRY,
)
def embedding_run_task(self, memory_ids: list[str] | None = None) -> int:  # type: ignore[no-untyped-def]
    """Embed every pending memory (claims in batches; safe to run twice); with
    ``memory_ids`` (an operator's retry of parked memories) those first become pending."""
    if memory_ids:
        embedding_failed_retry(memory_ids=memory_ids)
    try:
        return _embedding_run()
    except EmbeddingError as exc:
        if exc.retryable:  # e.g. an embedding endpoint that is down: back off and retry
            raise self.retry(exc=exc, countdown=2 ** (self.request.retries + 2)) from exc
        raise  # a configuration error: the backfill tries again once it is fixed


def _embedding_run() -> int:
    """EMBEDDING_RUN_SECONDS of embedding: the head of the queue one memory at a time
    first if an interrupted run asked for it (then a follow-up run if it took them all)."""
    seconds = float(settings.EMBEDDING["RUN_SECONDS"])
    if not embedding_isolation_due():
        return embedding_run(max_seconds=seconds)
    started = time.monotonic()
    done, finished = embedding_isolate(max_seconds=seconds)
    if not finished:
        embedding_enqueue()
        return done
    return done + embedding_run(max_seconds=max(1.0, seconds - (time.monotonic() - started)))


@shared_task(
    **task_options("memories.tasks.embedding_backfill_task", EMBEDDING_RUN), acks_late=True
)
def embedding_backfill_task() -> int:
    """Embed memories left pending too long (lost messages, a Redis outage)."""
    waiting = embedding_pending_count(
        older_than_seconds=settings.EMBEDDING["BACKFILL_AFTER_SECONDS"]
    )
    if not waiting:
        return 0  # nothing to do: not recorded (it runs every minute)
    with maintenance_run(task="embedding_backfill") as run:
        done = _embedding_run()
        run.counts = {"waiting": waiting, "embedded": done}
    return done


@shared_task(
    **task_options(SWITCH_TASK),
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=10,
)
def embedding_switch_task(self, switch_id: int) -> str:  # type: ignore[no-untyped-def]
    """A slice of a project's model switch (memories/services/embedding_switch.py)."""
    try:
        return embedding_switch_run(switch_id=switch_id)
    except EmbeddingError as exc:  # retryable: an endpoint that is down
        raise self.retry(exc=exc, countdown=min(300, 2 ** (self.request.retries + 3))) from exc


@shared_task(**task_options("memories.tasks.embedding_switch_sweep_task"))
def embedding_switch_sweep_task() -> dict[str, int]:
    """Stalled switches queued again, memories embedded into the old space alone around
    a flip set pending, vectors no project needs any more dropped."""
    return embedding_switch_sweep()


@shared_task(**task_options("memories.tasks.idempotency_keys_purge_task"))
def idempotency_keys_purge_task() -> int:
    """Forget stored responses to Idempotency-Key requests older than their TTL."""
    return idempotency_keys_purge()


@shared_task(**task_options("memories.tasks.maintenance_runs_purge_task"))
def maintenance_runs_purge_task() -> int:
    """Forget the records of maintenance runs older than MAINTENANCE_RUNS_KEEP_DAYS."""
    return maintenance_runs_purge(older_than_days=settings.MAINTENANCE_RUNS_KEEP_DAYS)


@shared_task(**task_options("memories.tasks.working_memory_trim_task"))
def working_memory_trim_task() -> int:
    """Purge expired ids and apply each room's working-memory cap (FIFO); clear rooms
    that are gone. Redis down: the next beat run tries again."""
    with maintenance_run(task="working_memory_trim") as run:
        removed = working_trim()
        run.counts = {"removed": removed}
    return removed


@shared_task(**task_options("memories.tasks.accesses_flush_task"), max_retries=5, **DATABASE_RETRY)
def accesses_flush_task() -> int:
    """Write the reads counted in Redis to the memories' access_count and accessed_at."""
    return accesses_flush()


@shared_task(**task_options("memories.tasks.tallies_fold_task"), max_retries=5, **DATABASE_RETRY)
def tallies_fold_task() -> int:
    """Fold the memory tallies' appended counts, one row a group; the rows left."""
    return tallies_fold()


@shared_task(**task_options("memories.tasks.importance_recompute_task"))
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


@shared_task(**task_options("memories.tasks.prune_task"))
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


@shared_task(
    **task_options(
        PRUNE_QUEUED_TASK, TaskInput(kind="maintenance run", project=project_of_maintenance_run)
    )
)
def prune_queued_task(run_id: int) -> int:
    """Carry out a pruning run asked for through the API (recorded in its own row)."""
    run = prune_queued_run(run_id=run_id)
    return 0 if run is None else int(run.counts.get("total", 0))


@shared_task(
    **task_options(
        BULK_QUEUED_TASK, TaskInput(kind="maintenance run", project=project_of_maintenance_run)
    ),
    acks_late=True,
    reject_on_worker_lost=True,
)
def bulk_apply_task(run_id: int) -> int:
    """Carry out (or resume) a console's bulk action on many memories (its own row)."""
    run = bulk_queued_run(run_id=run_id)
    return 0 if run is None else int(run.counts.get("changed", 0))
