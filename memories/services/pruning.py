"""Pruning runs: the memories the policies choose (memories/services/pruning_plan.py,
which describes them) become ``pruned`` (out of search, revision ``prune``); after the
retention they are purged, deleted with their vectors (revision ``delete``). Each run
is recorded as a MaintenanceRun (task "prune"), carried out at once (``prune_run``) or
queued for a worker (``prune_enqueue``).

The pruned time is ``updated_at``: the status change sets it, and a later edit of a
pruned memory restarts its retention.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from memories.models import EndUser, MaintenanceRun, Memory, MemoryQuerySet, MemoryRevision, Project
from memories.providers.task_sending import TaskNotSent, task_send
from memories.services.configuration import project_settings_get
from memories.services.erasure import memories_erase
from memories.services.history_retention import revisions_due, revisions_purge
from memories.services.maintenance import maintenance_run
from memories.services.pruning_plan import POLICIES, PrunePlan, prune_plan, pruning_enabled
from memories.services.revisions import Actor
from memories.services.trash import trash_due, trash_expired_count, trash_purge

PRUNE_TASK = "prune"  # MaintenanceRun.task of pruning runs (and their purge)
PRUNE_QUEUED_TASK = "memories.tasks.prune_queued_task"  # sent by name (prune_enqueue)
# the first key of the per-project advisory lock of a real run: this workflow's namespace
_LOCK_CLASS = 0x7072756E  # "prun"
# a run's details list at most this many ids (in policy order); the counts are exact
DETAIL_IDS_MAX = 10_000
# rows locked, recorded and updated per statement (all in the run's one transaction)
APPLY_CHUNK = 5_000
PURGE_CHUNK = 2_000

_TABLE = Memory._meta.db_table
_REVISIONS = MemoryRevision._meta.db_table
_ACTIVE = Memory.Status.ACTIVE.value
_ARCHIVED = Memory.Status.ARCHIVED.value
_PRUNED = Memory.Status.PRUNED.value
# the statuses each policy may take a memory from (re-checked under lock)
_STATUSES = {
    "age": [_ACTIVE, _ARCHIVED],
    "fifo": [_ACTIVE],
    "importance": [_ACTIVE],
    "size": [_ACTIVE],
}
_SNAPSHOT_SQL = "jsonb_build_object({})".format(
    ", ".join(f"'{name}', {name}" for name in Memory.SNAPSHOT_FIELDS)
)


def prune_run(
    *,
    project: Project,
    actor: Actor,
    dry_run: bool = False,
    end_user: EndUser | None = None,
    progress: Callable[[int, int], None] | None = None,
    purge: bool = False,
) -> MaintenanceRun:
    """Plan and (unless ``dry_run``) prune the project's memories (one user's with
    ``end_user``), recorded as a MaintenanceRun (task "prune"): counts per policy, the
    ids per policy in ``details`` (at most DETAIL_IDS_MAX, then ``truncated``); with
    ``purge``, then purge what was pruned longer than the retention ago (a dry run
    counts it). A real run is one transaction, one at a time per project: a crash
    leaves nothing half-applied and the run recorded failed (the exception goes on).
    Each chosen row is re-checked under lock (still active, or archived for age, and
    not pinned); the others are counted ``skipped``. ``progress(done, total)`` follows
    the memories applied."""
    with maintenance_run(task=PRUNE_TASK, project=project, dry_run=dry_run) as run:
        _prune(run=run, actor=actor, end_user=end_user, progress=progress, purge=purge)
    return run


def _prune(
    *,
    run: MaintenanceRun,
    actor: Actor,
    end_user: EndUser | None,
    progress: Callable[[int, int], None] | None,
    purge: bool,
) -> None:
    """The body of a run of ``run.project``: fills ``run.counts`` and ``run.details``."""
    project = run.project
    assert project is not None  # a prune run is always a project's
    if end_user is not None:
        run.details = {**run.details, "user": end_user.external_id}
    if run.dry_run:
        plan = prune_plan(project=project, end_user=end_user)
        run.counts = {**plan.counts, "total": plan.total}
        if purge:
            run.counts["purged"] = _purgeable(project=project, end_user=end_user).count()
            if end_user is None:
                run.counts["trash_purged"] = trash_expired_count(project=project)
        run.details = {**run.details, **_ids_details(plan.ids)}
        return
    with transaction.atomic():
        with connection.cursor() as cursor:  # one run at a time per project, till commit
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_CLASS, project.pk])
        plan = prune_plan(project=project, end_user=end_user)
        pruned = _plan_apply(plan=plan, actor=actor, progress=progress)
        purged = pruned_purge(project=project, actor=actor, end_user=end_user) if purge else None
        revisions = revisions_purge(project=project) if purge and end_user is None else None
        trashed = trash_purge(project=project, actor=actor) if purge and end_user is None else None
    total = sum(len(ids) for ids in pruned.values())
    run.counts = {
        **{policy: len(ids) for policy, ids in pruned.items()},
        "total": total,
        "skipped": plan.total - total,
    }
    if purged is not None:
        run.counts["purged"] = purged
    if revisions is not None:
        run.counts["revisions_purged"] = revisions
    if trashed is not None:
        run.counts["trash_purged"] = trashed
    run.details = {**run.details, **_ids_details(pruned)}


class PruneQueueUnavailable(Exception):
    """The broker did not take a queued run (Redis unreachable); the run is recorded
    failed."""


def prune_enqueue(
    *, project: Project, actor: Actor, end_user: EndUser | None = None
) -> MaintenanceRun:
    """Queue a real run of the project's (or one user's) pruning and purge for a worker
    (PRUNE_QUEUED_TASK, once the caller's transaction commits); its MaintenanceRun,
    ``running`` until the worker ends it. Raises PruneQueueUnavailable when the broker
    cannot take it (the run is then recorded failed)."""
    details: dict[str, Any] = {"queued": True, "actor_type": actor.type, "actor": actor.name}
    if end_user is not None:
        details["user"] = end_user.external_id
    run = MaintenanceRun.objects.create(task=PRUNE_TASK, project=project, details=details)

    def send() -> None:
        try:
            task_send(PRUNE_QUEUED_TASK, args=[run.pk])
        except TaskNotSent as error:
            run.status = MaintenanceRun.Status.FAILED
            run.error = f"could not queue the run: {error}"
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "error", "finished_at"])
            raise PruneQueueUnavailable(run.error) from error

    transaction.on_commit(send)  # at once outside a transaction
    return run


def prune_queued_run(*, run_id: int) -> MaintenanceRun | None:
    """Carry out a run that prune_enqueue queued, recorded in its own row; None when the
    row is gone or already ended (e.g. a redelivered message). A run whose worker died
    is still ``running`` (its transaction rolled back) and runs again."""
    run = (
        MaintenanceRun.objects.filter(
            pk=run_id, task=PRUNE_TASK, dry_run=False, status=MaintenanceRun.Status.RUNNING
        )
        .select_related("project")
        .first()
    )
    if run is None or run.project is None:
        return None
    actor = Actor(run.details.get("actor_type", ""), run.details.get("actor", ""))
    if not actor.type:
        actor = Actor.system(PRUNE_TASK)
    with _queued_run_recorded(run):
        end_user = None
        if "user" in run.details:
            end_user = EndUser.objects.filter(
                project=run.project, external_id=run.details["user"]
            ).first()
            if end_user is None:  # deleted since, with its memories: nothing to prune
                run.counts = {**dict.fromkeys(POLICIES, 0), "total": 0, "skipped": 0}
                return run
        _prune(run=run, actor=actor, end_user=end_user, progress=None, purge=True)
    return run


@contextmanager
def _queued_run_recorded(run: MaintenanceRun) -> Iterator[None]:
    """maintenance_run's recording for a row that already exists (a queued run)."""
    run.started_at = timezone.now()
    run.save(update_fields=["started_at"])
    try:
        yield
    except BaseException as error:
        run.status = MaintenanceRun.Status.FAILED
        run.error = f"{type(error).__name__}: {error}"[:10_000]
        raise
    else:
        run.status = MaintenanceRun.Status.OK
    finally:
        run.finished_at = timezone.now()
        run.save()


def _ids_details(ids: dict[str, list[uuid.UUID]]) -> dict[str, Any]:
    """The ids per policy as a run records them: DETAIL_IDS_MAX in all, policy order,
    as public ids (Memory: what the API shows; the rows, pruned, still exist)."""
    room = DETAIL_IDS_MAX
    chosen: dict[str, list[uuid.UUID]] = {}
    for policy, policy_ids in ids.items():
        chosen[policy] = policy_ids[: max(room, 0)]
        room -= len(policy_ids)
    every = [memory_id for policy_ids in chosen.values() for memory_id in policy_ids]
    public = dict(Memory.objects.filter(pk__in=every).values_list("pk", "public_id"))
    listed = {
        policy: [str(public.get(memory_id, memory_id)) for memory_id in policy_ids]
        for policy, policy_ids in chosen.items()
    }
    return {"ids": listed, "truncated": room < 0}


def _plan_apply(
    *, plan: PrunePlan, actor: Actor, progress: Callable[[int, int], None] | None
) -> dict[str, list[uuid.UUID]]:
    """Prune the plan's memories that still qualify (in the caller's transaction); the
    ids pruned per policy."""
    now = timezone.now()
    done = 0
    pruned: dict[str, list[uuid.UUID]] = {}
    for policy, ids in plan.ids.items():
        pruned[policy] = []
        for chunk in _chunks(ids, APPLY_CHUNK):
            pruned[policy] += _chunk_prune(
                ids=chunk, statuses=_STATUSES[policy], actor=actor, now=now
            )
            done += len(chunk)
            if progress is not None:
                progress(done, plan.total)
    return pruned


def _chunk_prune(
    *, ids: list[uuid.UUID], statuses: list[str], actor: Actor, now: datetime
) -> list[uuid.UUID]:
    """Lock the rows of ``ids`` that still qualify, record a ``prune`` revision of each
    (before and after, built in SQL) and mark them pruned; their ids."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {_TABLE} WHERE id = ANY(%s::uuid[]) AND NOT pinned "
            "AND status = ANY(%s) ORDER BY id FOR UPDATE",
            [ids, statuses],
        )
        still = {row[0] for row in cursor.fetchall()}  # locked in id order (no deadlock)
        locked = [memory_id for memory_id in ids if memory_id in still]  # the plan's order
        if not locked:
            return []
        cursor.execute(
            f"""
            INSERT INTO {_REVISIONS}
                (project_id, memory_id, memory_public_id, action, actor_type, actor, before,
                 after, created_at)
            SELECT project_id, id, public_id, 'prune', %s, %s, snapshot,
                   snapshot || jsonb_build_object('status', '{_PRUNED}'), %s
            FROM (SELECT project_id, id, public_id, {_SNAPSHOT_SQL} AS snapshot
                  FROM {_TABLE} WHERE id = ANY(%s::uuid[])) AS rows
            """,
            [actor.type, actor.name, now, locked],
        )
        cursor.execute(
            f"UPDATE {_TABLE} SET status = %s, updated_at = %s WHERE id = ANY(%s::uuid[])",
            [_PRUNED, now, locked],
        )
    return locked


def pruned_purge(
    *,
    project: Project,
    actor: Actor,
    retention_days: float | None = None,
    end_user: EndUser | None = None,
) -> int:
    """Delete the project's (one user's) memories pruned more than ``retention_days``
    (default: the project's ``pruning.retention_days``) ago, by ``updated_at``, with
    their vectors, in one transaction, recording a ``delete`` revision of each; returns
    the count."""
    with transaction.atomic():
        ids = list(
            _purgeable(project=project, end_user=end_user, retention_days=retention_days)
            .order_by("pk")
            .select_for_update()
            .values_list("pk", flat=True)
        )
        for chunk in _chunks(ids, PURGE_CHUNK):
            _chunk_purge(project_id=project.pk, ids=chunk, actor=actor)
    return len(ids)


def _purgeable(
    *, project: Project, end_user: EndUser | None, retention_days: float | None = None
) -> MemoryQuerySet:
    """The memories a purge deletes: pruned longer than the retention ago."""
    if retention_days is None:
        retention_days = project_settings_get(project=project).pruning.retention_days
    cutoff = timezone.now() - timedelta(days=retention_days)
    memories = Memory.objects.for_project(project).filter(status=_PRUNED, updated_at__lt=cutoff)
    return memories if end_user is None else memories.filter(end_user=end_user)


def _chunks(ids: list[uuid.UUID], size: int) -> Iterator[list[uuid.UUID]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def _chunk_purge(*, project_id: int, ids: list[uuid.UUID], actor: Actor) -> None:
    """Erase these memories (memories.services.erasure: their revisions keep a SHA-256,
    not the words), keeping the summaries and facts derived from them."""
    memories_erase(
        project_id=project_id, ids=ids, actor=actor, reason="pruning purge", with_derived=False
    )


def pruning_due(*, project: Project) -> bool:
    """Whether beat has anything to do for the project: a policy on, memories pruned
    longer than the retention ago to purge, revisions older than theirs, or memories
    past the trash's grace."""
    if pruning_enabled(project_settings_get(project=project).pruning):
        return True
    return (
        _purgeable(project=project, end_user=None).exists()
        or revisions_due(project=project)
        or trash_due(project=project)
    )
