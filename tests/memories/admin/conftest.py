"""Fixtures of the admin tests: memories written through the services, and one row of
every model the admin lists."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from memories.models import (
    Embedding,
    EmbeddingSpace,
    EndUser,
    IdempotencyKey,
    MaintenanceRun,
    Membership,
    Memory,
    MemoryRevision,
    Room,
    SettingsRevision,
    Synopsis,
    SynopsisRevision,
)
from memories.services.memories import MemoryInput, memory_create_batch
from memories.services.revisions import Actor
from synopsis.models import FactExtraction, LlmCall

AGENT = Actor.api_key("test")
SCRIPT = "<script>alert('pwned')</script> remember this"


def write(project: Any, *items: MemoryInput) -> list[Memory]:
    """Memories stored as the API stores them (revisions, pending embedding)."""
    return [memory for memory, _ in memory_create_batch(project=project, items=list(items),
                                                          actor=AGENT)]  # fmt: skip


@dataclass
class World:
    """One row of each model, in the owner's project."""

    memories: list[Memory]
    rows: dict[type, Any]


@pytest.fixture
def world(owner: Any) -> World:
    project = owner.project
    memories = write(
        project,
        MemoryInput(content="Maria is allergic to peanuts", user="maria", room="chat-1",
                    role="user"),
        MemoryInput(content="Maria lives in Lisbon", kind="fact", user="maria"),
        MemoryInput(content=SCRIPT, user="bob", room="chat-2", role="user"),
    )  # fmt: skip
    space = EmbeddingSpace.objects.create(provider="hashing", model="admin-test", dimension=3)
    operator = get_user_model().objects.create_user("olga", "olga@example.com", "pw")
    maria = EndUser.objects.get(project=project, external_id="maria")
    rows: dict[type, Any] = {
        Embedding: Embedding.objects.create(memory=memories[0], space=space, vector=[1, 0, 0]),
        EmbeddingSpace: space,
        Membership: Membership.objects.create(user=operator, project=project, role="editor"),
        IdempotencyKey: IdempotencyKey.objects.create(
            project=project, key="retry-1", request_hash="0" * 64, status_code=201,
            response={"ok": True},
        ),
        MaintenanceRun: MaintenanceRun.objects.create(task="prune", project=project,
                                                      counts={"age": 2}),
        SettingsRevision: SettingsRevision.objects.create(
            project=project, actor_type="operator", actor="olga", before={},
            after={"search": {"keyword_weight": 0.7}},
        ),
        Synopsis: Synopsis.objects.create(project=project, end_user=maria,
                                          identity_text="Maria, allergic to peanuts."),
        SynopsisRevision: SynopsisRevision.objects.create(
            project=project, end_user=maria, part="identity", action="lock",
            actor_type="operator", actor="olga",
        ),
        LlmCall: LlmCall.objects.create(project=project, purpose="summary", model="m",
                                        status="ok", prompt_tokens=10, completion_tokens=5),
        FactExtraction: FactExtraction.objects.create(project=project, message=memories[0],
                                                      status="done", extractor="offline"),
        MemoryRevision: MemoryRevision.objects.filter(memory_id=memories[2].pk).get(),
        Room: Room.objects.get(project=project, external_id="chat-2"),
        EndUser: maria,
    }  # fmt: skip
    return World(memories=memories, rows=rows)
