"""The console's second cut in a browser, the tasks no other browser test covers: the
first click after typing in the search is not lost; forget and undo from the trash page;
export a user (a download the API's import reads back); the context preview of a
4,000-token context stays under 60 KB of HTML."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memories.models import EndUser, Memory
from tests.conftest import Tenant, embed_pending

pytestmark = pytest.mark.slow

PREVIEW_HTML_MAX = 60_000  # bytes of the context panel's HTML at 4,000 tokens


def write(tenant: Tenant, *items: dict[str, Any]) -> None:
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": list(items)})
    assert response.status_code == 201, response.json()


@pytest.fixture
def maria(owner: Tenant) -> EndUser:
    write(
        owner,
        {"user": "maria", "room": "kitchen", "role": "user", "content": "I adopted two cats"},
        {"user": "maria", "kind": "fact", "content": "Maria's cats are called Miso and Tofu"},
        {"user": "maria", "kind": "goal", "content": "Plant basil in the spring"},
    )
    embed_pending()
    return EndUser.objects.get(project=owner.project, external_id="maria")


def tab(owner: Tenant, user: EndUser, name: str = "") -> str:
    return f"/dashboard/p/{owner.project.pk}/users/{user.pk}/{name}"


def test_the_first_click_after_typing_in_the_search_is_not_lost(editor_page, owner, maria):
    page = editor_page
    page.goto(tab(owner, maria, "memories/"))
    search = page.get_by_placeholder("Search this user’s memories as you type…")
    search.press_sequentially("cats", delay=40)
    page.locator("#search-results .result-line", has_text="“cats”").wait_for()
    # the click blurs the search box: it must open the editor, not rerun the search
    first = page.locator("#search-results article.memory").first
    first.get_by_role("button", name="Edit").click()
    page.locator("#search-results article.memory.editing").wait_for(timeout=3_000)


def test_forget_then_undo_from_the_trash(editor_page, owner, maria):
    page = editor_page
    page.goto(tab(owner, maria, "memories/"))
    goal = page.locator("#memories article.memory", has_text="Plant basil")
    goal.get_by_role("button", name="Forget…").click()
    page.locator("#memories article.confirm").get_by_role("button", name="Forget it").click()
    page.locator("#memories article.forgotten").wait_for()
    page.get_by_role("navigation", name="Project").get_by_role("link", name="Trash").click()
    row = page.locator("#trash-list tr", has_text="Plant basil")
    row.wait_for()
    row.locator("input[name=ids]").check()
    page.get_by_role("button", name="Restore selected").click()
    page.locator("#trash-list .notice", has_text="1 restored.").wait_for()
    memory = Memory.objects.get(content__startswith="Plant basil")
    assert memory.status == "active"


def test_export_a_user(editor_page, owner, maria, outsider):
    page = editor_page
    page.goto(tab(owner, maria))
    with page.expect_download() as download:
        page.get_by_role("link", name="Export").click()
    saved = download.value
    assert re.fullmatch(r"memoryhub-user-maria-\d{8}T\d{6}Z\.json", saved.suggested_filename)
    document = json.loads(Path(saved.path()).read_text(encoding="utf-8"))
    assert len(document["memories"]) == 3
    imported = outsider.client.post("/api/v1/import/", document, format="json")
    assert imported.status_code == 201


def test_a_4000_token_context_preview_stays_under_60_kb(editor_page, owner, maria):
    write(
        owner,
        *[
            {
                "user": "maria",
                "room": "kitchen",
                "role": "user" if i % 2 else "assistant",
                "content": f"Day {i}: the cats knocked over plant number {i} and then "
                f"{'slept on the keyboard for an hour' if i % 3 else 'chased a laser dot'}; "
                + "we talked about cat food, basil and the garden again. "
                * 4,
            }
            for i in range(200)
        ],
    )
    embed_pending()
    page = editor_page
    page.goto(tab(owner, maria, "context/"))
    panel = page.locator("#context-panel")
    panel.locator("textarea[name=query]").fill("What did the cats do to the plants?")
    panel.locator("input[name=room]").fill("kitchen")
    panel.locator("input[name=max_tokens]").fill("4000")
    panel.get_by_role("button", name="Preview").click()
    panel.locator("pre.context-prompt").wait_for()
    total = int(panel.locator(".total-tokens").inner_text())
    assert 3_000 < total <= 4_000  # a full budget: the bound is not an empty preview
    size = len(panel.inner_html().encode())
    assert size < PREVIEW_HTML_MAX, size
    assert panel.get_by_text(re.compile(r"and \d+ more dropped")).count() >= 1
