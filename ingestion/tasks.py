"""Celery tasks of the ingestion: thin wrappers that call one service each.

They run on the `ingestion` queue (settings.CELERY_TASK_ROUTES); each run of
``document_ingest_task`` is a bounded slice of one document's pipeline, so the
worker takes tasks of its other queues in between. Their time limits are in
memories/task_limits.py: a slice stopped at its limit fails its document with the reason
(memories/task_guard.py), and a document whose slices keep dying is parked.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import OperationalError

from ingestion.models import Document
from ingestion.services.documents import (
    DOCUMENT_INGEST_TASK,
    DocumentConflict,
    document_ingest_enqueue,
    document_reingest,
    documents_requeue,
    documents_stalled,
)
from ingestion.services.pipeline import document_fail, document_ingest
from memories.models import ParkedTask
from memories.providers.embeddings import EmbeddingError
from memories.services.maintenance import maintenance_run
from memories.task_guard import Interruption, TaskInput, task_options

logger = logging.getLogger(__name__)
# a slice that stopped because another run holds the remaining chunks waits this long
FOLLOW_UP_COUNTDOWN = 2.0
# what a document failed by a time limit or a dead worker says, after the reason
STOPPED: dict[str, str] = {
    ParkedTask.Reason.TIME_LIMIT: "Stopped at the time limit of its ingestion ({})",
    ParkedTask.Reason.WORKER_LOST: "The worker ingesting it died ({})",
}


def document_project(ids: Sequence[Any]) -> int | None:
    try:
        return (
            Document.objects.filter(pk__in=list(ids)[:1])
            .values_list("project_id", flat=True)
            .first()
        )
    except (ValueError, TypeError):
        return None


def _document_interrupted(interruption: Interruption) -> None:
    """A document whose slice reached its time limit fails with the reason, one whose
    worker died PARKING_ATTEMPTS times too (once: a restart); a re-ingest can take it up.
    An error of the pipeline's own has failed it already (document_ingest_task)."""
    template = STOPPED.get(interruption.reason)
    if interruption.reason == ParkedTask.Reason.WORKER_LOST and not interruption.final:
        return
    if template is not None and interruption.args:
        document_fail_current(
            uuid.UUID(str(interruption.args[0])), template.format(interruption.error)
        )


DOCUMENT = TaskInput(
    kind="document",
    project=document_project,
    interrupted=_document_interrupted,
    retry_kwargs={"reingest": True},
)


@shared_task(
    **task_options(DOCUMENT_INGEST_TASK, DOCUMENT),
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=6,
)
def document_ingest_task(self, document_id: str, reingest: bool = False) -> bool:  # type: ignore[no-untyped-def]
    """Run the next slice of a document's pipeline; queue the following one if more
    remains. Safe to run twice (the pipeline is idempotent). ``reingest`` (an operator's
    retry of a parked document): a failed document is ingested again as a new version."""
    key = uuid.UUID(document_id)
    if reingest:
        return _reingest(key)
    try:
        finished = document_ingest(
            document_id=key, max_seconds=float(settings.INGESTION["SLICE_SECONDS"])
        )
    except (EmbeddingError, OperationalError) as exc:
        # the embedding endpoint or the database is away: the staged chunks wait
        if self.request.retries < self.max_retries:
            raise self.retry(exc=exc, countdown=min(300, 2 ** (self.request.retries + 2))) from exc
        document_fail_current(key, f"Gave up after {self.max_retries} retries: {exc}")
        raise
    except SoftTimeLimitExceeded:
        raise  # the task's guard fails the document with the reason (_document_interrupted)
    except Exception as exc:
        # a fault of ours, not of the document: say so (the log has the traceback)
        document_fail_current(key, f"Internal error ({type(exc).__name__}): {exc}")
        raise
    if not finished:
        document_ingest_enqueue(document_id=key, countdown=FOLLOW_UP_COUNTDOWN)
    return finished


def _reingest(document_id: uuid.UUID) -> bool:
    document = Document.objects.select_related("project").filter(pk=document_id).first()
    if document is None or document.status != Document.Status.FAILED:
        return True  # gone, or taken up already
    try:
        document_reingest(document=document)
    except DocumentConflict as conflict:
        logger.warning("document %s not ingested again: %s", document_id, conflict)
    return True


def document_fail_current(document_id: uuid.UUID, error: str) -> None:
    version = Document.objects.filter(pk=document_id).values_list("version", flat=True).first()
    if version is not None:
        document_fail(document_id=document_id, version=version, error=error)


@shared_task(**task_options("ingestion.tasks.documents_sweep_task"), acks_late=True)
def documents_sweep_task() -> int:
    """Queue again the documents whose pipeline stalled (a lost message, a killed
    worker): unfinished and untouched for INGESTION_STALLED_AFTER_SECONDS."""
    stalled = documents_stalled(
        older_than_seconds=float(settings.INGESTION["STALLED_AFTER_SECONDS"])
    )
    if not stalled:
        return 0  # nothing to do: not recorded (it runs every two minutes)
    with maintenance_run(task="documents_sweep") as run:
        queued = documents_requeue(document_ids=stalled)
        run.counts = {"stalled": len(stalled), "queued": queued}
    return queued
