"""The vectors of a BufferMemory (memories/providers/buffer_memory.py): what the buffer
needs from an embedding model, the model called so that a failure leaves an item
without a vector instead of failing the add, and every vector checked and stored as a
read-only float32 unit vector. Numpy only, like the buffer itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

VectorLike = Sequence[float] | np.ndarray
MODEL_VECTOR = "the model's vector"


class EmbeddingModel(Protocol):
    """What the buffer needs from a model: one text in, one vector out. A model may also
    have ``embed_batch(texts) -> vectors`` (see ``BatchEmbeddingModel``), which
    ``add_many`` uses for all its texts at once."""

    def embed(self, text: str) -> VectorLike: ...


class BatchEmbeddingModel(EmbeddingModel, Protocol):
    def embed_batch(self, texts: list[str]) -> Sequence[VectorLike] | np.ndarray: ...


def unit_vector(value: Any, dimension: int, name: str) -> np.ndarray:
    """``value`` as a read-only float32 unit vector of ``dimension`` numbers (a single
    row, shape (1, dimension), is accepted too); ValueError naming ``name`` if it is
    not one."""
    try:
        vector = np.array(value, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} is not a vector of numbers: {error}") from error
    if vector.ndim == 2 and vector.shape[0] == 1:
        vector = vector[0]
    if vector.shape != (dimension,):
        raise ValueError(f"{name} must have {dimension} numbers, got shape {vector.shape}")
    if not np.isfinite(vector).all():
        raise ValueError(f"{name} has a number that is not finite")
    norm = float(np.linalg.norm(vector))
    if norm == 0:
        raise ValueError(f"{name} is all zeros")
    if abs(norm - 1) > 1e-6:  # already unit length: keep the numbers as they are
        vector = (vector / norm).astype(np.float32)
    vector.flags.writeable = False
    return vector


def text_embed(model: Any, text: str, dimension: int) -> np.ndarray | None:
    """The text's vector by ``model``; None if the model fails or answers no vector."""
    try:
        return unit_vector(model.embed(text), dimension, MODEL_VECTOR)
    except Exception:  # an item without a vector is still found by recency
        return None


def texts_embed(model: Any, texts: list[str], dimension: int) -> list[np.ndarray | None]:
    """Each text's vector (None where there is none), in one ``embed_batch`` call when
    the model has it; a failing or miscounted batch gives none at all."""
    if not hasattr(model, "embed_batch"):
        return [text_embed(model, text, dimension) for text in texts]
    try:
        vectors = list(model.embed_batch(texts))
    except Exception:
        return [None] * len(texts)
    if len(vectors) != len(texts):
        return [None] * len(texts)
    embedded: list[np.ndarray | None] = []
    for vector in vectors:
        try:
            embedded.append(unit_vector(vector, dimension, MODEL_VECTOR))
        except ValueError:
            embedded.append(None)
    return embedded


def search_vector(
    model: Any, query: str | None, given: VectorLike | None, dimension: int
) -> tuple[np.ndarray | None, str | None]:
    """A search's vector (``given``, else the query's by the model) or None and the
    reason there is none (no query, no model, the model failed)."""
    if given is not None:
        return unit_vector(given, dimension, "query_vector"), None
    if query is not None and not isinstance(query, str):
        raise ValueError(f"query must be a string, got {type(query).__name__}")
    if not query or not query.strip():
        return None, "no query"
    if model is None:
        return None, "no embedding model"
    try:
        return unit_vector(model.embed(query), dimension, MODEL_VECTOR), None
    except Exception as error:
        return None, f"model failed: {error}"
