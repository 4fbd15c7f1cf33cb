"""memories.services.stored: every path that creates memories from an agent's or an
operator's input (one memory, a batch, an import) records one `create` revision per new
memory and, once committed, asks for the embedding once and sends memories_created
once, naming the new memories, the rooms that got messages and the users' messages."""

from __future__ import annotations

import uuid

import pytest

from memories.models import EndUser, Memory, MemoryRevision, Room
from memories.services.embedding import embedding_enqueue
from memories.services.exports import end_user_export
from memories.services.imports import export_document_import
from memories.services.memories import MemoryInput, memory_create_batch
from memories.services.revisions import Actor
from memories.signals import memories_created
from synopsis import receivers
from synopsis.models import FactExtraction
from synopsis.services.facts import messages_facts_extract
from tests.conftest import embed_pending

ACTOR = Actor.system("test")
# (kind, role, room, content): what each path writes for the user maria
ITEMS = [
    ("message", "user", "chat", "Hi! My name is Maria."),
    ("message", "assistant", "chat", "Nice to meet you, Maria."),
    ("message", "user", None, "I love jazz."),
    ("fact", "", None, "User likes tea."),
]


@pytest.fixture
def sent():
    """The memories_created signals sent, as a receiver connected to it sees them."""
    received: list[dict] = []

    def receiver(sender, **kwargs):
        received.append(kwargs)

    memories_created.connect(receiver)
    yield received
    memories_created.disconnect(receiver)


def inputs(items=ITEMS):
    return [
        MemoryInput(content=content, kind=kind, role=role, user="maria", room=room)
        for kind, role, room, content in items
    ]


def export_of(items=ITEMS):
    """An export document of maria holding ``items``, as another hub wrote it."""
    return {
        "format": "memoryhub-export",
        "version": 1,
        "users": [{"external_id": "maria"}],
        "rooms": [{"external_id": "chat"}],
        "agents": [],
        "memories": [
            {"id": str(uuid.uuid4()), "user": "maria", "room": room, "kind": kind, "role": role}
            | {"content": content}
            for kind, role, room, content in items
        ],
    }


def create_one(project, stored):
    """POST /memories/: one memory per call."""
    memory_create_batch(project=project, items=inputs(ITEMS[:1]), actor=ACTOR)


def create_batch(project, stored):
    """POST /memories/batch/, one item being a retry of a memory stored before."""
    retry = MemoryInput(content=stored.content, user="maria", id=stored.public_id)
    results = memory_create_batch(project=project, items=[*inputs(), retry], actor=ACTOR)
    assert [created for _, created in results] == [True] * len(ITEMS) + [False]


def create_by_import(project, stored):
    """An import of a document holding a memory stored before (skipped)."""
    document = export_of()
    document["memories"].append(
        {"id": str(stored.public_id), "user": "maria", "content": stored.content}
    )
    report = export_document_import(project=project, document=document, actor=ACTOR)
    assert report.memories == {"created": len(ITEMS), "skipped": 1}


@pytest.mark.parametrize("write", [create_one, create_batch, create_by_import])
def test_every_path_records_revisions_and_sends_one_signal_after_commit(
    owner, sent, write, django_capture_on_commit_callbacks
):
    [(stored, _)] = memory_create_batch(
        project=owner.project,
        items=[MemoryInput(content="stored before", user="maria")],
        actor=ACTOR,
    )  # in the test's transaction, never committed: nothing sent
    MemoryRevision.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        write(owner.project, stored)
    new = list(Memory.objects.exclude(pk=stored.pk))
    assert len(new) == (1 if write is create_one else len(ITEMS))
    revisions = MemoryRevision.objects.all()
    assert sorted(r.memory_id for r in revisions) == sorted(m.pk for m in new)
    assert {(r.action, r.actor) for r in revisions} == {("create", "test")}
    assert [c for c in callbacks if c is embedding_enqueue] == [embedding_enqueue]
    [signal] = sent
    assert set(signal) == {"signal", "project_id", "memory_ids", "message_room_ids"} | {
        "user_message_ids"
    }
    assert signal["project_id"] == owner.project.pk
    assert sorted(signal["memory_ids"]) == sorted(m.pk for m in new)
    assert signal["message_room_ids"] == [Room.objects.get(external_id="chat").pk]
    users_turns = [m.pk for m in new if m.kind == "message" and m.role == "user"]
    assert sorted(signal["user_message_ids"]) == sorted(users_turns)


def test_an_import_carrying_its_vectors_asks_for_no_embedding(
    owner, sent, provider, django_capture_on_commit_callbacks
):
    memory_create_batch(project=owner.project, items=inputs(), actor=ACTOR)
    embed_pending()
    exported = end_user_export(end_user=EndUser.objects.get(), vectors=True)
    EndUser.objects.all().delete()
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        report = export_document_import(project=owner.project, document=exported, actor=ACTOR)
    assert report.vectors["stored"] == len(ITEMS)
    assert embedding_enqueue not in callbacks
    assert MemoryRevision.objects.filter(action="create").count() == 2 * len(ITEMS)
    [signal] = sent
    assert len(signal["memory_ids"]) == len(ITEMS)
    assert len(signal["user_message_ids"]) == 2


def test_the_facts_of_imported_user_messages_are_mined(
    owner, monkeypatch, django_capture_on_commit_callbacks
):
    """The fact extractor's receiver (synopsis.receivers) is asked to mine the imported
    users' messages, and only those; mining them, as its task does, gives their facts."""
    asked: list[list] = []
    # what the receiver sends the worker, recorded here and run below
    monkeypatch.setattr(
        receivers, "facts_extract_enqueue", lambda *, memory_ids: asked.append(memory_ids)
    )
    exported = export_of()
    with django_capture_on_commit_callbacks(execute=True):
        export_document_import(project=owner.project, document=exported, actor=ACTOR)
    [ids] = asked
    user_turns = [m["id"] for m in exported["memories"] if m["role"] == "user"]
    assert sorted(str(Memory.objects.get(pk=pk).public_id) for pk in ids) == sorted(user_turns)
    messages_facts_extract(memory_ids=ids)
    mined = FactExtraction.objects.filter(project=owner.project)
    assert sorted(str(e.message.public_id) for e in mined) == sorted(user_turns)
    [maria] = Memory.objects.filter(content="User's name is Maria.")
    assert maria.source_ids == [user_turns[0]]
