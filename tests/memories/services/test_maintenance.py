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
