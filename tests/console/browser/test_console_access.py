"""The console's access in a browser: log in, the overview, an API key created (shown
once) and revoked, a viewer who cannot edit, another project's page a 404, and the
screenshots of the login, projects, overview and users pages (var/screenshots/)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from memories.models import ApiKey
from tests.console.browser.conftest import PHONE, screenshot

pytestmark = pytest.mark.slow
expect = pytest.importorskip("playwright.sync_api").expect

NAMES = ["Maria Lopez", "Omar Haddad", "Lena Fischer", "Kenji Sato", "Ada Byrne", "Tomas Novak"]
TURNS = [
    "I adopted a cat called Miso last week",
    "Can you remind me when my passport expires?",
    "I'm allergic to peanuts, please keep that in mind",
    "We are moving to Lisbon in the spring",
]


def populate(tenant) -> None:
    """A few users with memories spread over the last weeks (what the pages show)."""
    now = timezone.now()
    memories = []
    for index, name in enumerate(NAMES):
        user = name.split()[0].lower()
        for day in range(0, 28, 2 + index % 3):
            for turn, text in enumerate(TURNS[: 1 + (day + index) % 4]):
                memories.append(
                    {
                        "user": user,
                        "room": f"{user}-chat",
                        "role": "user",
                        "content": text,
                        "created_at": (now - timedelta(days=day, minutes=turn)).isoformat(),
                    }
                )
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": memories})
    assert response.status_code == 201, response.content
    for name in NAMES:
        user = name.split()[0].lower()
        tenant.client.patch(f"/api/v1/users/{user}/", {"name": name})


def test_log_in_and_see_the_project(page, editor, owner):
    populate(owner)
    page.goto("/dashboard/")
    assert page.url.endswith("/login/?next=/dashboard/")
    screenshot(page, "console-login")
    page.fill("#id_username", editor.username)
    page.fill("#id_password", "not the password")
    page.click("button[type=submit]")
    assert "Please enter a correct username and password" in page.inner_text("main")
    page.fill("#id_username", editor.username)
    page.fill("#id_password", editor.password)
    page.click("button[type=submit]")
    page.wait_for_url("**/dashboard/")
    assert owner.project.name in page.inner_text("main")
    screenshot(page, "console-projects")

    page.click(f"text={owner.project.name}")
    page.wait_for_url(f"**/dashboard/p/{owner.project.pk}/")
    assert page.locator("svg.bars .value").count() == 30
    assert "Added per day" in page.inner_text("main")
    screenshot(page, "console-overview")
    page.set_viewport_size(PHONE)
    screenshot(page, "console-overview-phone")


def test_users_list_search_and_sort(editor_page, owner):
    populate(owner)
    page = editor_page
    page.goto(f"/dashboard/p/{owner.project.pk}/users/")
    rows = page.locator("#user-results tbody tr")
    assert rows.count() == len(NAMES)
    screenshot(page, "console-users")
    page.fill("#id_q", "fisch")  # a name, live: HTMX swaps the results in
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("lena")
    expect(page).to_have_url(re.compile(r"q=fisch"))
    page.fill("#id_q", "")
    expect(rows).to_have_count(len(NAMES))
    page.click("#user-results th >> text=User")
    expect(page).to_have_url(re.compile(r"sort=external_id"))
    expect(rows.first).to_contain_text("ada")


def test_create_an_api_key_shown_once_then_revoke_it(editor_page, owner):
    page = editor_page
    page.goto(f"/dashboard/p/{owner.project.pk}/keys/")
    page.fill("#id_name", "support bot")
    page.click("button:has-text('Create key')")
    raw = page.locator("#new-key").inner_text()
    assert raw.startswith("mh_")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/v1/memories/?user=alice").status_code == 200
    screenshot(page, "console-keys")

    key = ApiKey.objects.get(project=owner.project, name="support bot")
    row = page.locator(f"#key-{key.pk}")
    row.locator("text=Revoke…").click()
    expect(row).to_contain_text("cannot be undone")  # asked in place (HTMX)
    row.locator("button:has-text('Revoke')").click()
    expect(row).to_contain_text("revoked")
    assert page.locator("#new-key").count() == 0  # the raw key is gone for good
    assert api.get("/api/v1/memories/?user=alice").status_code == 401
    page.reload()
    assert raw not in page.content()


def test_a_viewer_cannot_edit(viewer_page, owner):
    page = viewer_page
    page.goto(f"/dashboard/p/{owner.project.pk}/keys/")
    assert page.locator("text=Create key").count() == 0
    assert page.locator("text=Revoke…").count() == 0
    page.goto(f"/dashboard/p/{owner.project.pk}/settings/")
    assert page.locator("button:has-text('Save')").count() == 0
    assert page.locator("#id_rrf_k").is_disabled()
    screenshot(page, "console-settings-viewer")
    # forced: a POST with a valid CSRF token is refused for the role, not the token
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        f"/dashboard/p/{owner.project.pk}/keys/new/",
        form={"name": "sneaky"},
        headers={"X-CSRFToken": token},
    )
    assert response.status == 403
    assert "You may not do that" in response.text()  # the role's refusal
    assert "CSRF verification failed" not in response.text()  # not the token's
    assert not ApiKey.objects.filter(name="sneaky").exists()


def test_a_new_project_says_how_to_begin(editor_page, owner, live_server):
    editor_page.goto(f"/dashboard/p/{owner.project.pk}/")
    first_steps = editor_page.locator("#first-steps")
    expect(first_steps).to_contain_text("Send this project its first memory")
    expect(first_steps).to_contain_text(f"{live_server.url}/api/v1/memories/")
    screenshot(editor_page, "console-overview-new")


def test_another_projects_page_is_404(editor_page, owner, second_project):
    response = editor_page.goto(f"/dashboard/p/{second_project.project.pk}/")
    assert response.status == 404
    response = editor_page.goto(f"/dashboard/p/{second_project.project.pk}/users/")
    assert response.status == 404
