"""A user's Facts and Rooms tabs in a browser: open the Facts tab, edit a fact's
confidence and see it there and through the API, mark a goal done; open a room's view
from the Rooms tab, see its buffer count and a summary's turns. Screenshots at 1440 and
760 px under var/screenshots/ (user-facts-*, user-rooms-*, room-view-*)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from memories.models import EndUser, Memory, Room
from synopsis.services.summaries import room_summarize
from tests.conftest import Tenant
from tests.console.browser.conftest import screenshot

pytestmark = pytest.mark.slow

WIDE = {"width": 1440, "height": 900}
NARROW = {"width": 760, "height": 900}


def write(tenant: Tenant, *items: dict[str, Any]) -> list[str]:
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": list(items)})
    assert response.status_code == 201, response.json()
    return [row["memory"]["id"] for row in response.json()["results"]]


@pytest.fixture
def maria(owner: Tenant) -> EndUser:
    """Maria: a fact (0.6), a goal due next summer, a room of 8 turns with a buffer of
    capacity 4 (summarized: 2 summaries, 4 turns in the buffer)."""
    write(
        owner,
        {
            "user": "maria",
            "kind": "fact",
            "content": "Maria lives in Lisbon",
            "content_json": {"category": "location", "slot": "location.home", "value": "Lisbon"},
            "confidence": 0.6,
        },
        {
            "user": "maria",
            "kind": "goal",
            "content": "Run a marathon",
            "content_json": {"status": "open", "due": "2027-06-01"},
        },
    )
    owner.client.post("/api/v1/rooms/", {"external_id": "kitchen"})
    small = {"buffer": {"max_size": 2, "buffer_multiplier": 2, "summary_batch_size": 2}}
    owner.client.patch("/api/v1/rooms/kitchen/", {"settings": small}, format="json")
    start = timezone.now() - timedelta(hours=1)
    write(
        owner,
        *(
            {
                "user": "maria",
                "room": "kitchen",
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"Turn {i}: about the cat Miso and her {i} naps.",
                "created_at": (start + timedelta(minutes=i)).isoformat(),
            }
            for i in range(8)
        ),
    )
    room_summarize(room_id=Room.objects.get(project=owner.project, external_id="kitchen").pk)
    return EndUser.objects.get(project=owner.project, external_id="maria")


def test_edit_a_facts_confidence_and_mark_a_goal_done(editor_page: Any, owner: Tenant, maria):
    page = editor_page
    page.set_viewport_size(WIDE)
    page.goto(f"/dashboard/p/{owner.project.pk}/users/{maria.pk}/")
    page.get_by_role("link", name="Facts", exact=True).click()
    expect(page).to_have_url(f"/dashboard/p/{owner.project.pk}/users/{maria.pk}/facts/")
    lisbon = Memory.objects.get(content="Maria lives in Lisbon")
    row = page.locator(f"#fact-{lisbon.pk}")
    expect(row.locator(".confidence-value")).to_have_text("0.60")
    screenshot(page, "user-facts-1440")
    # the text filter, then the first click on a result opens its editor (the text box's
    # blur reruns nothing)
    page.get_by_placeholder("words in the text").fill("Lisbon")
    expect(page.locator("#facts-list .result-line")).to_have_text("1 found")
    row.get_by_role("button", name="Edit").click()
    form = page.locator(f"#fact-{lisbon.pk} form")
    expect(form).to_be_visible()
    form.get_by_label("Confidence").fill("0.35")
    form.get_by_role("button", name="Save").click()
    expect(row.locator(".confidence-value")).to_have_text("0.35")
    expect(row.locator(".notice")).to_have_text("Saved.")
    assert row.locator(".confidence-bar span").get_attribute("style") == "width: 35%"
    api = owner.client.get(f"/api/v1/memories/{lisbon.public_id}/").json()
    assert api["confidence"] == 0.35
    page.get_by_placeholder("words in the text").fill("")
    goal = page.locator(f"#fact-{Memory.objects.get(content='Run a marathon').pk}")
    goal.get_by_role("button", name="Mark done").click()
    expect(goal.locator(".goal-state")).to_have_text("done")
    expect(goal.get_by_role("button", name="Mark not done")).to_be_visible()
    page.set_viewport_size(NARROW)
    screenshot(page, "user-facts-760")


def test_open_a_room_view_and_see_its_buffer(editor_page: Any, owner: Tenant, maria):
    page = editor_page
    page.set_viewport_size(WIDE)
    page.goto(f"/dashboard/p/{owner.project.pk}/users/{maria.pk}/rooms/")
    row = page.locator('tr[data-room="kitchen"]')
    expect(row.locator(".room-messages")).to_have_text("8")
    screenshot(page, "user-rooms-1440")
    row.get_by_role("link", name="kitchen").click()
    expect(page.locator(".buffer-unsummarized")).to_have_text("4")
    expect(page.locator(".buffer-window-count")).to_have_text("2")
    expect(page.locator(".room-head .room-messages")).to_have_text("8")
    newest = page.locator("li.summary").first
    newest.locator("details.summary-turns > summary").click()
    expect(newest.locator(".turns")).to_contain_text("Turn 2:")
    expect(newest.locator(".turns")).to_contain_text("Turn 3:")
    screenshot(page, "room-view-1440")
    page.set_viewport_size(NARROW)
    screenshot(page, "room-view-760")
    page.goto(f"/dashboard/p/{owner.project.pk}/users/{maria.pk}/rooms/")
    screenshot(page, "user-rooms-760")
