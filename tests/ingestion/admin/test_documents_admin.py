"""Documents in the admin: the list with its columns and filters, read-only pages, and
the re-ingest and delete actions going through the services."""

from __future__ import annotations

import pytest

from ingestion.models import Document
from memories.models import Embedding, Memory, MemoryRevision
from tests.ingestion import files
from tests.ingestion.conftest import chunks, ingest_now, upload

pytestmark = pytest.mark.usefixtures("hashing")
CHANGELIST = "/admin/ingestion/document/"


@pytest.fixture
def documents(owner):
    shared = ingest_now(upload(owner.client, "guide.md", files.markdown_bytes()).json()["id"])
    alices = upload(owner.client, "notes.md", b"# Notes\n\nHers.", user="alice").json()
    return shared, Document.objects.get(pk=alices["id"])


def test_the_list_shows_scope_status_progress_and_size(admin_client, documents):
    shared, alices = documents
    page = admin_client.get(CHANGELIST).content.decode()
    for text in (
        "Installation guide",
        "guide.md",
        "notes.md",
        "alice",
        "project",
        "done",
        "queued",
        "1/1 (100%)",
    ):
        assert text in page, text
    filtered = admin_client.get(CHANGELIST, {"scope": "user"}).content.decode()
    assert "alice" in filtered and "guide.md" not in filtered
    found = admin_client.get(CHANGELIST, {"q": "notes.md"}).content.decode()
    assert "notes.md" in found and "guide.md" not in found


def test_a_document_page_is_read_only(admin_client, documents):
    shared, _ = documents
    page = admin_client.get(f"{CHANGELIST}{shared.pk}/change/")
    assert page.status_code == 200
    assert b'name="title"' not in page.content  # no form fields: nothing to edit here
    assert admin_client.get(f"{CHANGELIST}add/").status_code == 403


def test_the_actions_reingest_and_delete_through_the_services(admin_client, documents, owner):
    shared, alices = documents
    admin_client.post(
        CHANGELIST, {"action": "reingest", "_selected_action": [str(shared.pk)]}, follow=True
    )
    shared.refresh_from_db()
    assert (shared.version, shared.status) == (2, "queued")

    ids = [chunk.pk for chunk in chunks(shared.pk)]
    response = admin_client.post(
        CHANGELIST,
        {"action": "delete_documents", "_selected_action": [str(shared.pk), str(alices.pk)]},
        follow=True,
    )
    assert b"Deleted 2 documents and 1 chunks." in response.content
    assert not Document.objects.exists()
    assert not Memory.objects.filter(pk__in=ids).exists()
    assert not Embedding.objects.filter(memory_id__in=ids).exists()
    revisions = MemoryRevision.objects.filter(memory_id__in=ids, action="delete")
    assert [revision.actor_type for revision in revisions] == ["operator"] * len(ids)
