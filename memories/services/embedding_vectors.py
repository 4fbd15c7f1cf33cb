"""Memories' vectors as the ranking reads them: each memory's windows averaged into one
unit vector, read in one statement (the buffer's search, the context's facts)."""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db import connection

from memories.providers.embeddings import normalize

# each memory's windows averaged in SQL and sent as a binary float4 array: pgvector's
# text form takes 10 ms to parse for 100 memories, this 0.3 ms. array_send's layout:
# a 20-byte header (1 dimension), then each element as a 4-byte length and a float4
_MEAN_VECTORS_SQL = """
    SELECT memory_id, array_send(avg(vector)::real[]) FROM memories_embedding
    WHERE memory_id = ANY(%s) AND space_id = %s GROUP BY memory_id
"""
_ARRAY_HEADER = 20
# the same mean's cosine similarity to a query, computed where the vectors are: one
# float a memory on the wire (a user's 800 facts: 1.2 MB of vectors otherwise)
_MEAN_SIMILARITIES_SQL = """
    SELECT memory_id, 1 - (avg(vector) <=> %s::vector) FROM memories_embedding
    WHERE memory_id = ANY(%s) AND space_id = %s GROUP BY memory_id
"""


def memory_vectors(*, memory_ids: list[Any], space_id: int) -> dict[Any, np.ndarray]:
    """Each embedded memory's vector in the space, by id: the mean of its windows (a
    long text is stored as several), normalized. Memories not embedded are absent."""
    if not memory_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_MEAN_VECTORS_SQL, [list(memory_ids), space_id])
        rows = cursor.fetchall()
    if not rows:
        return {}
    matrix = np.stack(
        [np.frombuffer(bytes(raw), dtype=">f4", offset=_ARRAY_HEADER)[1::2] for _, raw in rows]
    ).astype(np.float32)
    return dict(zip([pk for pk, _ in rows], normalize(matrix), strict=True))


def memory_similarities(
    *, memory_ids: list[Any], space_id: int, query: np.ndarray
) -> dict[Any, float]:
    """Each embedded memory's cosine similarity to ``query`` in the space, by id: the
    mean of its windows against it, as ``memory_vectors`` would give it. Memories not
    embedded are absent."""
    if not memory_ids:
        return {}
    literal = "[" + ",".join(f"{x:.7g}" for x in query.tolist()) + "]"
    with connection.cursor() as cursor:
        cursor.execute(_MEAN_SIMILARITIES_SQL, [literal, list(memory_ids), space_id])
        return {pk: float(similarity) for pk, similarity in cursor.fetchall()}
