"""Every console page, at a laptop's 1440 px and a narrow 760 px, on a project with
something on each page: each answers 200, nothing sticks out sideways at 760 px (a
table scrolls in its own box, the page does not), and a screenshot of each goes to
var/screenshots/tour-<page>-<width>.png for people to look at."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from memories.models import EndUser, Memory, Room
from memories.services.configuration import project_settings_update
from memories.services.pruning import prune_run
from memories.services.revisions import Actor
from memories.services.trash import memories_trash
from synopsis.models import LlmCall
from tests.conftest import Tenant, embed_pending
from tests.console.browser.conftest import screenshot

pytestmark = pytest.mark.slow

WIDTHS = (1440, 760)
PROJECT_PAGES = (
    "console-overview",
    "console-users",
    "console-memories",
    "console-inbox",
    "console-documents",
    "console-jobs",
    "console-pruning",
    "console-trash",
    "console-activity",
    "console-usage",
    "console-keys",
    "console-team",
    "console-settings",
)
USER_PAGES = (
    "console-user",
    "console-user-memories",
    "console-user-facts",
    "console-user-rooms",
    "console-user-context",
    "console-user-synopsis",
    "console-user-documents",
)
OPERATOR = Actor.operator("erin")


def write(tenant: Tenant, *items: dict[str, Any]) -> None:
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": list(items)})
    assert response.status_code == 201, response.json()


@pytest.fixture
def furnished(owner: Tenant) -> EndUser:
    """A project with a bit of everything: two users' rooms, facts, a goal, a trashed
    memory, a proposal waiting for review, a dry run, an LLM call."""
    turns = [
        ("kitchen", "user", "I adopted a cat called Miso last spring"),
        ("kitchen", "assistant", "Miso is a lovely name for a cat!"),
        ("garden", "user", "The tomatoes are finally ripe, and the basil too"),
    ]
    write(
        owner,
        *[{"user": "maria", "room": r, "role": role, "content": t} for r, role, t in turns],
        {"user": "maria", "kind": "fact", "content": "Maria has a cat named Miso"},
        {"user": "maria", "kind": "goal", "content": "Plant basil in the spring"},
        {"user": "maria", "content": "An old note to forget " + "and a long tail " * 40},
        {"user": "bob", "room": "office", "role": "user", "content": "Bob prefers dogs"},
    )
    embed_pending()
    maria = EndUser.objects.get(project=owner.project, external_id="maria")
    note = Memory.objects.get(project=owner.project, content__startswith="An old note")
    memories_trash(project=owner.project, ids=[note.pk], actor=OPERATOR)
    project_settings_update(
        project=owner.project, changes={"facts": {"review": True}}, actor=OPERATOR
    )
    Memory.objects.create(
        project=owner.project,
        end_user=maria,
        kind="fact",
        content="Maria likes green tea",
        content_hash="tea",
        status=Memory.Status.PROPOSED,
        confidence=0.7,
    )
    prune_run(project=owner.project, actor=OPERATOR, dry_run=True, purge=True)
    LlmCall.objects.create(
        project=owner.project,
        purpose="summary",
        model="tiny",
        status="ok",
        prompt_tokens=900,
        completion_tokens=120,
        created_at=timezone.now(),
    )
    return maria


def pages(owner: Tenant, maria: EndUser) -> list[tuple[str, str]]:
    project = owner.project.pk
    kitchen = Room.objects.get(project=owner.project, external_id="kitchen")
    found = [(name, reverse(name, args=[project])) for name in PROJECT_PAGES]
    found += [(name, reverse(name, args=[project, maria.pk])) for name in USER_PAGES]
    room = reverse("console-user-room-view", args=[project, maria.pk, kitchen.pk])
    return [("dashboard", reverse("dashboard")), *found, ("console-user-room-view", room)]


def test_every_page_at_both_widths(editor_page, owner, furnished):
    page = editor_page
    wide: list[str] = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for name, url in pages(owner, furnished):
            response = page.goto(url)
            assert response is not None and response.status == 200, (name, url)
            page.wait_for_load_state("networkidle")
            scroll = page.evaluate("document.documentElement.scrollWidth")
            if scroll > width + 1:
                wide.append(f"{name} at {width}: {scroll} px")
            screenshot(page, f"tour-{name.removeprefix('console-')}-{width}")
    assert wide == [], wide
