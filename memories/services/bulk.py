"""Bulk actions on many of a project's memories at once (the console's Memories table):
archive, pin, unpin, forget (to the trash) and re-embed, in batches of BATCH, each
locked (in pk order) and committed on its own, every change recorded through the
memories services as the actor's with the intent "bulk".

A small selection is applied where it is asked (``memories_bulk_apply``); a large one is
queued for a worker (``bulk_enqueue``), recorded as a MaintenanceRun (task "bulk
<action>") whose details hold the selected pks: the worker reads them from the row
(``bulk_queued_run``), so a lost broker message loses no selection. After each batch
the run's counts (how many gone through, changed and skipped) are saved in the batch's
own transaction: a worker that dies resumes after the last batch committed, and every
batch skips what is already so (archived, pinned, trashed, waiting for the workers).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models.fields.json import KT, KeyTransform
from django.utils import timezone

from memories.models import MaintenanceRun, Memory, Project
from memories.providers.task_sending import TaskNotSent, task_send
from memories.services.concurrency import memories_lock
from memories.services.memories import memories_pin_change, memories_status_change
from memories.services.reembed import memories_reembed
from memories.services.revisions import Actor
from memories.services.trash import memories_trash

BATCH = 500  # memories locked and changed per transaction
INTENT = "bulk"
# each action and what its outcome calls the memories it changed
LABELS = {
    "archive": "archived",
    "pin": "pinned",
    "unpin": "unpinned",
    "forget": "moved to the trash",
    "reembed": "queued for embedding",
}
ACTIONS = tuple(LABELS)
BULK_TASKS = tuple(f"bulk {action}" for action in ACTIONS)  # MaintenanceRun.task of a run
BULK_QUEUED_TASK = "memories.tasks.bulk_apply_task"  # sent by name (bulk_enqueue)


class BulkRefused(ValueError):
    """An action that is not one of ACTIONS."""


@dataclass
class BulkOutcome:
    """What a bulk action did: how many it changed, how many it skipped and why."""

    done_label: str  # "archived", "pinned", ...
    done: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> memories

    def skip(self, reason: str, count: int = 1) -> None:
        if count:
            self.skipped[reason] = self.skipped.get(reason, 0) + count

    @property
    def message(self) -> str:
        """'37 archived, 2 skipped: already archived' (every reason, the largest first)."""
        text = f"{self.done:,} {self.done_label}"
        if not self.skipped:
            return f"{text}."
        reasons = sorted(self.skipped.items(), key=lambda item: -item[1])
        total = sum(self.skipped.values())
        if len(reasons) == 1:
            return f"{text}, {total:,} skipped: {reasons[0][0]}."
        parts = ", ".join(f"{count:,} {reason}" for reason, count in reasons)
        return f"{text}, {total:,} skipped: {parts}."


# progress(outcome, memories gone through), in the transaction of the batch just applied
Progress = Callable[[BulkOutcome, int], None]
_Batch = Callable[[Project, list[uuid.UUID], Actor, BulkOutcome], None]

STATUS_REASONS = {"trashed": "in the trash", "proposed": "waiting for review"}
GONE = "no longer there"  # erased (or trashed and purged) since they were selected


def _status_reason(status: str, target: str) -> str:
    return f"already {status}" if status == target else STATUS_REASONS.get(status, status)


def _locked(project: Project, ids: list[uuid.UUID]) -> list[Memory]:
    """The project's memories of ``ids``, locked FOR UPDATE in pk order (the caller's
    transaction)."""
    locked = memories_lock(Memory.objects.for_project(project).filter(pk__in=ids))
    return list(Memory.objects.filter(pk__in=locked).order_by("pk"))


def _archive(project: Project, batch: list[uuid.UUID], actor: Actor, outcome: BulkOutcome) -> None:
    """The active ones archived (kept, out of the buffer and contexts); the others skipped."""
    locked = _locked(project, batch)
    outcome.skip(GONE, len(batch) - len(locked))
    active = [memory for memory in locked if memory.status == Memory.Status.ACTIVE]
    for memory in locked:
        if memory.status != Memory.Status.ACTIVE:
            outcome.skip(_status_reason(memory.status, Memory.Status.ARCHIVED))
    if active:
        memories_status_change(
            memories=active, status="archived", action="archive", actor=actor, intent=INTENT
        )
    outcome.done += len(active)


def _pin(pinned: bool) -> _Batch:
    """Pin (never pruned, importance counts as 1) or unpin; those already so skipped."""

    def pin(project: Project, batch: list[uuid.UUID], actor: Actor, outcome: BulkOutcome) -> None:
        locked = _locked(project, batch)
        outcome.skip(GONE, len(batch) - len(locked))
        changing = [memory for memory in locked if memory.pinned != pinned]
        outcome.skip(f"already {outcome.done_label}", len(locked) - len(changing))
        memories_pin_change(memories=changing, pinned=pinned, actor=actor, intent=INTENT)
        outcome.done += len(changing)

    return pin


def _forget(project: Project, batch: list[uuid.UUID], actor: Actor, outcome: BulkOutcome) -> None:
    """To the trash (undo there until pruning.trash_days have passed)."""
    moved = memories_trash(project=project, ids=batch, actor=actor, intent=INTENT)
    outcome.done += moved
    outcome.skip("already in the trash", len(batch) - moved)


def _reembed(project: Project, batch: list[uuid.UUID], actor: Actor, outcome: BulkOutcome) -> None:
    """Queued for the embedding workers again (their vectors computed anew)."""
    queued = memories_reembed(project=project, ids=batch)
    outcome.done += queued
    outcome.skip("already waiting for the workers", len(batch) - queued)


_BATCHES: dict[str, _Batch] = {
    "archive": _archive,
    "pin": _pin(True),
    "unpin": _pin(False),
    "forget": _forget,
    "reembed": _reembed,
}


def memories_bulk_apply(
    *,
    project: Project,
    action: str,
    ids: list[uuid.UUID],
    actor: Actor,
    progress: Progress | None = None,
    start: int = 0,
    outcome: BulkOutcome | None = None,
) -> BulkOutcome:
    """Apply ``action`` (one of ACTIONS) to the project's memories ``ids`` from the
    ``start``-th on, BATCH at a time, each batch in its own transaction with the
    ``progress`` call; adds to ``outcome`` (a run resumed). BulkRefused for an action
    that is not one."""
    if action not in _BATCHES:
        raise BulkRefused(f"action: not one of {', '.join(ACTIONS)}.")
    apply = _BATCHES[action]
    outcome = outcome or BulkOutcome(LABELS[action])
    for begin in range(start, len(ids), BATCH):
        batch = ids[begin : begin + BATCH]
        with transaction.atomic():
            apply(project, batch, actor, outcome)
            if progress is not None:
                progress(outcome, begin + len(batch))
    return outcome


# --- queued for a worker ----------------------------------------------------------


class BulkQueueUnavailable(Exception):
    """The broker did not take the run (Redis unreachable); the run is recorded failed."""


def bulk_enqueue(
    *, project: Project, action: str, ids: list[uuid.UUID], actor: Actor
) -> MaintenanceRun:
    """Record a run of ``action`` on ``ids`` (task "bulk <action>", counts total and
    done 0, the pks and the actor in its details) and queue BULK_QUEUED_TASK with its id
    once the caller's transaction commits; the run is ``running`` until the worker ends
    it. Raises BulkQueueUnavailable when the broker cannot take it (the run is then
    recorded failed)."""
    if action not in LABELS:
        raise BulkRefused(f"action: not one of {', '.join(ACTIONS)}.")
    details = {
        "action": action,
        "ids": [str(pk) for pk in ids],
        "actor_type": actor.type,
        "actor": actor.name,
        "skipped": {},
    }
    counts = {"total": len(ids), "done": 0, "changed": 0, "skipped": 0}
    run = MaintenanceRun.objects.create(
        task=f"bulk {action}", project=project, counts=counts, details=details
    )

    def send() -> None:
        try:
            task_send(BULK_QUEUED_TASK, args=[run.pk])
        except TaskNotSent as error:
            run.status = MaintenanceRun.Status.FAILED
            run.error = f"could not queue the run: {error}"
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "error", "finished_at"])
            raise BulkQueueUnavailable(run.error) from error

    transaction.on_commit(send)  # at once outside a transaction
    return run


def bulk_run_outcome(*, action: str, counts: dict[str, Any], skipped: Any) -> BulkOutcome:
    """What a run of ``action`` has done so far (or in all, once it ended)."""
    reasons = {str(reason): int(count) for reason, count in dict(skipped or {}).items()}
    return BulkOutcome(LABELS.get(action, action), int(counts.get("changed", 0)), reasons)


def bulk_queued_run(*, run_id: int) -> MaintenanceRun | None:
    """Carry out (or resume, after the last batch committed) a run bulk_enqueue queued;
    None when the row is gone or already ended (a redelivered message)."""
    run = (
        MaintenanceRun.objects.filter(
            pk=run_id, task__in=BULK_TASKS, status=MaintenanceRun.Status.RUNNING
        )
        .select_related("project")
        .first()
    )
    if run is None or run.project is None:
        return None
    details = run.details
    actor = Actor(str(details.get("actor_type", "")), str(details.get("actor", "")))
    ids = [uuid.UUID(pk) for pk in details.get("ids", [])]

    def progress(outcome: BulkOutcome, gone_through: int) -> None:
        run.counts = {
            **run.counts,
            "done": gone_through,
            "changed": outcome.done,
            "skipped": sum(outcome.skipped.values()),
        }
        run.details = {**run.details, "skipped": dict(outcome.skipped)}
        run.save(update_fields=["counts", "details"])

    with _run_recorded(run):
        memories_bulk_apply(
            project=run.project,
            action=str(details.get("action", "")),
            ids=ids,
            actor=actor,
            progress=progress,
            start=int(run.counts.get("done", 0)),
            outcome=bulk_run_outcome(
                action=str(details.get("action", "")),
                counts=run.counts,
                skipped=details.get("skipped"),
            ),
        )
    return run


@contextmanager
def _run_recorded(run: MaintenanceRun) -> Iterator[None]:
    """The run ended: ok, or failed with the error (the exception goes on). A worker
    that dies records nothing: the run stays ``running`` and its redelivery resumes."""
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
        run.save(update_fields=["status", "error", "finished_at"])


def _runs(project: Project) -> Any:
    """The project's bulk runs, read without their (long) lists of ids."""
    return (
        MaintenanceRun.objects.filter(project=project, task__in=BULK_TASKS)
        .defer("details")
        .annotate(
            bulk_action=KT("details__action"), bulk_skipped=KeyTransform("skipped", "details")
        )
    )


def bulk_run_get(*, project: Project, run_id: int) -> BulkRun | None:
    """The project's bulk run ``run_id`` (None: no such run, or another project's)."""
    run = _runs(project).filter(pk=run_id).first()
    return None if run is None else BulkRun.of(run)


def bulk_runs_running(*, project: Project) -> list[BulkRun]:
    """The project's bulk runs under way, oldest first (at most 10)."""
    runs = _runs(project).filter(status=MaintenanceRun.Status.RUNNING)
    return [BulkRun.of(run) for run in runs.order_by("started_at", "pk")[:10]]


@dataclass
class BulkRun:
    """A run as the console shows it (read by ``_runs``): its progress and outcome."""

    run: MaintenanceRun
    action: str = ""
    skipped: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, run: MaintenanceRun) -> BulkRun:
        """A run read by ``_runs`` (its action and reasons annotated)."""
        return cls(run, getattr(run, "bulk_action", "") or "", getattr(run, "bulk_skipped", {}))

    @property
    def total(self) -> int:
        return int(self.run.counts.get("total", 0))

    @property
    def done(self) -> int:
        return int(self.run.counts.get("done", 0))

    @property
    def progress_text(self) -> str:
        """'1,500 of 10,000' (memories gone through)."""
        return f"{self.done:,} of {self.total:,}"

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 100.0

    @property
    def label(self) -> str:
        return LABELS.get(self.action, "changed")

    @property
    def running(self) -> bool:
        return self.run.status == MaintenanceRun.Status.RUNNING

    @property
    def outcome(self) -> str:
        outcome = bulk_run_outcome(action=self.action, counts=self.run.counts, skipped=self.skipped)
        return outcome.message
