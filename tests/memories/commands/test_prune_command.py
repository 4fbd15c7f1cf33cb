"""manage.py prune: a dry run, a real run, one user, the purge, bad names."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from memories.models import MaintenanceRun, Memory
from tests.memories.services.test_pruning import POLICY, policy_set, seed, statuses


def run(*args):
    stdout = io.StringIO()
    call_command("prune", *args, stdout=stdout, stderr=io.StringIO())
    return stdout.getvalue()


@pytest.fixture
def alice(owner):
    rows = seed(owner.project)
    policy_set(owner.project, **POLICY)
    return rows


def test_a_dry_run_says_what_would_go_and_changes_nothing(owner, alice):
    out = run("--project", "owner", "--dry-run")
    assert out.startswith("Would prune 8 memories (age 2, fifo 4, importance 1, size 1). Run ")
    assert "pruned" not in statuses(alice).values()
    assert MaintenanceRun.objects.get().dry_run is True
    listed = run("--project", "owner", "--dry-run", "--verbosity", "2").splitlines()[1:]
    assert listed[:2] == [f"age\t{alice['m5'].pk}", f"age\t{alice['m1'].pk}"]
    assert len(listed) == 8


def test_a_real_run_prunes_and_records_it(owner, alice):
    out = run("--project", str(owner.project.pk))  # the id works too
    assert out.startswith("Pruned 8 memories (age 2, fifo 4, importance 1, size 1). Run ")
    assert sum(status == "pruned" for status in statuses(alice).values()) == 8
    run_row = MaintenanceRun.objects.get()
    assert (run_row.task, run_row.dry_run, run_row.status) == ("prune", False, "ok")


def test_one_user_only(owner, alice):
    bob = seed(owner.project, user="bob")
    assert run("--project", "owner", "--user", "bob").startswith("Pruned 8 memories")
    assert "pruned" not in statuses(alice).values()
    assert sum(status == "pruned" for status in statuses(bob).values()) == 8


def test_purge_deletes_what_was_pruned_longer_than_the_retention_ago(owner, alice):
    Memory.objects.filter(pk=alice["f3"].pk).update(
        status="pruned", updated_at=timezone.now() - timedelta(days=31)
    )
    assert "; would purge 1." in run("--project", "owner", "--dry-run", "--purge")
    assert "; purged 1." in run("--project", "owner", "--purge")
    assert statuses(alice)["f3"] is None


def test_unknown_project_or_user(owner, outsider, alice):
    seed(outsider.project, user="carol")
    with pytest.raises(CommandError, match="No project"):
        run("--project", "nope")
    with pytest.raises(CommandError, match="No user 'carol'"):
        run("--project", "owner", "--user", "carol")  # another project's user
