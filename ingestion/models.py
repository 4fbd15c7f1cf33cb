"""Documents uploaded to a project and the bytes they were uploaded with.

A document's text becomes `knowledge` memories (memories.Memory with ``document_id``
and ``chunk_index``): the link goes from the memories to the document by id, not by a
foreign key, so `memories` knows nothing of this app. Deleting a document deletes its
memories through the memories services (ingestion.services.documents).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import models
from django.db.models import Q
from django.utils import timezone

from memories.models import EndUser, Project


class DocumentQuerySet(models.QuerySet["Document"]):
    def for_project(self, project: Project | int) -> DocumentQuerySet:
        return self.filter(project=project)

    def in_scope(self, end_user: EndUser | None) -> DocumentQuerySet:
        """The documents of one user, or (None) the whole project's shared ones."""
        if end_user is None:
            return self.filter(end_user__isnull=True)
        return self.filter(end_user=end_user)

    def unfinished(self) -> DocumentQuerySet:
        return self.filter(status__in=Document.UNFINISHED)


class Document(models.Model):
    """One uploaded document: its scope, where it stands in the pipeline, its chunker.

    ``version`` counts the contents ingested under this source (a changed upload or a
    re-ingest starts a new one); ``served_version`` is the version whose chunks search
    sees (None until one is done). While version N is processed, or after it failed,
    version ``served_version``'s chunks keep being served.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        PARSING = "parsing"
        CHUNKING = "chunking"
        EMBEDDING = "embedding"
        DONE = "done"
        FAILED = "failed"

    UNFINISHED = (Status.QUEUED, Status.PARSING, Status.CHUNKING, Status.EMBEDDING)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="documents")
    # None: shared by the whole project; else only this user's searches find it
    end_user = models.ForeignKey(
        EndUser, null=True, blank=True, on_delete=models.CASCADE, related_name="documents"
    )
    title = models.CharField(max_length=500, blank=True)
    source = models.CharField(max_length=500)  # the file name or the given source name
    mime_type = models.CharField(max_length=200, blank=True)
    size = models.PositiveBigIntegerField(default=0)  # bytes
    sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    chunks_total = models.PositiveIntegerField(default=0)
    chunks_done = models.PositiveIntegerField(default=0)  # embedded
    timings = models.JSONField(default=dict, blank=True)  # parse_ms, chunk_ms, embed_ms, total_ms
    chunker = models.CharField(max_length=32)
    chunker_settings = models.JSONField(default=dict, blank=True)  # complete, cleaned
    version = models.PositiveIntegerField(default=1)
    served_version = models.PositiveIntegerField(null=True, blank=True)
    # pipeline runs begun for this version: a file that kills its run every time is
    # given up on instead of being redelivered forever
    attempts = models.PositiveSmallIntegerField(default=0)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)  # this version's first run
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = DocumentQuerySet.as_manager()

    class Meta:
        indexes = [
            # the API's list, newest first, optionally by status
            models.Index(fields=["project", "-created_at"], name="document_project_created"),
            # the beat sweep: unfinished documents not touched for a while
            models.Index(
                fields=["updated_at"],
                name="document_unfinished",
                condition=Q(status__in=["queued", "parsing", "chunking", "embedding"]),
            ),
        ]
        constraints = [
            # the same bytes in the same scope are one document (unless that one failed)
            models.UniqueConstraint(
                fields=["project", "end_user", "sha256"],
                condition=~Q(status="failed"),
                nulls_distinct=False,
                name="document_unique_content",
            ),
            # a source names one document per scope; new bytes make a new version of it
            models.UniqueConstraint(
                fields=["project", "end_user", "source"],
                nulls_distinct=False,
                name="document_unique_source",
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.source

    @property
    def scope(self) -> str:
        return "project" if self.end_user_id is None else "user"

    @property
    def progress(self) -> dict[str, Any]:
        """Chunks embedded out of the chunks of the version being ingested."""
        total, done = self.chunks_total, min(self.chunks_done, self.chunks_total)
        percent = 100.0 if self.status == self.Status.DONE else 0.0
        if total and self.status != self.Status.DONE:
            percent = round(100.0 * done / total, 1)
        return {"done": done, "total": total, "percent": percent}


class DocumentContent(models.Model):
    """The bytes of a document's current version, apart so that lists never load them;
    kept so that a re-ingest, a retry or a lost task message needs no upload again."""

    document = models.OneToOneField(
        Document, primary_key=True, on_delete=models.CASCADE, related_name="content"
    )
    data = models.BinaryField()

    def __str__(self) -> str:
        return f"content of {self.document_id}"
