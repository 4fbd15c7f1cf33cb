"""The step that ends every creation of memories from an agent's or an operator's input
(memory_create_batch, the import of an export): the ``create`` revisions in the
writer's transaction, then, once it commits, the embedding task and the
memories_created signal. One step, so that the derived work (summaries, facts,
synopses: synopsis.receivers) sees every path's memories alike."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memories.models import Memory, MemoryRevision, Project
from memories.services.embedding import embedding_enqueue
from memories.services.exports import chunked
from memories.services.revisions import Actor, revision_build
from memories.signals import memories_created


def memories_stored(*, project: Project, memories: list[Memory], actor: Actor) -> None:
    """Finish the creation of ``memories``, just inserted into ``project`` in the
    caller's transaction: one ``create`` revision each by ``actor`` now; after the
    commit, one embedding task if any of them is still pending (an import may have
    stored the vectors it carried) and one memories_created signal naming them (its
    kwargs: memories.signals). Nothing for no memories."""
    if not memories:
        return
    for chunk in chunked(memories):  # an import may store many: bounded inserts
        MemoryRevision.objects.bulk_create(
            revision_build(memory=m, action="create", actor=actor, before=None, after=m.snapshot())
            for m in chunk
        )
    if any(m.embedding_status == Memory.EmbeddingStatus.PENDING for m in memories):
        transaction.on_commit(embedding_enqueue)
    kwargs = _created_kwargs(project, memories)
    transaction.on_commit(lambda: memories_created.send(sender=Memory, **kwargs))


def _created_kwargs(project: Project, memories: list[Memory]) -> dict[str, Any]:
    """memories_created's kwargs: the rooms that got messages (their buffers may be
    over capacity now) and the messages users wrote in a user's name (facts are
    mined from them)."""
    messages = [m for m in memories if m.kind == Memory.Kind.MESSAGE]
    return {
        "project_id": project.pk,
        "memory_ids": [m.pk for m in memories],
        "message_room_ids": sorted({m.room_id for m in messages if m.room_id}),
        "user_message_ids": [
            m.pk for m in messages if m.role == Memory.Role.USER and m.end_user_id
        ],
    }
