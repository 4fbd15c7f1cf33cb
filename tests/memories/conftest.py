"""Fixtures of the core's tests: an embedding provider that records its calls, and
memories written as the API writes them."""

import re

import numpy as np
import pytest

from memories.models import Embedding, Memory, content_hash
from memories.providers.embeddings import HashingEmbeddingProvider, token_windows
from memories.services import embedding_spaces


class CountingProvider:
    """The hashing embedder, recording every batch of texts it is asked to embed; with
    ``window_words``, texts longer than that are embedded as windows of that many
    words, overlapping by one word (the local model's windows are its tokens)."""

    name = "hashing"

    def __init__(
        self, model: str = "pipeline-test", dimension: int = 16, window_words: int = 0
    ) -> None:
        self.model, self.dimension = model, dimension
        self.window_words = window_words
        self._inner = HashingEmbeddingProvider(model, dimension)
        self.calls: list[list[str]] = []

    def windows(self, text):
        if not self.window_words:
            return [(0, len(text))]
        offsets = [match.span() for match in re.finditer(r"\S+", text)]
        return token_windows(offsets, length=len(text), size=self.window_words, overlap=1)

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
    monkeypatch.setattr(embedding_spaces, "get_provider", lambda: counting)
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


def windows_of(memory):
    """The memory's stored vectors, window by window."""
    rows = Embedding.objects.filter(memory=memory).order_by("window")
    return [np.asarray(row.vector, dtype=np.float32) for row in rows]
