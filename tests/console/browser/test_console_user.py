"""The user page in a browser: find a user from the list, her overview, then the
Memories tab: live-search her memories, filter (the address keeps them), edit one and
see it through the API, pin, forget to the trash and undo, restore a version,
forget the whole user, a `<script>` memory rendered inert, another project's user is a
404, a viewer has nothing to click that changes anything. Screenshots of the user page
and the search results (laptop and phone) under var/screenshots/."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from memories.models import EndUser, Memory
from tests.conftest import Tenant, embed_pending
from tests.console.browser.conftest import PHONE, screenshot

pytestmark = pytest.mark.slow

MARIA = [
    ("kitchen", "user", "I adopted a cat called Miso last spring"),
    ("kitchen", "assistant", "Miso is a lovely name for a cat!"),
    ("kitchen", "user", "She sleeps on my keyboard when I work from home"),
    ("garden", "user", "The tomatoes are finally ripe"),
    ("garden", "assistant", "Time for a salad with basil then."),
]


def write(tenant: Tenant, *items: dict[str, Any]) -> None:
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": list(items)})
    assert response.status_code == 201, response.json()


@pytest.fixture
def maria(owner: Tenant) -> EndUser:
    """Maria with two rooms of turns, a fact and a goal, all embedded; Bob, one turn."""
    write(
        owner,
        *[
            {"user": "maria", "room": room, "role": role, "content": text}
            for room, role, text in MARIA
        ],
        {
            "user": "maria",
            "kind": "fact",
            "content": "Maria has a cat named Miso",
            "metadata": {"category": "preference"},
        },
        {"user": "maria", "kind": "goal", "content": "Plant basil in the spring"},
        {"user": "bob", "room": "office", "role": "user", "content": "Bob prefers dogs"},
    )
    embed_pending()
    return EndUser.objects.get(project=owner.project, external_id="maria")


def user_url(owner: Tenant, user: EndUser, tab: str = "memories/") -> str:
    """A tab of the user's page (the Memories tab by default; "" the overview)."""
    return f"/dashboard/p/{owner.project.pk}/users/{user.pk}/{tab}"


def api_memory(owner: Tenant, content_start: str) -> dict[str, Any]:
    memory = Memory.objects.get(project=owner.project, content__startswith=content_start)
    return owner.client.get(f"/api/v1/memories/{memory.pk}/").json()


def row(page: Any, text: str) -> Any:
    """The memory's row in the list of all memories."""
    return page.locator("#memories article.memory", has_text=text)


def test_find_her_and_search_as_you_type(editor_page, owner, maria):
    page = editor_page
    page.goto(f"/dashboard/p/{owner.project.pk}/users/")
    page.get_by_role("link", name="maria", exact=True).click()
    page.wait_for_url(re.compile(rf"/users/{maria.pk}/$"))
    assert page.locator("h1", has_text="maria").is_visible()
    latest = page.locator(".user-recent")
    assert latest.get_by_text("Time for a salad with basil then.").is_visible()
    screenshot(page, "user-page")
    page.get_by_role("navigation", name="This user").get_by_role("link", name="Memories").click()
    page.wait_for_url(re.compile(rf"/users/{maria.pk}/memories/$"))

    page.get_by_placeholder("Search this user’s memories as you type…").press_sequentially(
        "cats", delay=40
    )
    # Each keystroke may answer; wait for the answer to the whole word, or a later
    # swap would replace (and close) the explain opened below.
    page.locator("#search-results .result-line", has_text="“cats” in auto mode").wait_for()
    marks = page.locator("#search-results mark")
    assert "cat" in marks.first.inner_text().lower()
    results = page.locator("#search-results article.memory")
    assert "Bob" not in page.locator("#search-results").inner_text()
    explain = results.first.locator("details.explain")
    explain.locator("summary").click()
    expect(explain.get_by_text("keyword rank")).to_be_visible()
    screenshot(page, "user-search")

    # a select reruns the search at once; the text's change on blur does not (it
    # replaced the result under a click: the first click after typing was lost)
    page.select_option("select[name=mode]", "keyword")
    page.locator("#search-results .result-line", has_text="“cats” in keyword mode").wait_for()
    page.select_option("select[name=mode]", "vector")  # meaning only: no shared word
    page.get_by_placeholder("Search this user’s memories as you type…").fill(
        "what is her cat called"
    )
    page.locator("#search-results .result-line", has_text="called” in vector mode").wait_for()
    assert "Miso" in results.first.inner_text()

    page.set_viewport_size(PHONE)
    screenshot(page, "user-page-phone")


def test_the_filters_keep_the_tab_and_the_address(editor_page, owner, maria):
    page = editor_page
    page.goto(user_url(owner, maria))
    page.locator("form.filters select[name=kind]").select_option("goal")
    page.locator("#memories .result-line", has_text="1 memory").wait_for()
    assert "/memories/?" in page.url and "kind=goal" in page.url
    assert page.locator("#memories article.memory").count() == 1
    page.reload()  # the address alone gives the same list
    assert page.locator("#memories article.memory").count() == 1


def test_edit_a_memory_and_see_it_through_the_api(editor_page, owner, maria):
    page = editor_page
    page.goto(user_url(owner, maria))
    fact = row(page, "Maria has a cat named Miso")
    fact.get_by_role("button", name="Edit").click()
    form = page.locator("#memories article.memory.editing")
    form.locator("textarea[name=metadata]").fill("[1, 2]")
    form.get_by_role("button", name="Save").click()
    form.get_by_text("Must be a JSON object").wait_for()
    assert api_memory(owner, "Maria has a cat")["metadata"] == {"category": "preference"}
    form = page.locator("#memories article.memory.editing")
    form.locator("textarea[name=content]").fill("Maria has two cats, Miso and Tofu")
    form.locator("textarea[name=metadata]").fill('{"category": "preference", "count": 2}')
    form.locator("input[name=importance]").fill("0.9")
    form.get_by_role("button", name="Save").click()
    edited = row(page, "Maria has two cats, Miso and Tofu")
    edited.get_by_text("Saved.").wait_for()
    seen = api_memory(owner, "Maria has two cats")
    assert seen["metadata"] == {"category": "preference", "count": 2}
    assert seen["importance"] == 0.9
    assert seen["embedding_status"] == "pending"
    assert edited.get_by_text("embedding pending").is_visible()
    embed_pending()  # what a worker does; the row asks again every 2 s while pending
    edited.get_by_text("embedding done").wait_for(timeout=8_000)


def test_pin_then_forget_with_confirmation(editor_page, owner, maria):
    page = editor_page
    page.goto(user_url(owner, maria))
    goal = row(page, "Plant basil")
    goal.get_by_role("button", name="Pin", exact=True).click()
    goal.get_by_text("Pinned.").wait_for()
    assert goal.locator(".tag.pin").is_visible()
    assert api_memory(owner, "Plant basil")["pinned"] is True

    goal.get_by_role("button", name="Forget…").click()
    confirm = page.locator("#memories article.memory.confirm")
    confirm.get_by_text("Forget this goal?").wait_for()
    assert Memory.objects.filter(content__startswith="Plant basil").exists()
    confirm.get_by_role("button", name="Forget it").click()
    forgotten = page.locator("#memories article.forgotten", has_text="Plant basil")
    forgotten.get_by_text("Moved to the trash").wait_for()
    assert api_memory(owner, "Plant basil")["status"] == "trashed"
    forgotten.get_by_role("button", name="Undo").click()
    row(page, "Plant basil").get_by_text("Back from the trash.").wait_for()
    assert api_memory(owner, "Plant basil")["status"] == "active"


def test_restore_a_version(editor_page, owner, maria):
    page = editor_page
    page.goto(user_url(owner, maria))
    fact = row(page, "Maria has a cat named Miso")
    fact.get_by_role("button", name="Edit").click()
    form = page.locator("#memories article.memory.editing")
    form.locator("textarea[name=content]").fill("Maria has a dog named Rex")
    form.get_by_role("button", name="Save").click()
    edited = row(page, "Maria has a dog named Rex")
    edited.get_by_text("Saved.").wait_for()
    edited.get_by_role("button", name="History").click()
    history = edited.locator(".history")
    history.get_by_text("current version").wait_for()
    assert history.locator("li.revision").count() == 2
    history.get_by_role("button", name="Restore this version").click()
    restored = row(page, "Maria has a cat named Miso")
    restored.get_by_text("Restored.").wait_for()
    assert restored.locator("li.revision").count() == 3
    screenshot(page, "user-memory-history")
    seen = api_memory(owner, "Maria has a cat named Miso")
    assert seen["content"] == "Maria has a cat named Miso"
    revisions = owner.client.get(f"/api/v1/memories/{seen['id']}/revisions/").json()["results"]
    assert (revisions[0]["actor_type"], revisions[0]["actor"]) == ("operator", "erin")


def test_forget_this_user(editor_page, owner, maria):
    page = editor_page
    page.goto(user_url(owner, maria))
    page.get_by_role("link", name="Forget this user…").click()
    page.get_by_role("heading", name="Forget maria?").wait_for()
    assert page.get_by_text("7 memories in all").is_visible()
    screenshot(page, "user-forget-confirm")
    page.get_by_role("button", name=re.compile("^Forget maria and 7 memories")).click()
    page.get_by_role("heading", name="maria is forgotten").wait_for()
    assert page.get_by_text("Deleted 7 memories").is_visible()
    assert owner.client.get("/api/v1/users/maria/").status_code == 404
    assert owner.client.get("/api/v1/users/bob/").status_code == 200


def test_a_script_memory_is_rendered_inert(editor_page, owner, maria):
    page = editor_page
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    # (PostgreSQL's text search parser skips what is between <script> tags: the other
    # words find it by keyword)
    text = "Maria pasted <script>alert(1)</script> into the chat"
    write(
        owner, {"user": "maria", "content": text, "metadata": {"x": "<img src=x onerror=alert(2)>"}}
    )
    page.goto(user_url(owner, maria))
    script_row = row(page, "<script>alert(1)</script>")
    assert script_row.locator(".memory-content").inner_text() == text
    assert "<img src=x onerror=alert(2)>" in script_row.locator(".memory-metadata").inner_text()
    page.get_by_placeholder("Search this user’s memories as you type…").fill("pasted")
    found = page.locator("#search-results .memory-content", has_text="<script>alert(1)</script>")
    found.wait_for()
    assert found.inner_text() == text and found.locator("mark").inner_text() == "pasted"
    script_row.get_by_role("button", name="Edit").click()
    page.locator("#memories article.memory.editing").wait_for()
    page.wait_for_timeout(300)
    assert dialogs == []
    assert page.locator("script:not([src])").count() == 0  # no inline script came in


def test_another_projects_user_is_a_404(editor_page, second_project):
    write(second_project, {"user": "zoe", "content": "Zoe's secret"})
    zoe = EndUser.objects.get(project=second_project.project)
    response = editor_page.goto(user_url(second_project, zoe))
    assert response.status == 404
    assert "Zoe's secret" not in editor_page.content()


def test_a_viewer_reads_but_has_nothing_to_change(viewer_page, owner, maria):
    page = viewer_page
    page.goto(user_url(owner, maria))
    assert row(page, "Maria has a cat named Miso").is_visible()
    for name in ("Edit", "Pin", "Forget…"):
        assert page.get_by_role("button", name=name, exact=True).count() == 0
    assert page.get_by_role("link", name="Forget this user…").count() == 0
    row(page, "Maria has a cat named Miso").get_by_role("button", name="History").click()
    page.locator(".history li.revision").first.wait_for()
    assert page.get_by_role("button", name="Restore this version").count() == 0
