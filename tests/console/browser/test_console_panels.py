"""The panels beyond memories in a browser: the user page's synopsis (edit and lock a
part) and context preview (a prompt counted exactly), the Documents tab with a
Markdown upload followed until it is done and its chunks cited, and the 404 page.
Screenshots under var/screenshots/ (panels-*)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from ingestion.models import Document
from ingestion.services.documents import DocumentUpload, document_create
from memories.models import EndUser, Synopsis
from memories.providers.tokens import token_count
from memories.services.synopsis import SynopsisDraft, synopsis_store
from tests.conftest import Tenant, embed_pending, wait_until
from tests.console.browser.conftest import PHONE, SCREENSHOTS, screenshot
from tests.ingestion import files
from tests.ingestion.conftest import ingest_now

pytestmark = pytest.mark.slow

TURNS = [
    ("kitchen", "user", "I adopted a cat called Miso last spring"),
    ("kitchen", "assistant", "Miso is a lovely name for a cat!"),
    ("kitchen", "user", "She sleeps on my keyboard when I work from home"),
    ("garden", "user", "The tomatoes are finally ripe"),
]


@pytest.fixture
def maria(owner: Tenant) -> EndUser:
    """Maria: two rooms of turns, a fact and a goal, embedded; a synopsis whose context
    part is past its hour."""
    items = [
        {"user": "maria", "room": room, "role": role, "content": text} for room, role, text in TURNS
    ]
    items += [
        {"user": "maria", "kind": "fact", "content": "Maria lives in Lisbon", "confidence": 0.9},
        {"user": "maria", "kind": "goal", "content": "Plant basil in the spring"},
    ]
    response = owner.client.post("/api/v1/memories/batch/", {"memories": items})
    assert response.status_code == 201, response.json()
    embed_pending()
    maria = EndUser.objects.get(project=owner.project, external_id="maria")
    now = timezone.now()
    synopsis_store(
        end_user=maria,
        drafts=[
            SynopsisDraft(
                "identity",
                "Maria lives in Lisbon and has a cat, Miso.",
                "template",
                [],
                now - timedelta(minutes=10),
            ),
            SynopsisDraft(
                "context",
                "Open goal: plant basil in the spring.",
                "template",
                [],
                now - timedelta(hours=3),
            ),
        ],
    )
    return maria


def test_the_user_pages_synopsis_and_context_preview(editor_page: Any, owner, maria):
    page = editor_page
    page.goto(f"/dashboard/p/{owner.project.pk}/users/{maria.pk}/")
    identity = page.locator("#synopsis-identity")
    identity.wait_for()
    assert "Maria lives in Lisbon and has a cat, Miso." in identity.inner_text()
    assert identity.locator(".freshness").inner_text() == "fresh"
    assert page.locator("#synopsis-context .freshness").inner_text() == "stale"

    # edit the stale part: saved, locked, recorded under the operator's name
    page.locator("#synopsis-context").get_by_role("button", name="Edit").click()
    text = page.locator("#synopsis-context textarea")
    text.fill("Planting basil this spring; asks about cat food.")
    page.locator("#synopsis-context").get_by_role("button", name="Save").click()
    page.get_by_text("The context part is saved and locked.").wait_for()
    assert page.locator("#synopsis-context .tag.lock").is_visible()
    assert page.locator("#synopsis-context .freshness").inner_text() == "fresh"
    row = Synopsis.objects.get(end_user=maria)
    assert row.context_locked and row.context_edited_by == "operator:erin"

    # the context preview (its own tab), for the kitchen conversation
    page.get_by_role("navigation", name="This user").get_by_role("link", name="Context").click()
    page.wait_for_url(f"**/users/{maria.pk}/context/")
    panel = page.locator("#context-panel")
    panel.locator("textarea[name=query]").fill("What is her cat called?")
    panel.locator("input[name=room]").fill("kitchen")
    panel.locator("input[name=max_tokens]").fill("800")
    panel.get_by_role("button", name="Preview").click()
    prompt = panel.locator("pre.context-prompt")
    prompt.wait_for()
    text = prompt.text_content() or ""
    total = int(panel.locator(".total-tokens").inner_text())
    assert total == token_count(text) <= 800
    assert "Planting basil this spring" in text  # the edited synopsis part
    assert "I adopted a cat called Miso" in text
    assert panel.locator(".token-bar span").count() >= 2
    assert panel.locator("details.context-section").first.is_visible()
    screenshot(page, "panels-user-page")
    panel.screenshot(path=str(SCREENSHOTS / "panels-context-preview.png"))

    page.set_viewport_size(PHONE)
    screenshot(page, "panels-user-page-phone")


def test_a_markdown_upload_is_followed_until_done_and_cited(editor_page: Any, owner):
    page = editor_page
    page.goto(f"/dashboard/p/{owner.project.pk}/")
    page.get_by_role("navigation", name="Project").get_by_role("link", name="Documents").click()
    page.wait_for_url(re.compile(r"/documents/$"))
    assert page.get_by_text("No documents yet").is_visible()

    page.locator("input[name=file]").set_input_files(
        files=[{"name": "guide.md", "mimeType": "text/markdown", "buffer": files.markdown_bytes()}]
    )
    page.locator("input[name=title]").fill("Installation guide")
    page.get_by_role("button", name="Upload").click()
    page.get_by_text("“Installation guide” is queued").wait_for()
    row = page.locator("tr[data-status=queued]", has_text="Installation guide")
    row.wait_for()  # the list read itself again after the upload
    assert (
        page.locator("#documents-list")
        .get_attribute("hx-trigger", timeout=2000)
        .startswith("every 2s")
    )
    screenshot(page, "panels-documents-queued")

    # the pipeline runs here (as a worker would); the page's poll picks the result up
    document = wait_until(lambda: Document.objects.filter(source="guide.md").first())
    assert ingest_now(document.pk).status == "done"
    done = page.locator("tr[data-status=done]", has_text="Installation guide")
    done.wait_for(timeout=15_000)
    assert re.fullmatch(r"(\d+)/\1", done.locator(".progress small").inner_text())
    screenshot(page, "panels-documents-done")

    done.get_by_role("link", name="Installation guide").click()
    page.locator("li.chunk").first.wait_for()
    citations = page.locator(".chunk-meta .citation").all_inner_texts()
    assert "Installation guide" in citations[0]
    assert page.get_by_text("Fetch the archive from the releases page.").is_visible()
    screenshot(page, "panels-document-chunks")


def test_another_projects_document_is_the_console_404(editor_page: Any, owner, outsider):
    foreign = document_create(
        project=outsider.project,
        upload=DocumentUpload(data=files.markdown_bytes(), source="secret.md"),
    ).document
    page = editor_page
    response = page.goto(f"/dashboard/p/{owner.project.pk}/documents/{foreign.pk}/")
    assert response is not None and response.status == 404
    assert page.get_by_role("heading", name="There is nothing here").is_visible()
    assert "secret" not in page.content()
    page.get_by_role("link", name=f"Back to {owner.project.name}").click()
    page.wait_for_url(re.compile(rf"/dashboard/p/{owner.project.pk}/$"))
    screenshot(page, "panels-after-404")
    page.goto(f"/dashboard/p/{owner.project.pk}/documents/{foreign.pk}/")
    screenshot(page, "panels-404")
