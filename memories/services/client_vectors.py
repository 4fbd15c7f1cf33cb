"""Vectors a client sends with the memories it writes (the memory protocol's
``add_vectors`` with attributes; an ElizaOS memory's ``embedding``): stored as given in
the space the project serves from, and the memory is embedded at once (status
``done``), so no worker is asked to embed it and a search finds it by vector as soon as
the write commits.

A client's vector stands for the whole text: one window (window 0), whatever the
length of the text (the model would cut a long one into several,
memories.providers.embeddings.token_windows).

During a model switch (embedding_switch.py) such a write is accepted, not refused:
the vector goes into the space the project serves from, the only one whose dimension
the API checked it against, and the switch's job computes the new model's vector from
the text. The job needs nothing from here for that: what it embeds is every memory
``done`` without a vector in its target (embedding_switch._missing), and the flip waits
until none is left, so the project never serves from a space that lacks the memory. A
refusal would have failed an agent's writes for the hours a switch takes (about 12 hours
for 100,000 memories to mpnet on 2 cores, README), for a vector the hub can rebuild.
Past the flip, a process still reading the project's old row (LOOKUP_CACHE_SECONDS)
stores the vector in the space it left; embedding_switch_sweep finds the memories
embedded around the flip without a vector in the new space and sets them pending, so
the workers embed them there.
"""

from __future__ import annotations

from django.utils import timezone

from memories.models import Embedding, Memory, Project
from memories.services.embedding_spaces import project_space


def client_vectors_mark(
    *, project: Project, given: list[tuple[Memory, list[float]]]
) -> list[Embedding]:
    """Mark each memory of ``given`` (not inserted yet) embedded now, and return the
    rows of its vector in the space ``project`` serves from, to insert once the
    memories are. A vector of another length than the space's dimension is a
    ValueError (the API refuses it first, as a 400 naming the field)."""
    if not given:
        return []
    space = project_space(project)
    now = timezone.now()
    rows = []
    for memory, vector in given:
        if len(vector) != space.dimension:
            raise ValueError(
                f"a vector of {len(vector)} numbers for the space {space} "
                f"({space.dimension} dimensions)"
            )
        memory.embedding_status = Memory.EmbeddingStatus.DONE
        memory.embedded_at = now
        rows.append(Embedding(memory=memory, space=space, window=0, vector=vector, created_at=now))
    return rows
