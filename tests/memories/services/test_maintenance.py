"""Every maintenance run is recorded: started, finished, counts, the error if it failed."""

import pytest

from memories.models import MaintenanceRun
from memories.services.maintenance import maintenance_run


def test_a_run_is_recorded_with_its_counts(owner):
    with maintenance_run(task="prune", project=owner.project, dry_run=True) as run:
        assert MaintenanceRun.objects.get().status == "running"
        run.counts = {"fifo": 3}
    row = MaintenanceRun.objects.get()
    assert (row.task, row.project, row.dry_run, row.status) == ("prune", owner.project, True, "ok")
    assert row.counts == {"fifo": 3}
    assert row.finished_at >= row.started_at


def test_a_failed_run_is_recorded_with_its_error_and_the_error_goes_on(db):
    with pytest.raises(ValueError), maintenance_run(task="importance") as run:
        run.counts = {"done": 1}
        raise ValueError("broken")
    row = MaintenanceRun.objects.get()
    assert (row.status, row.error, row.counts) == ("failed", "ValueError: broken", {"done": 1})


def test_old_run_records_are_purged(db):
    from datetime import timedelta

    from django.utils import timezone

    from memories.services.maintenance import maintenance_runs_purge

    with maintenance_run(task="prune"):
        pass
    old = MaintenanceRun.objects.create(
        task="prune", started_at=timezone.now() - timedelta(days=31)
    )
    assert maintenance_runs_purge(older_than_days=30) == 1
    assert not MaintenanceRun.objects.filter(pk=old.pk).exists()
    assert MaintenanceRun.objects.count() == 1


def test_a_backfill_with_work_is_recorded(owner, provider):
    from memories.tasks import embedding_backfill_task
    from tests.memories.conftest import pending

    pending(owner, "written while Redis was down")
    from memories.models import Memory

    Memory.objects.update(created_at=Memory.objects.get().created_at.replace(year=2020))
    assert embedding_backfill_task() == 1
    run = MaintenanceRun.objects.get(task="embedding_backfill")
    assert run.counts == {"waiting": 1, "embedded": 1}
    assert embedding_backfill_task() == 0  # nothing waiting: nothing recorded
    assert MaintenanceRun.objects.filter(task="embedding_backfill").count() == 1
