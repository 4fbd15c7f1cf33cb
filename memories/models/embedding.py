"""Embedding spaces (one per model) and the vectors of memories' text windows."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

from memories.models.memory import Memory


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
