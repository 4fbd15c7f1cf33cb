"""Fixtures of the ingestion tests: uploads as the API takes them, the pipeline run
here and now (as the worker would), and the hashing embedder for tests that only
need vectors (the worker tests and the retrieval test use the real model)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ingestion.models import Document
from ingestion.services.pipeline import document_ingest
from memories.models import Embedding, Memory
from memories.services import embedding_spaces
from tests.memories.conftest import CountingProvider


@pytest.fixture
def hashing(monkeypatch: pytest.MonkeyPatch) -> CountingProvider:
    """The pipeline's embedding provider in this process: the hashing embedder."""
    provider = CountingProvider(model="ingestion-test", dimension=32)
    monkeypatch.setattr(embedding_spaces, "get_provider", lambda: provider)
    return provider


def upload(client: Any, name: str, data: bytes, **fields: Any) -> Any:
    """POST /api/v1/documents/ as multipart/form-data, the file named ``name``."""
    return client.post(
        "/api/v1/documents/",
        {"file": SimpleUploadedFile(name, data), **fields},
        format="multipart",
    )


def ingest_now(document_id: Any) -> Document:
    """Run the document's pipeline to its end in this process; the document after."""
    for _ in range(100):
        if document_ingest(document_id=document_id):
            break
    return Document.objects.get(pk=document_id)


def chunks(document_id: Any, status: str = Memory.Status.ACTIVE) -> list[Memory]:
    """The document's chunks of that status, in order."""
    return list(
        Memory.objects.filter(document_id=document_id, status=status).order_by("chunk_index")
    )


def vectors_of(document_id: Any) -> int:
    return Embedding.objects.filter(memory__document_id=document_id).count()
