"""memories.services.exports, export_checks and imports: the document check, chunked
reads and writes, what an import sends after commit, `unique` memories, the export's
snapshot."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.models import EndUser, Memory, MemoryRevision, Room
from memories.services import export_checks, exports, imports
from memories.services.export_checks import ExportInvalid, export_document_check
from memories.services.exports import end_user_export, room_export
from memories.services.imports import export_document_import
from memories.services.memories import MemoryInput, memory_create_batch
from memories.services.revisions import Actor
from memories.signals import memories_created
from tests.conftest import embed_pending

ACTOR = Actor.system("test")


def write(project, *items):
    return [m for m, _ in memory_create_batch(project=project, items=list(items), actor=ACTOR)]


def document(*memories, users=("carol",), rooms=()):
    return {
        "format": "memoryhub-export",
        "version": 1,
        "users": [{"external_id": user} for user in users],
        "rooms": [{"external_id": room} for room in rooms],
        "agents": [],
        "memories": [{"id": str(uuid.uuid4()), "user": "carol", **m} for m in memories],
    }


def without_time(exported):
    return {key: value for key, value in exported.items() if key != "exported_at"}


def test_the_check_fills_in_defaults_and_parses_ids_and_times():
    checked = export_document_check(
        document({"content": "hi", "created_at": "2024-01-02T03:04:05+02:00"})
    )
    [memory] = checked["memories"]
    assert isinstance(memory["id"], uuid.UUID)
    assert memory["created_at"].isoformat() == "2024-01-02T03:04:05+02:00"
    assert memory["updated_at"] == memory["created_at"]
    assert (memory["kind"], memory["role"], memory["status"]) == ("message", "", "active")
    assert (memory["importance"], memory["confidence"], memory["unique"]) == (0.5, 1.0, False)
    assert (memory["metadata"], memory["source_ids"], memory["embeddings"]) == ({}, [], [])
    assert checked["users"][0]["metadata"] == {}


def test_the_check_lists_at_most_max_errors_fields():
    bad = document(*[{"content": "x", "kind": "memo"}] * (export_checks.MAX_ERRORS + 20))
    with pytest.raises(ExportInvalid) as raised:
        export_document_check(bad)
    assert len(raised.value.errors) == export_checks.MAX_ERRORS
    assert "memories[0].kind" in str(raised.value)


def test_a_naive_time_is_utc():
    checked = export_document_check(document({"content": "hi", "created_at": "2024-01-02T03:04"}))
    assert checked["memories"][0]["created_at"].isoformat() == "2024-01-02T03:04:00+00:00"


def test_two_unique_memories_with_one_text_are_invalid():
    bad = document({"content": "same", "unique": True}, {"content": "same", "unique": True})
    with pytest.raises(ExportInvalid) as raised:
        export_document_check(bad)
    assert list(raised.value.errors) == ["memories[1].unique"]


def test_small_chunks_give_the_same_documents(owner, provider, monkeypatch):
    write(
        owner.project,
        *[MemoryInput(content=f"turn {n}", user="alice", room=f"r{n % 2}") for n in range(7)],
    )
    embed_pending()
    whole = end_user_export(end_user=EndUser.objects.get(), vectors=True)
    monkeypatch.setattr(exports, "CHUNK_SIZE", 2)
    monkeypatch.setattr(imports, "CHUNK_SIZE", 2)  # its bulk inserts' batch size
    steps = []
    chunked = end_user_export(end_user=EndUser.objects.get(), vectors=True, progress=steps.append)
    assert steps == [2, 2, 2, 1]
    assert without_time(chunked) == without_time(whole)

    EndUser.objects.all().delete()
    steps.clear()
    report = export_document_import(
        project=owner.project, document=whole, actor=ACTOR, progress=steps.append
    )
    assert steps == [2, 2, 2, 1]
    assert (report.memories["created"], report.vectors["stored"]) == (7, 7)
    again = end_user_export(end_user=EndUser.objects.get(), vectors=True)
    assert without_time(again) == without_time(whole)


def test_skipped_memories_count_in_the_progress(owner):
    exported = document({"content": "one"}, {"content": "two"})
    export_document_import(project=owner.project, document=exported, actor=ACTOR)
    steps = []
    report = export_document_import(
        project=owner.project, document=exported, actor=ACTOR, progress=steps.append
    )
    assert report.memories == {"created": 0, "skipped": 2}
    assert sum(steps) == 2


def test_an_import_sends_memories_created_and_asks_for_embeddings_after_commit(
    owner, django_capture_on_commit_callbacks
):
    received = []

    def receiver(sender, **kwargs):
        received.append(kwargs)

    memories_created.connect(receiver)
    try:
        exported = document(
            {"content": "hello", "room": "r1"},
            {"content": "a fact", "room": "r1", "kind": "fact"},
            {"content": "elsewhere"},
            rooms=("r1",),
        )
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            export_document_import(project=owner.project, document=exported, actor=ACTOR)
        assert received == []  # nothing before the commit
        for callback in callbacks:
            callback()
    finally:
        memories_created.disconnect(receiver)
    [sent] = received
    assert sent["project_id"] == owner.project.pk
    assert sent["memory_ids"] == [uuid.UUID(m["id"]) for m in exported["memories"]]
    assert sent["message_room_ids"] == [Room.objects.get(external_id="r1").pk]
    assert len(callbacks) == 2  # and the embedding enqueue


def test_nothing_is_sent_when_nothing_is_new(owner, django_capture_on_commit_callbacks):
    exported = document({"content": "hello"})
    export_document_import(project=owner.project, document=exported, actor=ACTOR)
    with django_capture_on_commit_callbacks() as callbacks:
        export_document_import(project=owner.project, document=exported, actor=ACTOR)
    assert callbacks == []


def test_a_unique_text_the_project_has_is_skipped(owner):
    [stored] = write(owner.project, MemoryInput(content="Likes tea", user="carol", unique=True))
    exported = document({"content": "Likes  tea", "unique": True}, {"content": "Likes coffee"})
    report = export_document_import(project=owner.project, document=exported, actor=ACTOR)
    assert report.memories == {"created": 1, "skipped": 1}
    assert list(Memory.objects.filter(content__startswith="Likes tea")) == [stored]


def test_existing_users_and_rooms_are_left_as_they_are(owner):
    EndUser.objects.create(project=owner.project, external_id="carol", name="Carol")
    exported = document({"content": "hello", "room": "r1"}, rooms=("r1",))
    exported["users"][0]["name"] = "Someone else"
    report = export_document_import(project=owner.project, document=exported, actor=ACTOR)
    assert report.users == {"created": 0, "existing": 1}
    assert report.rooms == {"created": 1, "existing": 0}
    assert EndUser.objects.get().name == "Carol"


def test_the_revision_records_the_importer_and_the_memory(owner):
    exported = document({"content": "hello", "kind": "fact", "status": "archived"})
    export_document_import(project=owner.project, document=exported, actor=ACTOR)
    [revision] = MemoryRevision.objects.all()
    assert (revision.action, revision.actor_type, revision.actor) == ("create", "system", "test")
    assert revision.after["status"] == "archived" and revision.after["kind"] == "fact"


@pytest.mark.django_db(transaction=True)
def test_an_export_outside_a_transaction_reads_one_snapshot(owner):
    write(owner.project, MemoryInput(content="hello", user="alice", room="r1"))
    room = Room.objects.get()
    with CaptureQueriesContext(connection) as queries:
        exported = room_export(room=room)
    sqls = [query["sql"] for query in queries.captured_queries]
    assert sqls[:2] == ["BEGIN", "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"]
    assert [m["content"] for m in exported["memories"]] == ["hello"]
    assert [u["external_id"] for u in exported["users"]] == ["alice"]
