"""The stand-in embedding models of the BufferMemory tests, and a buffer of their
dimension."""

import hashlib
import re

from memories.providers.buffer_memory import BufferMemory

DIMENSION = 64


class WordsModel:
    """A deterministic bag-of-words embedder (words hashed into 64 dimensions) that
    records its calls; texts containing ``fail_on`` make it raise."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.single: list[str] = []
        self.batches: list[list[str]] = []

    def vector(self, text: str) -> list[float]:
        if self.fail_on and self.fail_on in text:
            raise RuntimeError(f"cannot embed {text!r}")
        vector = [0.0] * DIMENSION
        for word in re.findall(r"\w+", text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIMENSION] += 1.0
        return vector

    def embed(self, text: str) -> list[float]:
        self.single.append(text)
        return self.vector(text)

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return [self.vector(text) for text in texts]


class DownModel:
    def embed(self, text: str) -> list[float]:
        raise RuntimeError("embedding service down")


def buffer(**settings) -> BufferMemory:
    settings.setdefault("vector_dimension", DIMENSION)
    return BufferMemory(**settings)
