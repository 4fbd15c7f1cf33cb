"""The pipeline run in this process, stage by stage (the worker runs the same
functions): citations, progress, idempotent retries, atomic replacement of a
changed document, failures that leave nothing behind."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connections

from ingestion.models import Document
from ingestion.services import pipeline
from ingestion.services.chunks import chunk_id
from ingestion.services.documents import DocumentUpload, document_create, document_reingest
from memories.models import Embedding, Memory, MemoryRevision
from memories.services.embedding import embedding_pending_count, embedding_run
from tests.ingestion import files
from tests.ingestion.conftest import chunks, ingest_now

pytestmark = pytest.mark.usefixtures("hashing")


def create(owner, data: bytes, source: str, **options) -> Document:
    result = document_create(
        project=owner.project, upload=DocumentUpload(data=data, source=source, **options)
    )
    assert not result.duplicate
    return result.document


SMALL = {"chunker": "recursive", "chunker_settings": {"chunk_size": 120, "chunk_overlap": 0}}


# --- what comes out: chunks, citations, progress -----------------------------------------


def test_a_multi_page_pdf_becomes_chunks_citing_their_pages(owner):
    document = create(
        owner, files.pdf_bytes(files.PDF_PAGES, title=files.PDF_TITLE), "m.pdf", **SMALL
    )
    document = ingest_now(document.pk)

    assert document.status == "done", document.error
    assert document.title == files.PDF_TITLE  # from the PDF's metadata
    assert document.mime_type == "application/pdf"
    found = chunks(document.pk)
    assert document.chunks_total == document.chunks_done == len(found) >= 3
    assert [chunk.chunk_index for chunk in found] == list(range(len(found)))
    for page, fact in files.PDF_FACTS:
        [chunk] = [chunk for chunk in found if fact in chunk.content]
        assert chunk.content_json["page"] == page
        assert chunk.content_json["page_end"] == page
        assert chunk.content_json["document"] == {
            "id": str(document.pk), "title": files.PDF_TITLE, "source": "m.pdf",
        }  # fmt: skip
    assert all(chunk.kind == "knowledge" and chunk.embedding_status == "done" for chunk in found)
    assert set(document.timings) == {"parse_ms", "chunk_ms", "embed_ms", "total_ms"}
    assert document.progress == {"done": len(found), "total": len(found), "percent": 100.0}


def test_the_offsets_of_each_chunk_point_into_the_text(owner):
    document = ingest_now(create(owner, files.markdown_bytes(), "guide.md", **SMALL).pk)
    found = chunks(document.pk)
    assert len(found) > 2
    for before, after in zip(found, found[1:], strict=False):
        assert before.content_json["end"] <= after.content_json["start"]  # overlap 0
        assert after.content_json["end"] - after.content_json["start"] == len(after.content)


@pytest.mark.parametrize(
    ("name", "data", "sections"),
    [
        ("guide.md", files.markdown_bytes(), files.MARKDOWN_SECTIONS),
        ("refunds.html", files.html_bytes(), files.HTML_SECTIONS),
        (
            "report.docx",
            files.docx_bytes(
                [(1, "Introduction"), (0, "The pilot ran for six weeks in Lyon."),
                 (2, "Results"), (0, "Sales rose by 12 percent during the pilot.")]
            ),
            [(("Introduction",), "six weeks in Lyon"),
             (("Introduction", "Results"), "rose by 12 percent")],
        ),
        ("faq.json", files.json_bytes(), [((path,), text) for path, text in files.JSON_LEAVES]),
    ],
)  # fmt: skip
def test_headings_land_in_the_citations(owner, name, data, sections):
    document = ingest_now(
        create(
            owner,
            data,
            name,
            chunker="recursive",
            chunker_settings={"chunk_size": 100, "chunk_overlap": 0},
        ).pk
    )
    assert document.status == "done", document.error
    found = chunks(document.pk)
    checked = 0
    for heading, text in sections:
        [holding, *_] = [c for c in found if text[:20] in c.content]
        # a chunk cites the heading where it starts: check the chunks that start at
        # their section (its heading or its text); others began in the section before
        if holding.content.lstrip("# \n").startswith((heading[-1], text[:20])):
            assert holding.content_json["heading"] == list(heading), (text, holding.content)
            checked += 1
    assert checked >= len(sections) / 2


def test_the_progress_counts_the_chunks_embedded(owner):
    document = create(owner, files.markdown_bytes(), "guide.md", **SMALL)
    assert pipeline.document_stage(document_id=document.pk, version=1)
    document.refresh_from_db()
    assert document.status == "embedding"
    assert document.chunks_total > 2 and document.chunks_done == 0
    assert document.progress["percent"] == 0.0

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(pipeline.settings.INGESTION, "EMBED_BATCH_SIZE", 1)
        remaining = pipeline.document_embed(document_id=document.pk, version=1, max_seconds=0)
    document.refresh_from_db()
    assert remaining == document.chunks_total - 1
    assert document.chunks_done == 1
    assert 0 < document.progress["percent"] < 100
    assert not Memory.objects.filter(document_id=document.pk, status="active").exists()


# --- idempotent: a task delivered twice, a worker killed midway ------------------------


def test_running_the_stages_twice_writes_each_chunk_once(owner):
    document = create(owner, files.markdown_bytes(), "guide.md", **SMALL)
    assert pipeline.document_stage(document_id=document.pk, version=1)
    first = [(c.pk, c.content) for c in chunks(document.pk, "staged")]
    # a worker killed after staging, before it recorded `embedding`: the task runs again
    Document.objects.filter(pk=document.pk).update(status="parsing")
    assert pipeline.document_stage(document_id=document.pk, version=1)
    assert [(c.pk, c.content) for c in chunks(document.pk, "staged")] == first
    assert [pk for pk, _ in first] == [
        chunk_id(document_id=document.pk, version=1, index=i) for i in range(len(first))
    ]

    # killed again after embedding part of them
    pipeline.document_embed(document_id=document.pk, version=1, max_seconds=None)
    Memory.objects.filter(pk=first[0][0]).update(embedding_status="pending")
    Embedding.objects.filter(memory_id=first[0][0]).delete()
    document = ingest_now(document.pk)
    assert ingest_now(document.pk).status == "done"  # and once more: nothing to do

    found = chunks(document.pk)
    assert [(c.pk, c.content) for c in found] == first
    assert not Memory.objects.filter(document_id=document.pk).exclude(status="active").exists()
    embedded = Embedding.objects.filter(memory__document_id=document.pk)
    assert set(embedded.values_list("memory_id", flat=True)) == {pk for pk, _ in first}
    assert embedded.count() == embedded.values("memory_id", "window").distinct().count()


def test_a_run_of_a_superseded_version_stops_and_leaves_nothing(owner):
    document = create(owner, files.markdown_bytes(), "guide.md", **SMALL)
    assert pipeline.document_stage(document_id=document.pk, version=1)
    document_reingest(document=document)  # version 2 queued: version 1's staged chunks go
    assert not chunks(document.pk, "staged")
    # the old task goes on with version 1: every stage finds it moved on
    assert not pipeline.document_stage(document_id=document.pk, version=1)
    assert pipeline.document_embed(document_id=document.pk, version=1) == 0
    assert pipeline.document_publish(document_id=document.pk, version=1)
    assert not Memory.objects.filter(document_id=document.pk).exists()
    document = ingest_now(document.pk)
    assert (document.status, document.version, document.served_version) == ("done", 2, 2)
    assert {c.pk for c in chunks(document.pk)} == {
        chunk_id(document_id=document.pk, version=2, index=i) for i in range(document.chunks_total)
    }


def test_the_embedding_workers_leave_staged_chunks_to_the_pipeline(owner):
    """A long document never stands in front of the messages: the general embedding
    run claims everything pending but staged chunks."""
    document = create(owner, files.markdown_bytes(), "guide.md", **SMALL)
    assert pipeline.document_stage(document_id=document.pk, version=1)
    message = Memory.objects.create(project=owner.project, content="hello", content_hash="x")
    assert embedding_pending_count() == 1
    assert embedding_run() == 1
    message.refresh_from_db()
    assert message.embedding_status == "done"
    assert all(c.embedding_status == "pending" for c in chunks(document.pk, "staged"))


# --- replacing a changed document ---------------------------------------------------------


def test_a_new_version_replaces_the_old_chunks_in_one_step(owner):
    document = ingest_now(create(owner, b"# Old\n\nThe old price was 10 euros.", "p.md").pk)
    old = [c.pk for c in chunks(document.pk)]
    result = document_create(
        project=owner.project,
        upload=DocumentUpload(data=b"# New\n\nThe new price is 12 euros.", source="p.md"),
    )
    assert result.document.pk == document.pk and result.document.version == 2

    assert pipeline.document_stage(document_id=document.pk, version=2)
    pipeline.document_embed(document_id=document.pk, version=2)
    # staged and embedded, not yet published: the old version is still the one served
    assert [c.content for c in chunks(document.pk)] == ["# Old\n\nThe old price was 10 euros."]
    assert Document.objects.get(pk=document.pk).served_version == 1

    assert pipeline.document_publish(document_id=document.pk, version=2)
    assert [c.content for c in chunks(document.pk)] == ["# New\n\nThe new price is 12 euros."]
    assert not Memory.objects.filter(pk__in=old).exists()
    assert not Embedding.objects.filter(memory_id__in=old).exists()
    deleted = MemoryRevision.objects.filter(memory_id__in=old, action="delete")
    assert deleted.count() == len(old)


@pytest.mark.django_db(transaction=True)
def test_another_connection_sees_the_old_or_the_new_version_never_both(owner):
    """While the publishing transaction has deleted the old chunks and not yet
    activated the new ones, another connection still sees exactly the old version."""
    document = ingest_now(create(owner, b"Version one of the text.", "v.txt").pk)
    document_create(
        project=owner.project,
        upload=DocumentUpload(data=b"Version two of the text.", source="v.txt"),
    )
    assert pipeline.document_stage(document_id=document.pk, version=2)
    pipeline.document_embed(document_id=document.pk, version=2)

    paused, resume = threading.Event(), threading.Event()
    seen: list[list[str]] = []
    change = pipeline.memories_status_change

    def slow_change(**kwargs):
        paused.set()
        assert resume.wait(10)
        change(**kwargs)

    def observe() -> None:
        assert paused.wait(10)
        try:
            seen.append(
                list(
                    Memory.objects.filter(document_id=document.pk, status="active").values_list(
                        "content", flat=True
                    )
                )
            )
        finally:
            connections.close_all()
            resume.set()

    observer = threading.Thread(target=observe)
    observer.start()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "memories_status_change", slow_change)
        assert pipeline.document_publish(document_id=document.pk, version=2)
    observer.join()
    assert seen == [["Version one of the text."]]
    assert [c.content for c in chunks(document.pk)] == ["Version two of the text."]


# --- failures -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("locked.pdf", files.encrypted_pdf_bytes(["Secret plans."]), "encrypt"),
        ("broken.pdf", files.corrupt_pdf_bytes(), "pdf"),
        ("bomb.docx", files.zip_bomb_docx_bytes(300), "zip bomb"),
        ("scan.pdf", files.blank_pdf_bytes(2), "no text"),
    ],
)
def test_a_document_that_cannot_be_read_fails_with_a_message_and_no_chunks(
    owner, name, data, message
):
    document = ingest_now(create(owner, data, name).pk)
    assert document.status == "failed"
    assert message in document.error.lower()
    assert len(document.error) > 10
    assert not Memory.objects.filter(document_id=document.pk).exists()
    assert document.finished_at is not None and "total_ms" in document.timings


def test_a_failed_new_version_leaves_the_previous_one_served(owner):
    document = ingest_now(create(owner, files.pdf_bytes(["The first edition."]), "book.pdf").pk)
    served = [c.pk for c in chunks(document.pk)]
    document_create(
        project=owner.project,
        upload=DocumentUpload(data=files.corrupt_pdf_bytes(), source="book.pdf"),
    )
    document = ingest_now(document.pk)
    assert (document.status, document.version, document.served_version) == ("failed", 2, 1)
    assert [c.pk for c in chunks(document.pk)] == served
    assert not chunks(document.pk, "staged")


def test_a_document_whose_runs_keep_dying_is_given_up(owner, settings):
    settings.INGESTION = {**settings.INGESTION, "MAX_ATTEMPTS": 2}
    document = create(owner, files.markdown_bytes(), "guide.md")
    # two runs began parsing and never came back (the worker was killed)
    Document.objects.filter(pk=document.pk).update(attempts=2, status="parsing")
    document = ingest_now(document.pk)
    assert document.status == "failed"
    assert "Gave up after 2 attempts" in document.error


def test_a_document_deleted_midway_stops_its_run(owner):
    from ingestion.services.documents import document_delete
    from memories.services.revisions import Actor

    document = create(owner, files.markdown_bytes(), "guide.md", **SMALL)
    assert pipeline.document_stage(document_id=document.pk, version=1)
    staged = [c.pk for c in chunks(document.pk, "staged")]
    assert document_delete(document=document, actor=Actor.system("test")) == len(staged)
    assert pipeline.document_ingest(document_id=document.pk)
    assert pipeline.document_embed(document_id=document.pk, version=1) == 0
    assert not Memory.objects.filter(pk__in=staged).exists()
    assert not Document.objects.filter(pk=document.pk).exists()


def test_an_unknown_document_is_nothing_to_do(db):
    assert pipeline.document_ingest(document_id=uuid.uuid4())
