"""Documents: upload (new, new version or duplicate), re-ingest, delete, and queueing
their pipeline (ingestion.services.pipeline) in a worker.

An upload only validates, stores the bytes and queues: parsing, chunking and
embedding happen in the worker, so an upload of hundreds of pages returns at once.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from ingestion.chunkers import CHUNKERS, ChunkerSettingsError, chunker_settings_clean
from ingestion.loaders import LoaderError, mime_type_detect
from ingestion.models import Document, DocumentContent
from ingestion.services.chunks import chunks_delete, chunks_of, chunks_staged
from memories.models import EndUser, Project
from memories.providers.task_sending import TaskNotSent, task_send
from memories.services.concurrency import owners_share_lock
from memories.services.configuration import project_settings_get
from memories.services.erasure import admin_log_erase
from memories.services.revisions import Actor
from memories.services.users import end_user_get_or_create

logger = logging.getLogger(__name__)
# the worker's task (ingestion.tasks), sent by name: services never import the tasks
DOCUMENT_INGEST_TASK = "ingestion.tasks.document_ingest_task"
INGESTION_QUEUE = "ingestion"


class DocumentRejected(ValueError):
    """An upload that cannot be ingested; ``field`` names the part at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class DocumentTooLarge(DocumentRejected):
    def __init__(self, size: int) -> None:
        super().__init__("file", f"The document is larger than the limit of {max_upload_mb()} MB.")
        self.size = size


class DocumentConflict(Exception):
    """Another document of the scope already holds these bytes."""


def max_upload_bytes() -> int:
    return int(float(settings.INGESTION["MAX_UPLOAD_MB"]) * 1024 * 1024)


def max_upload_mb() -> str:
    return f"{float(settings.INGESTION['MAX_UPLOAD_MB']):g}"


@dataclass
class DocumentUpload:
    """What an upload gives: the bytes, their name and the optional choices."""

    data: bytes
    source: str  # the file name, or the source name given with a text
    title: str = ""
    user: str | None = None  # external id; None: shared by the whole project
    chunker: str | None = None  # None: the project's ingestion.chunker
    chunker_settings: dict[str, Any] | None = None  # over the project's defaults
    metadata: dict[str, Any] = field(default_factory=dict)  # copied to every chunk


@dataclass(frozen=True)
class DocumentCreated:
    document: Document
    duplicate: bool  # these bytes were already there: nothing was queued


def chunker_resolve(
    *, project: Project, chunker: str | None, given: dict[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """The chunker's name and complete settings: ``given`` over the project's
    `ingestion` settings. DocumentRejected naming the bad setting."""

    policy = project_settings_get(project=project).ingestion
    name = chunker or policy.chunker
    if name not in CHUNKERS:
        raise DocumentRejected(
            "chunker", f"Unknown chunker {name!r}; known: {', '.join(CHUNKERS)}."
        )
    defaults = {
        "token_window": {
            "window_size": policy.window_size,
            "window_overlap": policy.window_overlap,
        },
        "recursive": {"chunk_size": policy.chunk_size, "chunk_overlap": policy.chunk_overlap},
    }.get(name, {})
    try:
        return name, chunker_settings_clean(name, {**defaults, **(given or {})})
    except ChunkerSettingsError as error:
        raise DocumentRejected("chunker_settings", str(error)) from None


def _mime_type(data: bytes, source: str) -> str:

    if len(data) > max_upload_bytes():
        raise DocumentTooLarge(len(data))
    if not data.strip():
        raise DocumentRejected("file", "The document is empty.")
    try:
        return mime_type_detect(data, filename=source)
    except LoaderError as error:
        raise DocumentRejected("file", str(error)) from None


def document_create(*, project: Project, upload: DocumentUpload) -> DocumentCreated:
    """Store an upload and queue its ingestion. The same bytes in the same scope give
    back the document that has them (duplicate, nothing queued); new bytes under a
    source the scope already has start a new version of that document. Raises
    DocumentRejected (DocumentTooLarge) for what cannot be ingested, before storing."""
    mime_type = _mime_type(upload.data, upload.source)
    name, chunker_settings = chunker_resolve(
        project=project, chunker=upload.chunker, given=upload.chunker_settings
    )
    end_user = None
    if upload.user:
        end_user, _ = end_user_get_or_create(project=project, external_id=upload.user)
    sha256 = hashlib.sha256(upload.data).hexdigest()
    try:
        with transaction.atomic():
            return _store(project, end_user, upload, sha256, mime_type, name, chunker_settings)
    except IntegrityError:
        # a concurrent upload stored the same bytes or source first: look again
        with transaction.atomic():
            return _store(project, end_user, upload, sha256, mime_type, name, chunker_settings)


def _store(
    project: Project,
    end_user: EndUser | None,
    upload: DocumentUpload,
    sha256: str,
    mime_type: str,
    chunker: str,
    chunker_settings: dict[str, Any],
) -> DocumentCreated:
    scope = Document.objects.for_project(project).in_scope(end_user)
    same = scope.exclude(status=Document.Status.FAILED).filter(sha256=sha256).first()
    if same is not None:
        return DocumentCreated(same, duplicate=True)
    fields = {
        "sha256": sha256,
        "size": len(upload.data),
        "mime_type": mime_type,
        "chunker": chunker,
        "chunker_settings": chunker_settings,
    }
    document = scope.select_for_update().filter(source=upload.source).first()
    if document is None:
        document = Document.objects.create(
            project=project,
            end_user=end_user,
            source=upload.source,
            title=upload.title,
            metadata=upload.metadata,
            **fields,
        )
        DocumentContent.objects.create(document=document, data=upload.data)
        document_ingest_enqueue_on_commit(document_id=document.pk)
        return DocumentCreated(document, duplicate=False)
    if upload.title:
        document.title = upload.title
    if upload.metadata:
        document.metadata = upload.metadata
    DocumentContent.objects.update_or_create(document=document, defaults={"data": upload.data})
    return DocumentCreated(_version_start(document, **fields), duplicate=False)


def _version_start(document: Document, **fields: Any) -> Document:
    """Make the locked ``document`` a new version with ``fields`` (bytes, chunker) and
    queue it. A run of the previous version still going loses its staged chunks here
    and stops at its next version check; the served version stays served."""
    chunks_delete(chunks=chunks_staged(document), actor=Actor.system("ingestion"))
    for name, value in fields.items():
        setattr(document, name, value)
    document.version += 1
    document.status = Document.Status.QUEUED
    document.error = ""
    document.chunks_total = document.chunks_done = document.attempts = 0
    document.timings = {}
    document.started_at = document.finished_at = None
    document.updated_at = timezone.now()
    document.save()
    document_ingest_enqueue_on_commit(document_id=document.pk)
    return document


def document_reingest(
    *,
    document: Document,
    chunker: str | None = None,
    chunker_settings: dict[str, Any] | None = None,
) -> Document:
    """Ingest the stored bytes again as a new version, with the document's chunker or
    a new one (``chunker_settings`` over the document's own when the chunker stays,
    else over the project's defaults). DocumentConflict when the document had failed
    and another document of its scope has taken the same bytes meanwhile."""
    name = chunker or document.chunker
    base = document.chunker_settings if name == document.chunker else {}
    if chunker is not None or chunker_settings is not None:
        name, cleaned = chunker_resolve(
            project=document.project, chunker=name, given={**base, **(chunker_settings or {})}
        )
    else:
        cleaned = document.chunker_settings
    try:
        with transaction.atomic():
            # the lock order of memories/services/concurrency.py, as the pipeline's
            owners_share_lock(project_id=document.project_id, end_user_id=document.end_user_id)
            locked = (
                Document.objects.select_for_update().select_related("project").get(pk=document.pk)
            )
            return _version_start(locked, chunker=name, chunker_settings=cleaned)
    except IntegrityError:
        raise DocumentConflict(
            "Another document of this scope holds the same content; re-ingest that one."
        ) from None


@transaction.atomic
def document_delete(*, document: Document, actor: Actor) -> int:
    """Delete the document, its bytes, and every chunk with its vectors (each chunk
    erased: memories.services.erasure); returns how many chunks went. A run of it still
    going finds the document gone and stops. Its project and user are held first (the
    lock order of memories/services/concurrency.py), as the pipeline holds them."""
    if not owners_share_lock(project_id=document.project_id, end_user_id=document.end_user_id):
        return 0
    locked = Document.objects.select_for_update().filter(pk=document.pk).first()
    if locked is None:
        return 0
    deleted = chunks_delete(chunks=chunks_of(locked), actor=actor)
    admin_log_erase("ingestion.document", [locked.pk])  # its title
    locked.delete()
    return deleted


def document_ingest_enqueue(*, document_id: uuid.UUID, countdown: float = 0) -> None:
    """Ask a worker to run the next slice of the document's pipeline. Never raises: the
    document is stored, and the beat sweep queues it again if this message is lost."""
    try:
        task_send(
            DOCUMENT_INGEST_TASK,
            args=[str(document_id)],
            queue=INGESTION_QUEUE,
            countdown=countdown or None,
        )
    except TaskNotSent as error:  # Redis down: the sweep queues it later
        logger.warning("could not queue document %s (%s); the sweep will", document_id, error)


def document_ingest_enqueue_on_commit(*, document_id: uuid.UUID) -> None:
    transaction.on_commit(lambda: document_ingest_enqueue(document_id=document_id))


def documents_stalled(*, older_than_seconds: float) -> list[uuid.UUID]:
    """The unfinished documents untouched for ``older_than_seconds``: their message lost
    to a Redis outage, their worker killed (a running pipeline touches its document
    at every stage and embedding batch)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    return list(
        Document.objects.unfinished().filter(updated_at__lt=cutoff).values_list("pk", flat=True)
    )


def documents_requeue(*, document_ids: list[uuid.UUID]) -> int:
    """Queue the documents' pipelines again; returns how many were queued."""
    # touched, so that the next sweep gives these runs their time before queueing again
    queued = Document.objects.unfinished().filter(pk__in=document_ids)
    ids = list(queued.values_list("pk", flat=True))
    queued.update(updated_at=timezone.now())
    for document_id in ids:
        document_ingest_enqueue(document_id=document_id)
    return len(ids)
