"""The record of scheduled maintenance: each run of a task, per project or overall."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.utils import timezone

from memories.models import MaintenanceRun, Project

logger = logging.getLogger(__name__)


@contextmanager
def maintenance_run(
    *, task: str, project: Project | None = None, dry_run: bool = False
) -> Iterator[MaintenanceRun]:
    """Record one run of ``task``: the row is written when it starts (status running),
    the body fills ``run.counts`` and ``run.details``, and it is closed when the body
    ends (ok) or raises (failed, with the error; the exception goes on). The row is
    written outside the body's transaction, so a failed run is recorded too."""
    run = MaintenanceRun.objects.create(task=task, project=project, dry_run=dry_run)
    try:
        yield run
    except BaseException as error:
        run.status = MaintenanceRun.Status.FAILED
        run.error = f"{type(error).__name__}: {error}"[:10_000]
        raise
    else:
        run.status = MaintenanceRun.Status.OK
    finally:
        run.finished_at = timezone.now()
        try:
            run.save()
        except Exception:  # the database itself is failing: the log still says it
            logger.exception("could not record the end of maintenance run %s", run.pk)


def maintenance_runs_purge(*, older_than_days: float) -> int:
    """Delete the records of runs started more than ``older_than_days`` ago."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted, _ = MaintenanceRun.objects.filter(started_at__lt=cutoff).delete()
    return deleted
