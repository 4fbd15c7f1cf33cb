"""Celery tasks of the ingestion: thin wrappers that call one service each.

They run on the `ingestion` queue (settings.CELERY_TASK_ROUTES); each run of
``document_ingest_task`` is a bounded slice of one document's pipeline, so the
worker takes tasks of its other queues (message embedding) in between.
"""

from __future__ import annotations

import logging
import uuid

from celery import shared_task
from django.conf import settings
from django.db import OperationalError

from ingestion.models import Document
from ingestion.services.documents import (
    DOCUMENT_INGEST_TASK,
    document_ingest_enqueue,
    documents_requeue,
    documents_stalled,
)
from ingestion.services.pipeline import document_fail, document_ingest
from memories.providers.embeddings import EmbeddingError
from memories.services.maintenance import maintenance_run

logger = logging.getLogger(__name__)
# a slice that stopped because another run holds the remaining chunks waits this long
FOLLOW_UP_COUNTDOWN = 2.0


@shared_task(
    name=DOCUMENT_INGEST_TASK,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=6,
    # parsing is bounded by INGESTION_PARSE_TIMEOUT_SECONDS and an embedding slice by
    # INGESTION_SLICE_SECONDS (plus one batch); the limits stand above both
    soft_time_limit=600,
    time_limit=660,
)
def document_ingest_task(self, document_id: str) -> bool:  # type: ignore[no-untyped-def]
    """Run the next slice of a document's pipeline; queue the following one if more
    remains. Safe to run twice (the pipeline is idempotent)."""
    key = uuid.UUID(document_id)
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
    except Exception as exc:
        # a fault of ours, not of the document: say so (the log has the traceback)
        document_fail_current(key, f"Internal error ({type(exc).__name__}): {exc}")
        raise
    if not finished:
        document_ingest_enqueue(document_id=key, countdown=FOLLOW_UP_COUNTDOWN)
    return finished


def document_fail_current(document_id: uuid.UUID, error: str) -> None:
    version = Document.objects.filter(pk=document_id).values_list("version", flat=True).first()
    if version is not None:
        document_fail(document_id=document_id, version=version, error=error)


@shared_task(name="ingestion.tasks.documents_sweep_task", acks_late=True)
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
