"""A document's chunks: the `knowledge` memories that carry its id, written, found and
deleted through the memories services (each change recorded as a revision)."""

from __future__ import annotations

import uuid
from typing import Any

from ingestion.models import Document
from memories.models import Memory, MemoryQuerySet
from memories.services.erasure import memories_erase
from memories.services.memories import MemoryInput
from memories.services.revisions import Actor

# chunk ids are uuid5(this, "document/version/index"): a retried run writes the same ids,
# which memory_create_batch recognises, so it never stores a chunk twice
CHUNK_NAMESPACE = uuid.UUID("6f1d3c2e-94b0-4d4e-9a57-0c9e8f1b7a21")


def chunk_id(*, document_id: uuid.UUID, version: int, index: int) -> uuid.UUID:
    return uuid.uuid5(CHUNK_NAMESPACE, f"{document_id}/{version}/{index}")


def chunks_of(document: Document) -> MemoryQuerySet:
    """Every memory of the document: the served version's and the staged one's."""
    return (
        Memory.objects.for_project(document.project_id)
        .of_kind(Memory.Kind.KNOWLEDGE)
        .filter(document_id=document.pk)
    )


def chunks_staged(document: Document) -> MemoryQuerySet:
    """The chunks of the version being ingested (not visible to search yet)."""
    return chunks_of(document).filter(status=Memory.Status.STAGED)


def chunk_citation(document: Document, start: int, end: int, cited: dict[str, Any]) -> dict:
    """A chunk's content_json: which document, which characters, pages and heading."""
    return {
        "document": {"id": str(document.pk), "title": document.title, "source": document.source},
        "start": start,
        "end": end,
        "page": cited.get("page"),
        "page_end": cited.get("page_end", cited.get("page")),
        "heading": list(cited.get("heading") or []),
    }


def chunk_input(
    *, document: Document, version: int, index: int, text: str, citation: dict[str, Any]
) -> MemoryInput:
    """A staged knowledge memory of the document's scope, with its deterministic id."""
    return MemoryInput(
        id=chunk_id(document_id=document.pk, version=version, index=index),
        content=text,
        kind=Memory.Kind.KNOWLEDGE,
        user=document.end_user.external_id if document.end_user else None,
        content_json=citation,
        metadata=dict(document.metadata),
        status=Memory.Status.STAGED,
        document_id=document.pk,
        chunk_index=index,
    )


def chunks_delete(*, chunks: MemoryQuerySet, actor: Actor) -> int:
    """Erase these chunks and their vectors in the caller's transaction
    (memories.services.erasure: each recorded as deleted, no revision keeps their
    words); returns the count."""
    rows = list(chunks.order_by("pk").select_for_update().values_list("pk", "project_id"))
    if not rows:
        return 0
    receipt = memories_erase(
        project_id=rows[0][1], ids=[pk for pk, _ in rows], actor=actor, reason="document"
    )
    return receipt.counts["memories"]
