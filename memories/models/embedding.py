"""Embedding spaces (one per model), the vectors of memories' text windows, and the
switches that move a project from one space to another."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

from memories.models.memory import Memory
from memories.models.tenancy import Project


class EmbeddingSpace(models.Model):
    """One embedding model's vector space; each gets its own partial HNSW index."""

    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=200)
    dimension = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["provider", "model"], name="embedding_space_model")
        ]

    def __str__(self) -> str:
        return f"{self.provider}:{self.model} ({self.dimension}d)"

    @property
    def index_name(self) -> str:
        return f"embedding_hnsw_space_{self.pk}"


class Embedding(models.Model):
    """The vector of one window of a memory's text in one space.

    A text longer than the model reads at once is embedded as overlapping windows
    (memories.providers.embeddings.token_windows), each a row; a memory's similarity to a query
    is its best window's. The vector column is untyped so spaces can differ in size.
    """

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="embeddings")
    space = models.ForeignKey(EmbeddingSpace, on_delete=models.CASCADE)
    window = models.PositiveSmallIntegerField(db_default=0)  # 0, 1, ... in text order
    vector = VectorField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["memory", "space", "window"], name="embedding_memory_space_window"
            )
        ]
        # The HNSW index per space is created with the space
        # (memories.services.embedding.embedding_space_index_ensure).

    def __str__(self) -> str:
        return f"{self.memory_id} in space {self.space_id}"


class EmbeddingSwitch(models.Model):
    """A project's move to another embedding model (memories/services/embedding_switch.py):
    every memory embedded into ``target`` in the background while the project serves
    from ``source``, then one flip. The source vectors are kept until ``keep_until``
    (a switch back before then embeds only what was written since), then dropped."""

    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        CANCELLED = "cancelled"
        FAILED = "failed"

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="embedding_switches"
    )
    source = models.ForeignKey(EmbeddingSpace, on_delete=models.PROTECT, related_name="+")
    target = models.ForeignKey(EmbeddingSpace, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    # memories the target still lacked when the job started, and those it has embedded
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    requested_by = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    # when the job last finished a batch: the rate and a stalled job are read from it
    progressed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    keep_until = models.DateTimeField(null=True, blank=True)
    source_dropped_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project"],
                condition=models.Q(status="running"),
                name="embedding_switch_one_running",
            )
        ]
        indexes = [models.Index(fields=["project", "-started_at"], name="embedding_switch_project")]

    def __str__(self) -> str:
        return f"{self.project} to {self.target} ({self.status})"
