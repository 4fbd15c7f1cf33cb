"""The project's Memories table in a browser: filter, select rows across two users,
archive them and see them archived (on the page and through the API); forget one after
the confirmation; a large archive queued for a worker, its panel polling until the
outcome; a viewer's table without actions. Screenshots at 1440 and 760 px
(var/screenshots/memory-table-*)."""

from __future__ import annotations

from typing import Any

import pytest

from console.services import memory_table as table_service
from memories.services import bulk
from memories.tasks import bulk_apply_task
from tests.conftest import Tenant
from tests.console.browser.conftest import screenshot

pytestmark = pytest.mark.slow
expect = pytest.importorskip("playwright.sync_api").expect

FACTS = [
    ("maria", "Maria lives in Lisbon"),
    ("maria", "Maria is allergic to peanuts"),
    ("omar", "Omar plays the oud on Sundays"),
    ("omar", "Omar works night shifts at the port"),
]


def populate(tenant: Tenant) -> None:
    """Two users' facts and a few turns, through the API."""
    items: list[dict[str, Any]] = [
        {"user": user, "kind": "fact", "content": text, "metadata": {"source": "chat"}}
        for user, text in FACTS
    ]
    items += [
        {"user": user, "room": f"{user}-chat", "role": "user", "content": f"hello from {user}"}
        for user in ("maria", "omar")
    ]
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": items})
    assert response.status_code == 201, response.content


def row(page: Any, text: str) -> Any:
    return page.locator("table.memory-table tbody tr", has_text=text)


def api_status(tenant: Tenant, user: str, text: str) -> str:
    """The fact's status as the API lists it."""
    for status in ("active", "archived", "trashed"):
        listed = tenant.client.get("/api/v1/memories/", {"user": user, "status": status})
        assert listed.status_code == 200, listed.content
        if any(m["content"] == text for m in listed.json()["results"]):
            return status
    return "missing"


def test_filter_select_and_archive_across_two_users(editor_page, owner):
    page = editor_page
    populate(owner)
    page.goto(f"/dashboard/p/{owner.project.pk}/memories/")
    expect(page.locator("#memory-table .result-line")).to_contain_text("6 memories match")
    page.select_option("select[name=kind]", "fact")
    expect(page.locator("#memory-table .result-line")).to_contain_text("4 memories match")
    expect(row(page, "hello from maria")).to_have_count(0)
    chosen = ["Maria lives in Lisbon", "Maria is allergic to peanuts", "Omar plays the oud"]
    for text in chosen:
        row(page, text).locator("input[name=ids]").check()
    screenshot(page, "memory-table-selected-1440", full_page=False)
    page.get_by_role("button", name="Archive").click()
    expect(page.locator("#memory-table .notice")).to_have_text("3 archived.")
    for text in chosen:
        expect(row(page, text).locator("td.status")).to_have_text("archived")
    expect(row(page, "Omar works night shifts").locator("td.status")).to_have_text("active")
    assert api_status(owner, "maria", "Maria lives in Lisbon") == "archived"
    assert api_status(owner, "omar", "Omar plays the oud on Sundays") == "archived"
    assert api_status(owner, "omar", "Omar works night shifts at the port") == "active"
    screenshot(page, "memory-table-archived-1440")
    page.set_viewport_size({"width": 760, "height": 900})
    screenshot(page, "memory-table-archived-760")


def test_forget_is_confirmed_then_moves_to_the_trash(editor_page, owner):
    page = editor_page
    populate(owner)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"/dashboard/p/{owner.project.pk}/memories/")
    page.fill("input[name=user]", "omar")
    page.press("input[name=user]", "Enter")
    expect(page.locator("#memory-table .result-line")).to_contain_text("3 memories match")
    page.fill("input[name=q]", "night")  # typed, not submitted: leaving the box reloads nothing
    tick = row(page, "Omar works night shifts").locator("input[name=ids]")
    tick.check()
    page.wait_for_timeout(600)
    expect(tick).to_be_checked()  # the first click after typing is kept
    page.get_by_role("button", name="Forget…").click()
    confirm = page.locator("form.confirm")
    expect(confirm).to_contain_text("Forget 1 memory?")
    expect(confirm).to_contain_text("for 7 days")
    screenshot(page, "memory-table-forget-confirm-1440", full_page=False)
    assert api_status(owner, "omar", "Omar works night shifts at the port") == "active"
    confirm.get_by_role("button", name="Forget 1").click()
    expect(page.locator("#memory-table .notice")).to_have_text("1 moved to the trash.")
    expect(row(page, "Omar works night shifts").locator("td.status")).to_have_text("trashed")
    assert api_status(owner, "omar", "Omar works night shifts at the port") == "trashed"


def test_a_viewer_sees_the_table_without_actions(viewer_page, owner):
    page = viewer_page
    populate(owner)
    page.goto(f"/dashboard/p/{owner.project.pk}/memories/?metadata=source%3Dchat")
    expect(page.locator("#memory-table .result-line")).to_contain_text("4 memories match")
    expect(page.locator("input[name=ids]")).to_have_count(0)
    expect(page.get_by_role("button", name="Archive")).to_have_count(0)
    row(page, "Maria lives in Lisbon").locator("summary").click()
    screenshot(page, "memory-table-viewer-1440", full_page=False)


def test_a_large_archive_runs_in_the_background_and_its_panel_follows_it(
    editor_page, owner, monkeypatch
):
    """Past the threshold (lowered to 2 here) the archive is queued: the panel shows its
    progress and polls; once the run is carried out (here by the test, as the worker
    would) it shows the outcome, and its link reloads the table."""
    monkeypatch.setattr(table_service, "BACKGROUND_OVER", 2)
    sent: list[int] = []
    monkeypatch.setattr(bulk, "task_send", lambda name, args: sent.extend(args))
    page = editor_page
    populate(owner)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"/dashboard/p/{owner.project.pk}/memories/?kind=fact")
    chosen = [text for _, text in FACTS[:3]]
    for text in chosen:
        row(page, text).locator("input[name=ids]").check()
    page.get_by_role("button", name="Archive").click()
    panel = page.locator(".bulk-run")
    expect(panel).to_contain_text("0 of 3 archived…")
    expect(panel.get_by_role("progressbar")).to_be_visible()
    expect(row(page, chosen[0]).locator("td.status")).to_have_text("active")  # not yet
    screenshot(page, "memory-table-bulk-running-1440", full_page=False)
    page.set_viewport_size({"width": 760, "height": 900})
    screenshot(page, "memory-table-bulk-running-760", full_page=False)
    assert len(sent) == 1
    bulk_apply_task(sent[0])  # what the worker does with the message
    expect(panel).to_contain_text("3 archived.", timeout=5000)  # the next poll
    screenshot(page, "memory-table-bulk-done-760", full_page=False)
    page.set_viewport_size({"width": 1440, "height": 900})
    panel.get_by_role("link", name="Reload the table").click()
    for text in chosen:
        expect(row(page, text).locator("td.status")).to_have_text("archived")
    expect(page.locator(".bulk-run")).to_have_count(0)
    assert api_status(owner, "maria", "Maria lives in Lisbon") == "archived"
    assert api_status(owner, "omar", "Omar plays the oud on Sundays") == "archived"
    assert api_status(owner, "omar", "Omar works night shifts at the port") == "active"
