"""The console's Pruning page: the policies as set, a dry run's counts and ids per
policy (nothing changed), a real run queued for a worker whose row polls until done,
the history of runs; editors only run; another project's runs are 404s."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memories.models import EndUser, MaintenanceRun, Memory, MemoryRevision, content_hash
from memories.services.configuration import project_settings_update
from memories.services.pruning import prune_queued_run
from memories.services.revisions import Actor
from tests.console.operators import operator_client

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def editor(owner):
    return operator_client("erin", project=owner.project)


@pytest.fixture
def viewer(owner):
    return operator_client("vic", project=owner.project, role="viewer")


def url(name, tenant, *args):
    return reverse(name, args=[tenant.project.pk, *args])


def facts(tenant, count, user="maria"):
    end_user, _ = EndUser.objects.get_or_create(project=tenant.project, external_id=user)
    rows = [
        Memory(
            project=tenant.project,
            end_user=end_user,
            kind="fact",
            content=f"fact {n}",
            content_hash=content_hash(f"fact {n}"),
        )
        for n in range(count)
    ]
    return Memory.objects.bulk_create(rows)


def fifo(tenant, keep):
    changes = {"pruning": {"fifo_per_user_kind": keep}}
    project_settings_update(project=tenant.project, changes=changes, actor=Actor.operator("x"))


def statuses(tenant):
    return sorted(Memory.objects.filter(project=tenant.project).values_list("status", flat=True))


def test_the_page_shows_the_policies_as_set(owner, viewer):
    fifo(owner, 3)
    html = viewer.get(url("console-pruning", owner)).content.decode()
    assert "<code>pruning.fifo_per_user_kind</code> <span" in html  # with its "set" badge
    assert url("console-settings", owner) + "#settings-pruning" in html
    assert "No dry run yet." in html and "No run yet." in html
    assert "Run pruning and purge now" not in html  # a viewer cannot run it


def test_a_dry_run_counts_and_lists_ids_and_changes_nothing(owner, editor):
    rows = facts(owner, 15)
    fifo(owner, 1)
    html = editor.post(url("console-pruning-dry-run", owner), **HTMX).content.decode()
    assert "Dry run done." in html and "<strong>14</strong> memories to prune" in html
    assert "and 2 more" in html  # 12 ids shown of 14
    maria = rows[0].end_user_id
    assert html.count(url("console-user-memories", owner, maria)) == 12
    assert statuses(owner) == ["active"] * 15
    run = MaintenanceRun.objects.get()
    assert (run.dry_run, run.counts["fifo"], run.details["actor"]) == (True, 14, "erin")
    page = editor.get(url("console-pruning", owner)).content.decode()
    assert "by operator erin" in page and "dry run" in page


def test_a_real_run_is_queued_and_its_row_polls_until_done(
    owner, editor, django_capture_on_commit_callbacks
):
    facts(owner, 3)
    fifo(owner, 1)
    run_url = url("console-pruning-run", owner)
    unconfirmed = editor.post(run_url, **HTMX).content.decode()
    assert "Nothing was run" in unconfirmed and not MaintenanceRun.objects.exists()
    with django_capture_on_commit_callbacks(execute=False) as sent:
        html = editor.post(run_url, {"confirm": "yes"}, **HTMX).content.decode()
    assert len(sent) == 1 and "Queued" in html and 'hx-trigger="every 2s"' in html
    run = MaintenanceRun.objects.get()
    row = url("console-pruning-row", owner, run.pk)
    assert 'hx-trigger="every 2s"' in editor.get(row, **HTMX).content.decode()
    again = editor.post(run_url, {"confirm": "yes"}, **HTMX).content.decode()
    assert "A run is under way" in again and MaintenanceRun.objects.count() == 1

    prune_queued_run(run_id=run.pk)  # what the worker does with the message
    done = editor.get(row, **HTMX).content.decode()
    assert "every 2s" not in done and "status-ok" in done and "operator erin" in done
    assert statuses(owner) == ["active", "pruned", "pruned"]
    assert set(MemoryRevision.objects.filter(action="prune").values_list("actor", flat=True)) == {
        "erin"
    }
    work = editor.get(url("console-pruning", owner), {"part": "work"}, **HTMX).content.decode()
    assert "every 2s" not in work and "<strong>2</strong> pruned, 0 pruned memories erased" in work


def test_the_history_pages_and_shows_failures(owner, editor):
    MaintenanceRun.objects.bulk_create(
        MaintenanceRun(task="prune", project=owner.project, status="ok", counts={"total": n})
        for n in range(25)
    )
    MaintenanceRun.objects.create(
        task="prune", project=owner.project, status="failed", error="OperationalError: boom"
    )
    html = editor.get(url("console-pruning", owner)).content.decode()
    assert "OperationalError: boom" in html and html.count('<tr id="run-') == 20
    second = editor.get(url("console-pruning", owner), {"page": 2}, **HTMX).content.decode()
    assert second.count('<tr id="run-') == 6


def test_viewers_dry_run_but_never_run_and_other_projects_are_404s(owner, outsider, viewer):
    facts(owner, 3)
    fifo(owner, 1)
    assert viewer.post(url("console-pruning-dry-run", owner)).status_code == 200
    assert viewer.post(url("console-pruning-run", owner), {"confirm": "yes"}).status_code == 403
    assert statuses(owner) == ["active"] * 3
    theirs = MaintenanceRun.objects.create(task="prune", project=outsider.project)
    assert viewer.get(url("console-pruning-row", owner, theirs.pk)).status_code == 404
    assert viewer.get(url("console-pruning", outsider)).status_code == 404
    assert viewer.post(url("console-pruning-dry-run", outsider)).status_code == 404
