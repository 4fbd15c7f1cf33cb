"""The documents API: uploads (multipart and JSON), duplicates and versions, bad input
(400 / 413 before the body is read), keys and tenants, list, detail, chunks, delete,
re-ingest, and the search filters that knowledge adds. The pipeline runs in this
process here (tests/ingestion/tasks/test_worker.py runs it in a real worker)."""

from __future__ import annotations

import hashlib
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from ingestion.models import Document, DocumentContent
from memories.models import Embedding, Memory, MemoryRevision
from tests.ingestion import files
from tests.ingestion.conftest import chunks, ingest_now, upload

pytestmark = pytest.mark.usefixtures("hashing")
SMALL = '{"chunk_size": 120, "chunk_overlap": 0}'


def text_upload(client, text: str, source: str, **fields):
    return client.post("/api/v1/documents/", {"text": text, "source": source, **fields})


# --- uploads -----------------------------------------------------------------------------


def test_a_file_upload_is_stored_and_queued(owner):
    data = files.markdown_bytes()
    response = upload(owner.client, "guide.md", data, title="Install guide")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued" and body["duplicate"] is False
    assert (body["source"], body["title"], body["user"], body["scope"]) == (
        "guide.md",
        "Install guide",
        None,
        "project",
    )
    assert (body["mime_type"], body["size"]) == ("text/markdown", len(data))
    assert body["sha256"] == hashlib.sha256(data).hexdigest()
    assert (body["chunker"], body["chunker_settings"]["window_size"]) == ("token_window", 512)
    assert body["progress"] == {"done": 0, "total": 0, "percent": 0.0}
    assert body["version"] == 1 and body["served_version"] is None
    stored = DocumentContent.objects.get(document_id=body["id"])
    assert bytes(stored.data) == data


def test_a_text_upload_takes_its_type_from_the_source_name(owner):
    markdown = text_upload(owner.client, "# Notes\n\nBuy milk.", "notes.md", user="alice")
    plain = text_upload(owner.client, "Buy bread.", "notes.txt", metadata={"team": "ops"})
    assert (markdown.status_code, plain.status_code) == (202, 202)
    assert markdown.json()["mime_type"] == "text/markdown"
    assert (markdown.json()["user"], markdown.json()["scope"]) == ("alice", "user")
    assert plain.json()["mime_type"] == "text/plain"
    assert plain.json()["metadata"] == {"team": "ops"}


def test_the_same_bytes_in_the_same_scope_are_not_ingested_twice(owner):
    first = upload(owner.client, "a.md", files.markdown_bytes()).json()
    again = upload(owner.client, "copy-of-a.md", files.markdown_bytes())
    assert again.status_code == 200
    assert again.json()["id"] == first["id"] and again.json()["duplicate"] is True
    elsewhere = upload(owner.client, "a.md", files.markdown_bytes(), user="alice")
    assert elsewhere.status_code == 202 and elsewhere.json()["id"] != first["id"]
    assert Document.objects.filter(project=owner.project).count() == 2


def test_new_bytes_under_a_known_source_are_a_new_version(owner):
    first = upload(owner.client, "a.md", b"# A\n\nFirst text.").json()
    second = upload(owner.client, "a.md", b"# A\n\nSecond text.")
    assert second.status_code == 202
    assert second.json()["id"] == first["id"]
    assert (second.json()["version"], second.json()["status"]) == (2, "queued")
    document = Document.objects.get(pk=first["id"])
    assert bytes(document.content.data) == b"# A\n\nSecond text."


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"file": ("fake.txt", files.binary_bytes())}, "file"),
        ({"file": ("empty.md", b"")}, "file"),
        ({"file": ("blank.md", b"  \n\n ")}, "file"),
        ({"file": ("a.md", b"# A"), "chunker": "sentences"}, "chunker"),
        (
            {"file": ("a.md", b"# A"), "chunker_settings": '{"window_size": 8, "x": 1}'},
            "chunker_settings",
        ),
        ({"file": ("a.md", b"# A"), "chunker_settings": "{not json"}, "chunker_settings"),
        ({"file": ("a.md", b"# A"), "metadata": "[1, 2]"}, "metadata"),
        ({"file": ("a.md", b"# A"), "user": "a/b"}, "user"),
        ({"title": "no file"}, "file"),
    ],
)
def test_bad_uploads_are_refused_with_the_field_named(owner, request_fields, field):
    data = dict(request_fields)
    if "file" in data:
        name, content = data["file"]
        data["file"] = SimpleUploadedFile(name, content)
    response = owner.client.post("/api/v1/documents/", data, format="multipart")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert not Document.objects.exists()


def test_bad_text_uploads_are_refused(owner):
    assert text_upload(owner.client, "", "a.md").status_code == 400
    assert "source" in owner.client.post("/api/v1/documents/", {"text": "x"}).json()
    nul = text_upload(owner.client, "a\x00b", "a.txt")
    assert nul.status_code == 400 and "text" in nul.json()
    bad = text_upload(owner.client, "Some text.", "a.txt", chunker_settings={"window_size": 3})
    assert bad.status_code == 400 and "chunker_settings" in bad.json()


class ExplodingStream(io.RawIOBase):
    """A request body that fails the test if anything reads it."""

    reads = 0

    def read(self, size: int = -1) -> bytes:
        ExplodingStream.reads += 1
        raise AssertionError("the body was read")

    readline = read


def test_an_upload_announced_over_the_cap_is_refused_before_its_body_is_read(owner):
    response = owner.client.generic(
        "POST",
        "/api/v1/documents/",
        b"x",
        content_type="multipart/form-data; boundary=xyz",
        **{"wsgi.input": ExplodingStream(), "CONTENT_LENGTH": str(25 * 1024 * 1024)},
    )
    assert response.status_code == 413
    assert response.json() == {
        "detail": "Uploads are limited to 20 MB (INGESTION_MAX_UPLOAD_MB).",
        "max_upload_mb": 20.0,
        "limit": 20 * 1024 * 1024,
    }
    assert ExplodingStream.reads == 0


def test_a_file_over_the_cap_is_stopped_while_it_arrives(owner, settings, monkeypatch):
    settings.INGESTION = {**settings.INGESTION, "MAX_UPLOAD_MB": 0.01}  # 10 KiB
    with monkeypatch.context() as patch:  # the upload handler stops it, not the service
        patch.setattr("ingestion.api.views.document_create", lambda **_: pytest.fail("read"))
        too_large = upload(owner.client, "big.txt", b"word " * 4000)  # under the envelope
    assert too_large.status_code == 413
    assert too_large.json()["max_upload_mb"] == 0.01
    text = text_upload(owner.client, "word " * 4000, "big.txt")
    assert text.status_code == 413
    assert upload(owner.client, "small.txt", b"word " * 1000).status_code == 202
    assert Document.objects.count() == 1


# --- keys and tenants ---------------------------------------------------------------------


def test_a_read_only_key_reads_but_cannot_upload_delete_or_reingest(owner):
    document = upload(owner.client, "a.md", files.markdown_bytes()).json()
    path = f"/api/v1/documents/{document['id']}/"
    reader = owner.read_client
    assert upload(reader, "b.md", b"# B").status_code == 403
    assert reader.delete(path).status_code == 403
    assert reader.post(path + "reingest/", {}).status_code == 403
    assert reader.get("/api/v1/documents/").status_code == 200
    assert reader.get(path).status_code == 200
    assert reader.get(path + "chunks/").status_code == 200
    assert Document.objects.count() == 1


def test_another_projects_document_is_a_404_everywhere(owner, outsider):
    document = ingest_now(upload(owner.client, "a.md", files.markdown_bytes()).json()["id"])
    path = f"/api/v1/documents/{document.pk}/"
    assert outsider.client.get(path).status_code == 404
    assert outsider.client.get(path + "chunks/").status_code == 404
    assert outsider.client.post(path + "reingest/", {}).status_code == 404
    assert outsider.client.delete(path).status_code == 404
    assert outsider.client.get("/api/v1/documents/").json()["count"] == 0
    search = outsider.client.post(
        "/api/v1/search/",
        {"query": "installation guide", "mode": "keyword", "document": str(document.pk)},
    )
    assert search.status_code == 200 and search.json()["results"] == []
    assert Document.objects.get(pk=document.pk).version == 1  # untouched


def test_without_a_key_it_is_a_401(anonymous):
    assert anonymous.get("/api/v1/documents/").status_code == 401
    assert anonymous.post("/api/v1/documents/", {"text": "x", "source": "a"}).status_code == 401


# --- list, detail, chunks -----------------------------------------------------------------


def test_the_list_filters_by_status_user_and_scope_newest_first(owner):
    shared = ingest_now(upload(owner.client, "shared.md", b"# Shared\n\nFor all.").json()["id"])
    alices = upload(owner.client, "alice.md", b"# Alice\n\nHers.", user="alice").json()
    bobs = upload(owner.client, "bob.md", b"# Bob\n\nHis.", user="bob").json()

    def ids(**params):
        body = owner.client.get("/api/v1/documents/", params).json()
        assert body["count"] == len(body["results"])
        return [document["id"] for document in body["results"]]

    assert ids() == [bobs["id"], alices["id"], str(shared.pk)]
    assert ids(status="done") == [str(shared.pk)]
    assert ids(status="queued") == [bobs["id"], alices["id"]]
    assert ids(user="alice") == [alices["id"]]
    assert ids(user="nobody") == []
    assert ids(scope="project") == [str(shared.pk)]
    assert ids(scope="user") == [bobs["id"], alices["id"]]
    assert owner.client.get("/api/v1/documents/", {"status": "lost"}).status_code == 400


def test_the_list_pages_with_a_cursor(owner):
    created = [
        upload(owner.client, f"{n}.md", f"# Doc {n}\n\nText {n}.".encode()).json()["id"]
        for n in range(3)
    ]
    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        body = owner.client.get("/api/v1/documents/", params).json()
        assert body["count"] == 3
        seen += [document["id"] for document in body["results"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == created[::-1]
    bad = owner.client.get("/api/v1/documents/", {"cursor": "nonsense"})
    assert bad.status_code == 400


def test_a_document_shows_its_progress_timings_and_chunks_with_citations(owner):
    pdf = files.pdf_bytes(files.PDF_PAGES, title=files.PDF_TITLE)
    created = upload(
        owner.client, "manual.pdf", pdf, chunker="recursive", chunker_settings=SMALL
    ).json()
    ingest_now(created["id"])
    path = f"/api/v1/documents/{created['id']}/"
    body = owner.client.get(path).json()
    assert body["status"] == "done" and body["error"] == ""
    assert body["title"] == files.PDF_TITLE
    total = body["progress"]["total"]
    assert body["progress"] == {"done": total, "total": total, "percent": 100.0} and total >= 3
    assert set(body["timings"]) == {"parse_ms", "chunk_ms", "embed_ms", "total_ms"}
    assert body["served_version"] == 1 and body["finished_at"]

    pages, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = owner.client.get(path + "chunks/", params).json()
        assert page["count"] == total
        pages += page["results"]
        if not (cursor := page["next_cursor"]):
            break
    assert [chunk["chunk_index"] for chunk in pages] == list(range(total))
    for number, fact in files.PDF_FACTS:
        [chunk] = [chunk for chunk in pages if fact in chunk["content"]]
        assert chunk["citation"]["page"] == number
        assert chunk["citation"]["document"]["title"] == files.PDF_TITLE
        assert chunk["status"] == "active" and chunk["embedding_status"] == "done"
    assert owner.client.get(path + "chunks/", {"status": "staged"}).json()["count"] == 0


# --- delete and re-ingest -----------------------------------------------------------------


def test_deleting_a_document_deletes_its_chunks_and_their_vectors(owner):
    document = ingest_now(upload(owner.client, "a.md", files.markdown_bytes()).json()["id"])
    ids = [chunk.pk for chunk in chunks(document.pk)]
    assert ids and Embedding.objects.filter(memory_id__in=ids).exists()

    assert owner.client.delete(f"/api/v1/documents/{document.pk}/").status_code == 204
    assert not Document.objects.filter(pk=document.pk).exists()
    assert not DocumentContent.objects.filter(document_id=document.pk).exists()
    assert not Memory.objects.filter(document_id=document.pk).exists()
    assert not Embedding.objects.filter(memory_id__in=ids).exists()
    revisions = MemoryRevision.objects.filter(memory_id__in=ids, action="delete")
    assert revisions.count() == len(ids)
    assert {revision.actor for revision in revisions} == {owner.key.prefix}
    assert owner.client.get(f"/api/v1/documents/{document.pk}/").status_code == 404


def test_reingest_makes_a_new_version_with_new_chunker_settings(owner):
    document = ingest_now(upload(owner.client, "a.md", files.markdown_bytes()).json()["id"])
    before = [chunk.pk for chunk in chunks(document.pk)]
    path = f"/api/v1/documents/{document.pk}/reingest/"
    bad = owner.client.post(path, {"chunker": "recursive", "chunker_settings": {"chunk_size": 5}})
    assert bad.status_code == 400 and "chunker_settings" in bad.json()

    response = owner.client.post(
        path, {"chunker": "recursive", "chunker_settings": {"chunk_size": 120, "chunk_overlap": 0}}
    )
    assert response.status_code == 202
    body = response.json()
    assert (body["version"], body["status"], body["served_version"]) == (2, "queued", 1)
    assert body["chunker_settings"] == {"chunk_size": 120, "chunk_overlap": 0}
    assert [chunk.pk for chunk in chunks(document.pk)] == before  # served until done

    document = ingest_now(document.pk)
    after = chunks(document.pk)
    assert len(after) > len(before)
    assert not {chunk.pk for chunk in after} & set(before)
    assert all(len(chunk.content) <= 120 for chunk in after)


# --- search: the document filter and the user scope ---------------------------------------


def test_search_filters_by_document_and_keeps_users_apart(owner):
    shared = text_upload(owner.client, "The cafeteria opens at noon.", "cafeteria.txt")
    alices = text_upload(
        owner.client, "The cafeteria card of Alice has 20 euros.", "card.txt", user="alice"
    )
    for response in (shared, alices):
        ingest_now(response.json()["id"])

    def found(**params):
        body = owner.client.post(
            "/api/v1/search/",
            {"query": "cafeteria", "mode": "keyword", "kind": ["knowledge"], **params},
        )
        assert body.status_code == 200, body.content
        return sorted(hit["memory"]["document_id"] for hit in body.json()["results"])

    assert found() == sorted([shared.json()["id"], alices.json()["id"]])
    assert found(document=shared.json()["id"]) == [shared.json()["id"]]
    assert found(user="alice") == [alices.json()["id"]]
    owner.client.post("/api/v1/users/", {"external_id": "bob"})
    assert alices.json()["id"] not in found(user="bob")
    bad = owner.client.post("/api/v1/search/", {"query": "x", "document": "nope"})
    assert bad.status_code == 400 and "document" in bad.json()


def test_the_schema_documents_every_documents_operation(db):
    schema = Client().get("/api/schema/", {"format": "json"}).json()
    operations = {
        "/api/v1/documents/": {"get", "post"},
        "/api/v1/documents/{document_id}/": {"get", "delete"},
        "/api/v1/documents/{document_id}/reingest/": {"post"},
        "/api/v1/documents/{document_id}/chunks/": {"get"},
    }
    for path, methods in operations.items():
        assert methods <= set(schema["paths"][path]), path
    upload_body = schema["paths"]["/api/v1/documents/"]["post"]["requestBody"]["content"]
    assert {"multipart/form-data", "application/json"} <= set(upload_body)


def test_a_failed_document_is_no_duplicate_and_cannot_be_reingested_onto_another(owner):
    broken = files.corrupt_pdf_bytes()
    failed = ingest_now(upload(owner.client, "broken.pdf", broken).json()["id"])
    assert failed.status == "failed"
    again = upload(owner.client, "broken.pdf", broken)  # the same bytes: tried again
    assert again.status_code == 202
    assert (again.json()["id"], again.json()["version"]) == (str(failed.pk), 2)
    ingest_now(failed.pk)

    other = upload(owner.client, "copy.pdf", broken)  # the failed one does not hold them
    assert other.status_code == 202 and other.json()["id"] != str(failed.pk)
    conflict = owner.client.post(f"/api/v1/documents/{failed.pk}/reingest/", {})
    assert conflict.status_code == 409
    assert "same content" in conflict.json()["detail"]
    assert Document.objects.get(pk=failed.pk).status == "failed"
