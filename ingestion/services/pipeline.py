"""The pipeline of one document version: parse -> chunk -> stage -> embed -> publish.

Each stage checks, under the document's row lock, that the version it works on is
still the document's (a new upload or a re-ingest moves on; a delete removes it) and
stops quietly otherwise. Every stage can run again: chunk ids are deterministic, the
embedding claims skip what is embedded or locked, and publishing happens once. So a
task delivered twice, or a worker killed midway and the task redelivered, ends with
each chunk exactly once.

Chunks are written `staged` (invisible to search) and become `active` in one
transaction with the previous version's deletion: search sees the old version or
the new one, never a mix, and never a chunk without its vector.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ingestion.chunkers import ChunkerSettingsError, chunker_get
from ingestion.loaders import LoaderError, document_parse_bounded
from ingestion.models import Document, DocumentContent
from ingestion.services.chunks import (
    chunk_citation,
    chunk_input,
    chunks_delete,
    chunks_of,
    chunks_staged,
)
from memories.models import Memory, MemoryRevision
from memories.providers.embeddings import EmbeddingError
from memories.services import embedding as embedding_pipeline
from memories.services.concurrency import owners_share_lock
from memories.services.memories import memories_status_change, memory_create_batch
from memories.services.revisions import Actor

logger = logging.getLogger(__name__)
ACTOR = Actor.system("ingestion")
STAGE_BATCH_SIZE = 200  # chunks written per transaction
NO_TEXT = "The document contains no text (a scan without OCR, or only images?)."


class DocumentFailure(Exception):
    """The document cannot be ingested; the message is its error, shown to users."""


def _locked(document_id: uuid.UUID, version: int) -> Document | None:
    """The document locked in the caller's transaction, if ``version`` is still its
    version and not finished. Its project and user are held first (FOR KEY SHARE: the
    lock order of memories/services/concurrency.py): a delete of either waits for the
    stage, or the stage for it and then finds the document gone."""
    owners = Document.objects.values_list("project_id", "end_user_id").filter(pk=document_id)
    project_id, end_user_id = owners.first() or (None, None)
    if project_id is None or not owners_share_lock(project_id=project_id, end_user_id=end_user_id):
        return None
    return (
        Document.objects.select_for_update(of=("self",))
        .select_related("project", "end_user")
        .filter(pk=document_id, version=version, status__in=Document.UNFINISHED)
        .first()
    )


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def document_ingest(*, document_id: uuid.UUID, max_seconds: float | None = None) -> bool:
    """Advance the document's pipeline: parse, chunk and stage if not yet done, then
    embed for at most ``max_seconds`` (None: until done), then publish. True when
    nothing is left to do (done, failed, gone, or superseded by a newer version);
    False when more embedding remains (call again). A document that cannot be
    ingested ends `failed` with its error; a retryable EmbeddingError propagates."""
    document = Document.objects.filter(pk=document_id).first()
    if document is None or document.status not in Document.UNFINISHED:
        return True
    version = document.version
    try:
        if document.status != Document.Status.EMBEDDING and not document_stage(
            document_id=document_id, version=version
        ):
            return True
        if document_embed(document_id=document_id, version=version, max_seconds=max_seconds):
            return False
        return document_publish(document_id=document_id, version=version)
    except DocumentFailure as failure:
        document_fail(document_id=document_id, version=version, error=str(failure))
        return True
    except EmbeddingError as error:
        if error.retryable:
            raise
        document_fail(document_id=document_id, version=version, error=f"Embedding failed: {error}")
        return True


def _stage_begin(document_id: uuid.UUID, version: int) -> Document | None:
    """Count a run of the version and mark it parsing; DocumentFailure past the
    attempts allowed (each run before was killed: a hostile or too large file)."""
    with transaction.atomic():
        document = _locked(document_id, version)
        if document is None:
            return None
        limit = int(settings.INGESTION["MAX_ATTEMPTS"])
        if document.attempts >= limit:
            raise DocumentFailure(
                f"Gave up after {limit} attempts: the worker was stopped during each one "
                "(the document may be too large or malformed)."
            )
        now = timezone.now()
        document.attempts += 1
        document.status = Document.Status.PARSING
        document.started_at = document.started_at or now
        document.updated_at = now
        document.save(update_fields=["attempts", "status", "started_at", "updated_at"])
        return document


def _parse(document: Document) -> Any:
    """The document's text and structure, parsed in a bounded child process."""

    data = bytes(DocumentContent.objects.values_list("data", flat=True).get(document=document))
    try:
        parsed = document_parse_bounded(
            data,
            filename=document.source,
            mime_type=document.mime_type or None,
            timeout_seconds=float(settings.INGESTION["PARSE_TIMEOUT_SECONDS"]),
            memory_mb=int(settings.INGESTION["PARSE_MEMORY_MB"]),
        )
    except LoaderError as error:
        raise DocumentFailure(str(error)) from None
    if not parsed.text.strip():
        raise DocumentFailure(NO_TEXT)
    return parsed


def _chunk(document: Document, text: str) -> list[Any]:

    try:
        chunker = chunker_get(document.chunker, document.chunker_settings)
    except ChunkerSettingsError as error:
        raise DocumentFailure(f"Chunker settings: {error}") from None
    spans = [span for span in chunker.chunk_spans(text) if span.text.strip()]
    if not spans:
        raise DocumentFailure(NO_TEXT)
    return spans


def _advance(document_id: uuid.UUID, version: int, **changes: Any) -> Document | None:
    """Apply ``changes`` to the document if still at ``version``; None if it moved on.
    ``timings`` are merged into the stored ones."""
    with transaction.atomic():
        document = _locked(document_id, version)
        if document is None:
            return None
        if "timings" in changes:
            changes["timings"] = {**document.timings, **changes["timings"]}
        for name, value in changes.items():
            setattr(document, name, value)
        document.updated_at = timezone.now()
        document.save(update_fields=[*changes, "updated_at"])
        return document


def document_stage(*, document_id: uuid.UUID, version: int) -> bool:
    """Parse, chunk, and write the chunks of ``version`` as staged knowledge memories
    (status `embedding` after); False if the document moved on meanwhile.
    DocumentFailure when it cannot be ingested."""
    document = _stage_begin(document_id, version)
    if document is None:
        return False
    started = time.monotonic()
    parsed = _parse(document)
    timings = {"parse_ms": _ms(started)}
    title = document.title or parsed.title or document.source
    document = _advance(
        document_id, version, status=Document.Status.CHUNKING, title=title, timings=timings
    )
    if document is None:
        return False
    started = time.monotonic()
    spans = _chunk(document, parsed.text)
    if _advance(document_id, version, chunks_total=len(spans)) is None:
        return False
    if not _stage_write(document_id, version, parsed, spans):
        return False
    return (
        _advance(
            document_id,
            version,
            status=Document.Status.EMBEDDING,
            chunks_done=_embedded_count(document),
            timings={"chunk_ms": _ms(started)},
        )
        is not None
    )


def _stage_write(document_id: uuid.UUID, version: int, parsed: Any, spans: list[Any]) -> bool:
    """Write the chunks as staged memories, a batch per transaction, each under the
    document's lock; False if the document moved on meanwhile."""
    for first in range(0, len(spans), STAGE_BATCH_SIZE):
        with transaction.atomic():
            document = _locked(document_id, version)
            if document is None:
                return False
            items = [
                chunk_input(
                    document=document,
                    version=version,
                    index=index,
                    text=span.text,
                    citation=chunk_citation(
                        document, span.start, span.end, parsed.citation(span.start, span.end)
                    ),
                )
                for index, span in enumerate(spans[first : first + STAGE_BATCH_SIZE], first)
            ]
            memory_create_batch(project=document.project, items=items, actor=ACTOR)
    with transaction.atomic():
        document = _locked(document_id, version)
        if document is None:
            return False
        # a run before this one that cut the text differently (it cannot, unless the
        # chunker changed between releases) may have left chunks past the end
        chunks_delete(
            chunks=chunks_staged(document).filter(chunk_index__gte=len(spans)), actor=ACTOR
        )
    return True


def _embedded_count(document: Document) -> int:
    return chunks_staged(document).filter(embedding_status=Memory.EmbeddingStatus.DONE).count()


def document_embed(
    *, document_id: uuid.UUID, version: int, max_seconds: float | None = None
) -> int:
    """Embed the version's staged chunks still pending, in batches through the
    embedding pipeline, updating the progress after each; returns how many still wait
    (after ``max_seconds``, or when another run holds the rest)."""
    document = Document.objects.filter(
        pk=document_id, version=version, status=Document.Status.EMBEDDING
    ).first()
    if document is None:
        return 0
    size = int(settings.INGESTION["EMBED_BATCH_SIZE"])
    pending = chunks_staged(document).filter(embedding_status=Memory.EmbeddingStatus.PENDING)
    started = time.monotonic()
    while ids := list(pending.order_by("chunk_index").values_list("pk", flat=True)[:size]):
        batch_started = time.monotonic()
        done = embedding_pipeline.embedding_process_batch(size=len(ids), memory_ids=ids)
        _embedding_progress(document, _ms(batch_started))
        if not done:
            break  # every one of them is being embedded by another run of this document
        if max_seconds is not None and time.monotonic() - started > max_seconds:
            break
    return pending.count()


def _embedding_progress(document: Document, embed_ms: int) -> None:
    """Record the chunks embedded so far and the time spent embedding."""
    with transaction.atomic():
        locked = _locked(document.pk, document.version)
        if locked is None:
            return
        locked.chunks_done = _embedded_count(locked)
        locked.timings = {
            **locked.timings,
            "embed_ms": int(locked.timings.get("embed_ms", 0)) + embed_ms,
        }
        locked.updated_at = timezone.now()
        locked.save(update_fields=["chunks_done", "timings", "updated_at"])


@transaction.atomic
def document_publish(*, document_id: uuid.UUID, version: int) -> bool:
    """In one transaction: delete the previous version's chunks (and their vectors),
    make the staged ones active, mark the document done. False if a staged chunk
    still waits for its vector; True otherwise (also when the version moved on)."""
    document = _locked(document_id, version)
    if document is None:
        return True
    staged = list(chunks_staged(document).order_by("pk").select_for_update())
    if any(chunk.embedding_status == Memory.EmbeddingStatus.PENDING for chunk in staged):
        return False
    chunks_delete(chunks=chunks_of(document).exclude(status=Memory.Status.STAGED), actor=ACTOR)
    memories_status_change(
        memories=staged,
        status=Memory.Status.ACTIVE,
        action=MemoryRevision.Action.UPDATE,
        actor=ACTOR,
    )
    _finish(document, status=Document.Status.DONE)
    document.served_version = version
    document.chunks_done = document.chunks_total = len(staged)
    document.save()
    logger.info(
        "document %s version %s: %d chunks in %s ms",
        document.pk,
        version,
        len(staged),
        document.timings.get("total_ms"),
    )
    return True


def _finish(document: Document, *, status: str, error: str = "") -> None:
    now = timezone.now()
    document.status = status
    document.error = error
    document.finished_at = document.updated_at = now
    if document.started_at is not None:
        total = round((now - document.started_at).total_seconds() * 1000)
        document.timings = {**document.timings, "total_ms": total}


@transaction.atomic
def document_fail(*, document_id: uuid.UUID, version: int, error: str) -> None:
    """Mark the version failed with ``error`` and remove its staged chunks; the served
    version (if any) stays served."""
    document = _locked(document_id, version)
    if document is None:
        return
    chunks_delete(chunks=chunks_staged(document), actor=ACTOR)
    _finish(document, status=Document.Status.FAILED, error=error[:2000])
    document.chunks_done = 0
    document.save()
    logger.info("document %s version %s failed: %s", document_id, version, error)
