"""The review inbox in a browser: accept one (its row answers, the count follows),
edit one then accept it, reject the selected ones, and see the outcome through the
API; a viewer's inbox without actions. Screenshots at 1440 and 760 px
(var/screenshots/inbox-*)."""

from __future__ import annotations

from typing import Any

import pytest

from memories.services.configuration import project_settings_update
from memories.services.revisions import Actor
from synopsis.services.facts import messages_facts_extract
from tests.conftest import Tenant
from tests.console.browser.conftest import screenshot

pytestmark = pytest.mark.slow
expect = pytest.importorskip("playwright.sync_api").expect

TURNS = [
    ("maria", "I live in Lisbon and I work at Acme Corp."),
    ("omar", "I love jazz."),
]


def populate(tenant: Tenant) -> None:
    """Review on, then two users' turns mined: three proposals."""
    project_settings_update(
        project=tenant.project, changes={"facts": {"review": True}}, actor=Actor.system("test")
    )
    ids = []
    for user, text in TURNS:
        body = {"user": user, "role": "user", "content": text}
        response = tenant.client.post("/api/v1/memories/", body, format="json")
        assert response.status_code == 201, response.content
        ids.append(response.json()["memory"]["id"])
    assert messages_facts_extract(memory_ids=ids) == 3


def row(page: Any, text: str) -> Any:
    return page.locator("table.proposals tbody tr", has_text=text)


def api_facts(tenant: Tenant, status: str) -> set[str]:
    listed = tenant.client.get("/api/v1/memories/", {"kind": "fact", "status": status})
    assert listed.status_code == 200, listed.content
    return {memory["content"] for memory in listed.json()["results"]}


def test_accept_edit_and_reject_in_place(editor_page, owner):
    page = editor_page
    populate(owner)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"/dashboard/p/{owner.project.pk}/review/")
    expect(page).to_have_title(f"{owner.project.name}: review (3) · MemoryHub")
    expect(page.locator("#inbox-count")).to_have_text("3")
    screenshot(page, "inbox-1440")
    page.set_viewport_size({"width": 760, "height": 900})
    screenshot(page, "inbox-760")
    page.set_viewport_size({"width": 1440, "height": 900})

    row(page, "User loves jazz.").get_by_role("button", name="Accept").click()
    expect(row(page, "User loves jazz.")).to_contain_text("Accepted: active now.")
    expect(page.locator("#inbox-count")).to_have_text("2")
    expect(page.locator("#inbox-waiting")).to_have_text("2 proposals waiting")
    expect(page).to_have_title(f"{owner.project.name}: review (2) · MemoryHub")

    row(page, "User lives in Lisbon.").get_by_role("button", name="Edit").click()
    editing = page.locator("tr.editing")
    editing.locator("textarea[name=content]").fill("User lives in Porto.")
    editing.locator("input[name=value]").fill("porto")
    screenshot(page, "inbox-edit-1440")
    editing.get_by_role("button", name="Save and accept").click()
    expect(row(page, "User lives in Porto.")).to_contain_text("Edited and accepted")
    expect(page.locator("#inbox-count")).to_have_text("1")

    page.on("dialog", lambda dialog: dialog.accept())
    row(page, "User works at Acme Corp.").locator("input[name=ids]").check()
    page.get_by_role("button", name="Reject selected").click()
    expect(page.locator("#inbox-list .notice")).to_contain_text("1 rejected")
    expect(page.locator("#inbox-list")).to_contain_text("Nothing waits for review.")
    expect(page.locator("#inbox-count")).to_have_text("0")
    expect(page).to_have_title(f"{owner.project.name}: review (0) · MemoryHub")
    assert api_facts(owner, "active") == {"User loves jazz.", "User lives in Porto."}
    assert api_facts(owner, "trashed") == {"User works at Acme Corp."}
    assert api_facts(owner, "proposed") == set()


def test_a_viewer_reads_without_actions(viewer_page, owner):
    page = viewer_page
    populate(owner)
    page.goto(f"/dashboard/p/{owner.project.pk}/review/")
    expect(row(page, "User loves jazz.")).to_be_visible()
    expect(page.get_by_role("button", name="Accept")).to_have_count(0)
    expect(page.locator("input[name=ids]")).to_have_count(0)
