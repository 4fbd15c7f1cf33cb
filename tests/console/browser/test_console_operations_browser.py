"""The project's operations pages in Chromium: a pruning dry run then the run (followed
until done, seen through the API), the activity log's filters and a memory's history,
the team (add an operator, change a role), a setting reset without a reload;
screenshots at 1440 and 760 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memories.models import EndUser, MaintenanceRun, Memory, content_hash
from memories.services.configuration import project_settings_update
from memories.services.memories import memory_update
from memories.services.pruning import prune_queued_run
from memories.services.revisions import Actor
from tests.console.browser.conftest import screenshot

pytestmark = pytest.mark.slow


def shots(page, name):
    page.set_viewport_size({"width": 1440, "height": 900})
    screenshot(page, f"{name}-1440")
    page.set_viewport_size({"width": 760, "height": 900})
    screenshot(page, f"{name}-760")
    page.set_viewport_size({"width": 1440, "height": 900})


def seed(tenant, count=15):
    user, _ = EndUser.objects.get_or_create(project=tenant.project, external_id="maria")
    rows = [
        Memory(
            project=tenant.project,
            end_user=user,
            kind="fact",
            content=f"maria fact number {n} " + "long words " * (n * 3),
            content_hash=content_hash(f"f{n}"),
        )
        for n in range(count)
    ]
    return Memory.objects.bulk_create(rows)


def test_pruning_dry_run_then_run(editor_page, owner):
    page = editor_page
    seed(owner)
    project_settings_update(
        project=owner.project,
        changes={"pruning": {"fifo_per_user_kind": 1}},
        actor=Actor.operator("erin"),
    )
    page.goto(f"/dashboard/p/{owner.project.pk}/pruning/", timeout=60000)
    page.get_by_role("button", name="Dry run now").click()
    expect(page.locator("#work")).to_contain_text("14 memories to prune")
    expect(page.locator("#work")).to_contain_text("and 2 more")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Run pruning and purge now…").click()
    expect(page.locator("#work")).to_contain_text("under way")
    shots(page, "operations-pruning-running")
    run = MaintenanceRun.objects.get(dry_run=False)
    prune_queued_run(run_id=run.pk)
    expect(page.locator(f"#run-{run.pk}")).to_contain_text("ok", timeout=8000)
    expect(page.locator("#work")).to_contain_text("14 pruned", timeout=8000)
    listed = owner.client.get("/api/v1/memories/", {"status": "pruned"}).json()
    assert listed["count"] == 14
    shots(page, "operations-pruning-done")


def test_activity_and_settings_and_team(editor_page, owner):
    page = editor_page
    rows = seed(owner, 3)
    memory_update(
        memory=rows[2],
        changes={"content": "maria likes black tea " * 20},
        actor=Actor.operator("erin"),
        intent="restore",
    )
    project_settings_update(
        project=owner.project, changes={"search": {"rrf_k": 40}}, actor=Actor.operator("olga")
    )
    page.goto(f"/dashboard/p/{owner.project.pk}/settings/")
    expect(page.locator("#recent-changes")).to_contain_text("olga")
    section = page.locator("#settings-search")
    section.get_by_label("keyword_weight").fill("0.7")
    section.get_by_role("button", name="Save search").click()
    expect(page.locator("#recent-changes li").first).to_contain_text("erin")
    expect(page.locator("#recent-changes li").first).to_contain_text("search.keyword_weight")
    page.locator("#settings-search").get_by_role(
        "button", name="Reset search.rrf_k to its default"
    ).click()
    expect(page.locator("#settings-search")).to_contain_text("search.rrf_k is back at its default")
    expect(page.locator("#recent-changes li").first).to_contain_text("search.rrf_k")
    shots(page, "operations-settings")
    page.goto(f"/dashboard/p/{owner.project.pk}/activity/")
    expect(page.locator(".activity-log")).to_contain_text("restore")
    page.locator(".activity-log .history-link").first.click()
    expect(page.locator(".memory-panel .history")).to_be_visible()
    shots(page, "operations-activity")
    page.locator("select[name=action]").select_option("settings")
    expect(page).to_have_url(re.compile("action=settings"))
    expect(page.locator(".activity-log")).not_to_contain_text("restore")
    page.goto(f"/dashboard/p/{owner.project.pk}/team/")
    page.get_by_label("Username").fill("nadia")
    page.get_by_label("E-mail").fill("nadia@example.org")
    page.get_by_role("button", name="Add to the team").click()
    expect(page.locator(".new-password")).to_contain_text("nadia")
    shots(page, "operations-team")
    page.locator("select[aria-label='role of nadia']").select_option("editor")
    expect(page.locator("#team")).to_contain_text("nadia is editor.")
