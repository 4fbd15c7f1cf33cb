"""Fixtures of the core's tests: an embedding provider that records its calls, and
memories written as the API writes them."""

import numpy as np
import pytest

from memories.embeddings import HashingEmbeddingProvider
from memories.models import Embedding, Memory, content_hash
from memories.services import embedding as pipeline


class CountingProvider:
    """The hashing embedder, recording every batch of texts it is asked to embed."""

    name = "hashing"

    def __init__(self, model: str = "pipeline-test", dimension: int = 16) -> None:
        self.model, self.dimension = model, dimension
        self._inner = HashingEmbeddingProvider(model, dimension)
        self.calls: list[list[str]] = []

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self._inner.embed(texts)


@pytest.fixture
def provider(monkeypatch):
    """The provider the pipeline uses in these tests (the real model is not needed)."""
    counting = CountingProvider()
    monkeypatch.setattr(pipeline, "get_provider", lambda: counting)
    return counting


def pending(owner, *texts):
    """Memories written as the API writes them, without asking a worker."""
    memories = [
        Memory(project=owner.project, content=text, content_hash=content_hash(text))
        for text in texts
    ]
    return Memory.objects.bulk_create(memories)


def vector_of(memory):
    return np.asarray(Embedding.objects.get(memory=memory).vector, dtype=np.float32)
