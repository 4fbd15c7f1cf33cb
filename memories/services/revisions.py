"""Who changed a memory and how: every write path records a MemoryRevision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memories.models import Memory, MemoryRevision


@dataclass(frozen=True)
class Actor:
    """Who makes a change: an API key (by prefix), an operator or a system task."""

    type: str
    name: str

    @classmethod
    def system(cls, task: str) -> Actor:
        return cls(MemoryRevision.ActorType.SYSTEM, task)

    @classmethod
    def operator(cls, username: str) -> Actor:
        return cls(MemoryRevision.ActorType.OPERATOR, username)

    @classmethod
    def api_key(cls, prefix: str) -> Actor:
        return cls(MemoryRevision.ActorType.API_KEY, prefix)


def revision_build(
    *,
    memory: Memory,
    action: str,
    actor: Actor,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    intent: str = "",
) -> MemoryRevision:
    """An unsaved revision row, for callers that insert many at once; ``intent`` says
    why beyond the action (MemoryRevision.intent: restore, undo, bulk, review)."""
    return MemoryRevision(
        project_id=memory.project_id,
        memory_id=memory.pk,
        memory_public_id=memory.public_id,
        action=action,
        actor_type=actor.type,
        actor=actor.name,
        before=before,
        after=after,
        intent=intent,
    )
