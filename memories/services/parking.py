"""Poison inputs parked for an operator: a task that failed, timed out or killed its worker
PARKING_ATTEMPTS times on the same input (memories/task_guard.py counts) is recorded as a
ParkedTask and not run again (nor redelivered, nor queued by a sweep) until an operator
retries it from the admin, which sends the task again exactly as the row says.

What a parked input looks like to the rest of the hub is the task's business: a memory
whose embedding is parked has embedding status ``failed`` (stored, found by keyword, left
out of the backfill), a message parked by fact extraction a ``skipped`` extraction, a
document ``failed``, a room or a user's synopsis is left out of its sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Max
from django.utils import timezone

from memories.models import EndUser, MaintenanceRun, Memory, ParkedTask, Project, Room
from memories.providers.task_sending import task_send
from memories.services.task_attempts import attempt_succeeded, attempts_key

logger = logging.getLogger(__name__)


def parking_attempts() -> int:
    """The failures of one input after which it is parked (PARKING_ATTEMPTS, at least 1)."""
    return max(1, int(settings.PARKING_ATTEMPTS))


@dataclass(frozen=True)
class Parking:
    """What is parked: the task and its input, how to send it again, how it failed."""

    task: str
    input_kind: str
    input_ids: Sequence[Any]
    input_key: str  # task_attempts.input_key, or "run" for a task without an input
    reason: str  # a ParkedTask.Reason
    error: str = ""
    attempts: int = 0
    args: Sequence[Any] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    project_id: int | None = None


def task_park(*, parking: Parking) -> ParkedTask:
    """Record the input as parked (again: the row of the same task and input is reopened,
    its attempts added to, its first failure kept); logged as a warning."""
    now = timezone.now()
    with transaction.atomic():
        row, created = ParkedTask.objects.select_for_update().get_or_create(
            task=parking.task,
            input_key=parking.input_key,
            defaults={"first_failed_at": now, "reason": parking.reason},
        )
        row.input_kind = parking.input_kind
        row.input_ids = [str(pk) for pk in parking.input_ids]
        row.args, row.kwargs = list(parking.args), dict(parking.kwargs)
        row.attempts = (0 if created else row.attempts) + max(1, parking.attempts)
        row.reason, row.last_error = parking.reason, parking.error[:10_000]
        row.last_failed_at, row.status = now, ParkedTask.Status.PARKED
        row.project_id = parking.project_id
        if row.project_id is not None and not Project.objects.filter(pk=row.project_id).exists():
            row.project_id = None  # deleted meanwhile: the row stays, unowned
        row.save()
    logger.warning(
        "parked %s on %s %s after %d attempts (%s): %s",
        parking.task,
        parking.input_kind,
        parking.input_key,
        row.attempts,
        parking.reason,
        parking.error,
    )
    return row


def parked_task_retry(*, parked: ParkedTask, operator: str) -> bool:
    """Send the parked task again as recorded (its input's attempts start over) and mark
    the row retried by ``operator``; False (and the row left parked) when the broker
    does not take it (TaskNotSent is logged). A row already retried is sent again too."""
    try:
        attempt_succeeded(key=attempts_key(parked.task, parked.input_key))
        task_send(parked.task, args=parked.args, kwargs=parked.kwargs)
    except Exception as error:  # noqa: BLE001 - Redis down, the broker refusing: say so
        logger.warning("could not retry parked task %s: %s", parked.pk, error)
        return False
    ParkedTask.objects.filter(pk=parked.pk).update(
        status=ParkedTask.Status.RETRIED, retried_at=timezone.now(), retried_by=operator[:150]
    )
    logger.info("parked task %s (%s) retried by %s", parked.pk, parked.task, operator)
    return True


@dataclass(frozen=True)
class ParkedSummary:
    """The parked tasks of a project (or all), for the console's overview."""

    parked: int  # waiting for an operator
    retried: int  # sent again by an operator (and not parked again since)
    by_task: dict[str, int]  # parked, by task name
    by_reason: dict[str, int]  # parked, by reason (failed, time limit, worker lost)
    last_parked_at: datetime | None


def parked_tasks_summary(*, project: Project | None = None) -> ParkedSummary:
    """Counts of the parked tasks, of ``project`` or of every project (and those of no
    project, e.g. a periodic sweep's run, only then)."""
    rows = ParkedTask.objects.all() if project is None else project.parked_tasks.all()
    parked = rows.filter(status=ParkedTask.Status.PARKED)
    by_task = dict(parked.values_list("task").annotate(n=Count("id")).order_by("task"))
    by_reason = dict(parked.values_list("reason").annotate(n=Count("id")).order_by("reason"))
    return ParkedSummary(
        parked=sum(by_task.values()),
        retried=rows.filter(status=ParkedTask.Status.RETRIED).count(),
        by_task=by_task,
        by_reason=by_reason,
        last_parked_at=parked.aggregate(last=Max("last_failed_at"))["last"],
    )


def parked_input_ids(*, task: str, input_kind: str) -> set[str]:
    """The ids of the inputs of ``task`` that are parked (a sweep leaves them out)."""
    rows = ParkedTask.objects.filter(
        task=task, input_kind=input_kind, status=ParkedTask.Status.PARKED
    ).values_list("input_ids", flat=True)
    return {str(pk) for ids in rows for pk in ids}


# --- the project of an input, for the row (None if unknown or gone) -----------------------


def project_of_memories(ids: Sequence[Any]) -> int | None:
    return _first_project(Memory.objects.filter(pk__in=list(ids)[:100]))


def project_of_room(ids: Sequence[Any]) -> int | None:
    return _first_project(Room.objects.filter(pk__in=list(ids)[:1]))


def project_of_user(ids: Sequence[Any]) -> int | None:
    return _first_project(EndUser.objects.filter(pk__in=list(ids)[:1]))


def project_of_maintenance_run(ids: Sequence[Any]) -> int | None:
    return _first_project(MaintenanceRun.objects.filter(pk__in=list(ids)[:1]))


def _first_project(queryset: Any) -> int | None:
    try:
        value = queryset.values_list("project_id", flat=True).first()
    except (ValidationError, ValueError, TypeError):  # not an id of that table
        return None
    return int(value) if value is not None else None
