"""The ingestion tasks, run in this process: slices that queue their follow-up, the
beat sweep that queues stalled documents again, errors turned into `failed`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from ingestion import tasks
from ingestion.models import Document
from ingestion.services.documents import DocumentUpload, document_create
from memories.models import MaintenanceRun, Memory
from memories.providers.embeddings import EmbeddingError
from tests.ingestion import files

pytestmark = pytest.mark.usefixtures("hashing")


@pytest.fixture
def queued(monkeypatch) -> list[str]:
    """The document ids the tasks queue (instead of sending them to Redis)."""
    sent: list[str] = []
    monkeypatch.setattr(
        tasks,
        "document_ingest_enqueue",
        lambda *, document_id, countdown=0: sent.append(str(document_id)),
    )
    monkeypatch.setattr(
        "ingestion.services.documents.document_ingest_enqueue",
        lambda *, document_id, countdown=0: sent.append(str(document_id)),
    )
    return sent


def create(owner, data: bytes = b"# A\n\nSome text.", source: str = "a.md", **options) -> Document:
    upload = DocumentUpload(data=data, source=source, **options)
    return document_create(project=owner.project, upload=upload).document


def test_a_slice_queues_the_next_until_the_document_is_done(owner, settings, queued):
    settings.INGESTION = {**settings.INGESTION, "SLICE_SECONDS": 0, "EMBED_BATCH_SIZE": 1}
    document = create(
        owner, files.markdown_bytes(), chunker="recursive",
        chunker_settings={"chunk_size": 120, "chunk_overlap": 0},
    )  # fmt: skip
    slices = 0
    while not tasks.document_ingest_task.apply(args=[str(document.pk)]).get():
        slices += 1
        assert queued[-1] == str(document.pk)
        assert slices < 50
    document.refresh_from_db()
    assert document.status == "done"
    assert slices >= document.chunks_total - 1 > 1  # one chunk per slice


def test_an_embedding_endpoint_that_stays_down_fails_the_document(owner, monkeypatch, queued):
    document = create(owner)

    def down(**kwargs):
        raise EmbeddingError("connection refused", retryable=True)

    monkeypatch.setattr(tasks, "document_ingest", down)
    result = tasks.document_ingest_task.apply(args=[str(document.pk)], retries=6)
    assert result.failed()
    document.refresh_from_db()
    assert document.status == "failed"
    assert "Gave up after 6 retries: connection refused" in document.error


def test_an_unexpected_error_fails_the_document_with_its_name(owner, monkeypatch):
    document = create(owner)
    monkeypatch.setattr(
        "ingestion.services.pipeline._chunk", lambda *a: (_ for _ in ()).throw(KeyError("x"))
    )
    result = tasks.document_ingest_task.apply(args=[str(document.pk)])
    assert isinstance(result.result, KeyError)
    document.refresh_from_db()
    assert document.status == "failed" and document.error == "Internal error (KeyError): 'x'"
    assert not Memory.objects.filter(document_id=document.pk).exists()


def test_the_sweep_queues_stalled_documents_again(owner, settings, queued):
    settings.INGESTION = {**settings.INGESTION, "STALLED_AFTER_SECONDS": 600}
    stalled = create(owner, b"# Stalled\n\nLost message.", "s.md")
    fresh = create(owner, b"# Fresh\n\nJust queued.", "f.md")
    finished = create(owner, b"# Done\n\nAll good.", "d.md")
    long_ago = timezone.now() - timedelta(hours=1)
    Document.objects.filter(pk=stalled.pk).update(updated_at=long_ago, status="embedding")
    Document.objects.filter(pk=finished.pk).update(updated_at=long_ago, status="done")
    queued.clear()

    assert tasks.documents_sweep_task() == 1
    assert queued == [str(stalled.pk)]
    stalled.refresh_from_db()
    assert stalled.updated_at > long_ago  # not queued again by the next sweep
    assert tasks.documents_sweep_task() == 0
    run = MaintenanceRun.objects.get(task="documents_sweep")
    assert run.counts == {"stalled": 1, "queued": 1}
    assert fresh.pk and len(queued) == 1
