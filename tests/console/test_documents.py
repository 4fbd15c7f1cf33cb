"""The console's Documents tab: the list and its live progress, upload through the API's
service (errors in place, the size cap before the file is read, CSRF), a document's
chunks with citations, re-ingest, delete with confirmation; viewers and tenants."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from ingestion.models import Document
from ingestion.services.documents import DocumentUpload, document_create
from memories.models import EndUser, Membership, Memory, MemoryRevision
from tests.console.operators import operator_client
from tests.ingestion import files
from tests.ingestion.conftest import chunks, ingest_now, vectors_of

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _hashing(hashing: Any) -> None:
    """Vectors from the hashing embedder: these tests look at the console, not meaning."""


@pytest.fixture
def editor(owner):
    return operator_client("erin", project=owner.project)


@pytest.fixture
def viewer(owner):
    return operator_client("victor", project=owner.project, role=Membership.Role.VIEWER)


def url(name: str, owner: Any, *rest: Any) -> str:
    return reverse(name, args=[owner.project.pk, *rest])


def post_file(client, owner, name: str, data: bytes, **fields: Any):
    return client.post(
        url("console-document-upload", owner),
        {"file": SimpleUploadedFile(name, data), **fields},
        **HTMX,
    )


def manual(owner, **options: Any) -> Document:
    """The Markdown guide, uploaded and ingested to its end."""
    created = document_create(
        project=owner.project,
        upload=DocumentUpload(data=files.markdown_bytes(), source="guide.md", **options),
    )
    return ingest_now(created.document.pk)


def test_an_empty_project_says_how_to_add_a_document(owner, editor):
    response = editor.get(url("console-documents", owner))
    page = response.content.decode()
    assert response.status_code == 200
    assert re.search(r'href="[^"]+/documents/" aria-current="page">Documents</a>', page)
    assert "No documents yet" in page and "/api/v1/documents/" in page
    assert 'name="file"' in page  # the upload form, for an editor


def test_an_upload_is_queued_then_followed_until_done(owner, editor):
    response = post_file(editor, owner, "guide.md", files.markdown_bytes(), title="Guide")
    assert response.status_code == 200
    assert "“Guide” is queued" in response.content.decode()
    assert response["HX-Trigger"] == "documents-changed"  # the list reads itself again
    document = Document.objects.get()
    assert (document.source, document.title, document.status) == ("guide.md", "Guide", "queued")
    assert document.end_user is None
    listing = editor.get(url("console-documents", owner), **HTMX).content.decode()
    assert 'hx-trigger="every 2s, documents-changed from:body"' in listing  # in flight
    assert 'data-status="queued"' in listing
    document = ingest_now(document.pk)
    assert document.status == "done" and document.chunks_total > 0
    listing = editor.get(url("console-documents", owner), **HTMX).content.decode()
    assert 'hx-trigger="documents-changed from:body"' in listing  # no more polling
    assert 'data-status="done"' in listing
    done = document.chunks_total
    assert f"<small>{done}/{done}</small>" in listing and 'aria-valuenow="100"' in listing


def test_a_documents_page_follows_its_ingestion_until_done(owner, editor):
    post_file(editor, owner, "guide.md", files.markdown_bytes(), title="Guide")
    document = Document.objects.get()
    page_url = url("console-document", owner, document.pk)
    page = editor.get(page_url).content.decode()
    assert 'id="document-live" hx-get=' in page and 'hx-trigger="every 2s"' in page
    assert "0/0 chunks embedded" in page
    ingest_now(document.pk)
    live = {"HTTP_HX_TARGET": "document-live", **HTMX}
    again = editor.get(page_url, **live).content.decode()
    assert "<html" not in again and 'data-in-flight="false"' in again  # it stops asking
    done = Document.objects.get().chunks_total
    assert f"{done}/{done} chunks embedded" in again and "doc-status-done" in again


def test_the_same_bytes_again_are_recognised(owner, editor):
    post_file(editor, owner, "guide.md", files.markdown_bytes())
    again = post_file(editor, owner, "copy.md", files.markdown_bytes())
    assert "already there (the same bytes): nothing queued" in again.content.decode()
    assert Document.objects.count() == 1


def test_an_upload_for_a_user_and_with_a_chunker(owner, editor):
    response = post_file(
        editor, owner, "notes.md", files.markdown_bytes(), user="maria", chunker="recursive"
    )
    assert response.status_code == 200
    document = Document.objects.get()
    assert document.end_user == EndUser.objects.get(project=owner.project, external_id="maria")
    assert document.chunker == "recursive"
    listing = editor.get(url("console-documents", owner)).content.decode()
    assert ">maria</a>" in listing


@pytest.mark.parametrize(
    ("name", "data", "fields", "error"),
    [
        ("empty.txt", b"   \n", {}, "The document is empty."),
        ("photo.txt", files.binary_bytes(), {}, "not a text file"),
        ("a.md", b"# A", {"user": "a/b"}, "May not contain"),
        ("a.md", b"# A", {"chunker": "sentences"}, "Select a valid choice."),
    ],
)
def test_a_bad_upload_shows_its_error_in_place(owner, editor, name, data, fields, error):
    response = post_file(editor, owner, name, data, **fields)
    assert response.status_code == 422
    assert error in response.content.decode()
    assert 'id="upload"' in response.content.decode()
    assert not Document.objects.exists()


def test_a_file_over_the_cap_is_refused_before_it_is_read(owner, editor, settings, monkeypatch):
    settings.INGESTION = {**settings.INGESTION, "MAX_UPLOAD_MB": 0.01}  # 10 KiB
    monkeypatch.setattr("console.views.documents.document_create", lambda **_: pytest.fail("read"))
    response = post_file(editor, owner, "big.txt", b"word " * 4000)
    assert response.status_code == 413
    assert "Uploads are limited to 0.01 MB." in response.content.decode()
    assert not Document.objects.exists()


def test_an_upload_without_the_csrf_token_is_refused(owner):
    client = operator_client("erin", project=owner.project, enforce_csrf_checks=True)
    response = client.post(
        url("console-document-upload", owner),
        {"file": SimpleUploadedFile("a.md", files.markdown_bytes())},
    )
    assert response.status_code == 403
    assert not Document.objects.exists()
    page = client.get(url("console-documents", owner)).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
    response = client.post(
        url("console-document-upload", owner),
        {"file": SimpleUploadedFile("a.md", files.markdown_bytes()), "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 200 and Document.objects.count() == 1


def test_a_documents_chunks_cite_their_headings_a_page_at_a_time(owner, editor):
    document = document_create(
        project=owner.project,
        upload=DocumentUpload(
            data=(
                "# Manual\n\n" + "\n\n".join(f"## Part {i}\n\n" + "word " * 30 for i in range(30))
            ).encode(),
            source="manual.md",
            chunker="token_window",
            chunker_settings={"window_size": 40, "window_overlap": 0},
        ),
    ).document
    document = ingest_now(document.pk)
    assert document.chunks_total > 20
    page = editor.get(url("console-document", owner, document.pk)).content.decode()
    assert re.search(r'class="citation">Manual › Part \d+</span>', page)  # a heading path
    assert 'id="chunk-0"' in page and 'id="chunk-20"' not in page
    assert f"{document.chunks_total} chunks" in page and "page 1 of 2" in page
    second = editor.get(url("console-document", owner, document.pk), {"page": 2}, **HTMX)
    assert 'id="chunk-20"' in second.content.decode()
    assert "<html" not in second.content.decode()  # the fragment alone


def test_a_pdf_chunk_cites_its_page(owner, editor):
    created = document_create(
        project=owner.project,
        upload=DocumentUpload(
            data=files.pdf_bytes(["First page text.", "Second page text."]), source="two.pdf"
        ),
    )
    document = ingest_now(created.document.pk)
    page = editor.get(url("console-document", owner, document.pk)).content.decode()
    assert re.search(r'class="citation">p\. 1', page)


def test_reingest_starts_a_new_version(owner, editor):
    document = manual(owner)
    response = editor.post(url("console-document-reingest", owner, document.pk), **HTMX)
    assert response.status_code == 200
    assert "is queued again as a new version" in response.content.decode()
    document.refresh_from_db()
    assert (document.version, document.status, document.served_version) == (2, "queued", 1)
    plain = editor.post(url("console-document-reingest", owner, document.pk))
    assert plain.status_code == 302 and plain["Location"] == url(
        "console-document", owner, document.pk
    )


def test_delete_asks_first_then_removes_the_chunks_and_vectors(owner, editor):
    document = manual(owner)
    count = len(chunks(document.pk))
    assert count and vectors_of(document.pk) == count
    delete = url("console-document-delete", owner, document.pk)
    confirm = editor.get(delete).content.decode()
    assert f"Delete the document and {count} chunk" in confirm
    unconfirmed = editor.post(delete, {})
    assert "Nothing was deleted" in unconfirmed.content.decode()
    assert Document.objects.filter(pk=document.pk).exists()
    done = editor.post(delete, {"confirm": "yes"}).content.decode()
    assert f"<strong>{count}</strong> chunk" in done
    assert not Document.objects.filter(pk=document.pk).exists()
    assert not Memory.objects.filter(document_id=document.pk).exists()
    assert vectors_of(document.pk) == 0
    revisions = MemoryRevision.objects.filter(action="delete", actor="erin")
    assert revisions.count() == count


def test_a_viewer_reads_but_every_change_is_a_403(owner, viewer):
    document = manual(owner)
    page = viewer.get(url("console-documents", owner)).content.decode()
    assert 'name="file"' not in page and "Re-ingest" not in page
    assert viewer.get(url("console-document", owner, document.pk)).status_code == 200
    changes = [
        post_file(viewer, owner, "b.md", b"# B"),
        viewer.post(url("console-document-reingest", owner, document.pk)),
        viewer.get(url("console-document-delete", owner, document.pk)),
        viewer.post(url("console-document-delete", owner, document.pk), {"confirm": "yes"}),
    ]
    assert [response.status_code for response in changes] == [403] * 4
    document.refresh_from_db()
    assert Document.objects.count() == 1 and document.version == 1


def test_another_projects_document_is_a_404(owner, outsider, editor):
    foreign = manual(outsider)
    for name in ("console-document", "console-document-delete"):
        assert editor.get(url(name, owner, foreign.pk)).status_code == 404, name
    reingest = url("console-document-reingest", owner, foreign.pk)
    assert editor.post(reingest).status_code == 404
    delete = url("console-document-delete", owner, foreign.pk)
    assert editor.post(delete, {"confirm": "yes"}).status_code == 404
    assert editor.get(reverse("console-documents", args=[outsider.project.pk])).status_code == 404
    upload = reverse("console-document-upload", args=[outsider.project.pk])
    response = editor.post(upload, {"file": SimpleUploadedFile("a.md", b"# A")})
    assert response.status_code == 404
    foreign.refresh_from_db()
    assert foreign.version == 1 and Document.objects.count() == 1
    listing = editor.get(url("console-documents", owner)).content.decode()
    assert "No documents yet" in listing


def test_the_list_is_paginated(owner, editor):
    for i in range(27):
        document_create(
            project=owner.project,
            upload=DocumentUpload(data=f"Note number {i}.".encode(), source=f"note-{i:02}.txt"),
        )
    page = editor.get(url("console-documents", owner)).content.decode()
    assert "27 documents" in page and "page 1 of 2" in page
    assert "note-26.txt" in page and "note-00.txt" not in page
    second = editor.get(url("console-documents", owner), {"page": 2}, **HTMX).content.decode()
    assert "note-00.txt" in second and "note-26.txt" not in second


def test_anonymous_is_sent_to_the_login(owner, client):
    response = client.get(url("console-documents", owner))
    assert response.status_code == 302 and "/login/" in response["Location"]
