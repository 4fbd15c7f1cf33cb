"""Export and import: GET /api/v1/users/{user}/export/, GET /api/v1/rooms/{room}/export/,
POST /api/v1/import/. Round trips, vectors, tenants, scopes (documents written by hand:
test_import_documents.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from memories.models import (
    Agent,
    Embedding,
    EndUser,
    Memory,
    MemoryRevision,
    Room,
    SettingsRevision,
)
from tests.conftest import embed_pending
from tests.memories.api.export_calls import IMPORT, import_, room_export, user_export


def without_time(document):
    return {key: value for key, value in document.items() if key != "exported_at"}


# what remember() writes in one batch (the summary of the first two comes after)
TURNS = [
    {
        "user": "alice",
        "room": "r1",
        "agent": "helper",
        "role": "user",
        "content": "I moved to Lisbon last spring",
        "metadata": {"turn": 1},
        "created_at": "2024-03-01T10:00:00Z",
    },
    {
        "user": "alice",
        "room": "r1",
        "agent": "helper",
        "role": "assistant",
        "content": "How do you like Lisbon?",
        "content_json": {"source": "chat"},
        "created_at": "2024-03-01T10:00:01.250Z",
    },
    {
        "user": "bob",
        "room": "r1",
        "role": "user",
        "content": "Bob here, hello",
        "created_at": "2024-03-01T10:00:02Z",
    },
    {
        "user": "alice",
        "room": "r2",
        "role": "user",
        "content": "Any bakery tips?",
        "created_at": "2024-03-02T09:00:00Z",
    },
    # same time as the one before: the id breaks the tie, in both exports
    {
        "user": "alice",
        "room": "r2",
        "role": "user",
        "content": "Pastel de nata please",
        "created_at": "2024-03-02T09:00:00Z",
    },
    {
        "user": "alice",
        "room": "r1",
        "kind": "fact",
        "content": "Alice lives in Porto",
        "importance": 0.4,
        "confidence": 0.6,
        "created_at": "2024-02-01T00:00:00Z",
    },
    {
        "user": "alice",
        "room": "r1",
        "kind": "fact",
        "content": "Alice lives in Lisbon",
        "importance": 0.9,
        "unique": True,
        "created_at": "2024-03-01T10:05:00Z",
    },
    {
        "user": "alice",
        "kind": "goal",
        "content": "Learn Portuguese",
        "created_at": "2024-03-03T00:00:00Z",
    },
    {
        "user": "alice",
        "kind": "knowledge",
        "content": "Lisbon guide, chapter 1",
        "created_at": "2024-03-04T00:00:00Z",
    },
]


def remember(tenant):
    """Alice and Bob in room r1 (agent "helper", own settings) and Alice in r2: messages,
    archived ones summarized, a fact superseded by another, a pruned goal, a knowledge
    chunk, a unique fact; metadata, provenance and access counts on some."""
    client = tenant.client
    client.post("/api/v1/users/", {"external_id": "alice", "name": "Alice", "metadata": {"tz": 1}})
    client.post("/api/v1/rooms/", {"external_id": "r1", "name": "Support", "agent": "helper"})
    client.patch("/api/v1/rooms/r1/", {"settings": {"buffer": {"max_size": 6}}})
    client.post("/api/v1/rooms/", {"external_id": "r2", "world_id": "w1", "metadata": {"a": 1}})
    response = client.post("/api/v1/memories/batch/", {"memories": TURNS})
    assert response.status_code == 201, response.json()
    ids = [result["memory"]["id"] for result in response.json()["results"]]
    summary = client.post(
        "/api/v1/memories/",
        {
            "user": "alice",
            "room": "r1",
            "kind": "summary",
            "content": "Alice moved to Lisbon.",
            "created_at": "2024-03-01T11:00:00Z",
        },
    ).json()["memory"]
    Memory.objects.filter(pk__in=ids[:2]).update(status="archived")
    Memory.objects.filter(pk=summary["id"]).update(source_ids=ids[:2])
    Memory.objects.filter(pk=ids[5]).update(status="superseded")
    Memory.objects.filter(pk=ids[7]).update(status="pruned")
    Memory.objects.filter(pk=ids[8]).update(document_id=uuid.uuid4(), chunk_index=3)
    Memory.objects.filter(pk=ids[6]).update(
        access_count=4, accessed_at=datetime(2024, 4, 1, 8, 30, 0, 123456, tzinfo=UTC)
    )
    return ids + [summary["id"]]


# --- the document ------------------------------------------------------------------------


def test_a_user_export_holds_every_memory_of_the_user_and_what_they_refer_to(owner):
    ids = remember(owner)
    document = user_export(owner)
    assert (document["format"], document["version"]) == ("memoryhub-export", 1)
    assert document["scope"] == {"type": "user", "id": "alice"}
    assert [user["external_id"] for user in document["users"]] == ["alice"]
    assert document["users"][0]["metadata"] == {"tz": 1}
    assert [room["external_id"] for room in document["rooms"]] == ["r1", "r2"]
    r1 = document["rooms"][0]
    assert (r1["name"], r1["agent"], r1["settings"]) == (
        "Support",
        "helper",
        {"buffer": {"max_size": 6}},
    )
    assert [agent["external_id"] for agent in document["agents"]] == ["helper"]

    memories = document["memories"]
    assert {m["id"] for m in memories} == set(ids) - {ids[2]}  # not Bob's
    assert [m["created_at"] for m in memories] == sorted(m["created_at"] for m in memories)
    same_time = [m["id"] for m in memories if m["created_at"] == "2024-03-02T09:00:00Z"]
    assert same_time == sorted(same_time)
    assert {m["status"] for m in memories} == {"active", "archived", "superseded", "pruned"}
    by_id = {m["id"]: m for m in memories}
    assert by_id[ids[-1]]["kind"] == "summary"
    assert by_id[ids[-1]]["source_ids"] == ids[:2]
    assert by_id[ids[0]]["metadata"] == {"turn": 1}
    assert by_id[ids[1]]["content_json"] == {"source": "chat"}
    assert by_id[ids[1]]["created_at"] == "2024-03-01T10:00:01.250000Z"
    assert (by_id[ids[6]]["unique"], by_id[ids[6]]["access_count"]) == (True, 4)
    assert by_id[ids[6]]["accessed_at"] == "2024-04-01T08:30:00.123456Z"
    assert by_id[ids[8]]["chunk_index"] == 3 and by_id[ids[8]]["document_id"]
    assert "embeddings" not in by_id[ids[0]]


def test_a_room_export_holds_every_user_of_the_room(owner):
    ids = remember(owner)
    document = room_export(owner)
    assert document["scope"] == {"type": "room", "id": "r1"}
    assert [user["external_id"] for user in document["users"]] == ["alice", "bob"]
    assert [room["external_id"] for room in document["rooms"]] == ["r1"]
    assert {m["id"] for m in document["memories"]} == {*ids[:3], ids[5], ids[6], ids[-1]}


# --- round trips -------------------------------------------------------------------------


def test_export_delete_import_export_gives_the_same_user_document(owner):
    remember(owner)
    before = user_export(owner)
    assert owner.client.delete("/api/v1/users/alice/").json()["deleted"] == 9

    report = import_(owner, before)
    assert report["memories"] == {"created": 9, "skipped": 0}
    assert report["users"] == {"created": 1, "existing": 0}
    assert report["rooms"] == {"created": 0, "existing": 2}  # deleting a user keeps rooms
    after = user_export(owner)
    assert without_time(after) == without_time(before)
    assert after["exported_at"] >= before["exported_at"]

    imported = Memory.objects.filter(project=owner.project, end_user__external_id="alice")
    assert {m.embedding_status for m in imported} == {"pending"}
    revisions = MemoryRevision.objects.filter(memory_id__in=[m.pk for m in imported])
    creates = revisions.filter(action="create", actor=owner.key.prefix)
    assert creates.count() == 18  # the first creates, and one per memory imported
    assert revisions.filter(action="delete").count() == 9


def test_export_delete_import_export_gives_the_same_room_document(owner):
    remember(owner)
    before = room_export(owner)
    owner.client.delete("/api/v1/rooms/r1/")
    assert not Room.objects.filter(external_id="r1").exists()

    report = import_(owner, before)
    assert report["rooms"] == {"created": 1, "existing": 0}
    assert report["agents"] == {"created": 0, "existing": 1}
    assert without_time(room_export(owner)) == without_time(before)
    room = Room.objects.get(project=owner.project, external_id="r1")
    assert room.settings == {"buffer": {"max_size": 6}}
    [revision] = SettingsRevision.objects.filter(room=room)
    assert (revision.before, revision.after) == ({}, {"buffer": {"max_size": 6}})


def test_importing_twice_writes_nothing_the_second_time(owner):
    remember(owner)
    document = user_export(owner)
    owner.client.delete("/api/v1/users/alice/")
    import_(owner, document)
    counts = (Memory.objects.count(), MemoryRevision.objects.count(), EndUser.objects.count())
    again = import_(owner, document, status=200)
    assert again["memories"] == {"created": 0, "skipped": 9}
    assert again["users"] == {"created": 0, "existing": 1}
    assert (Memory.objects.count(), MemoryRevision.objects.count(), EndUser.objects.count()) == (
        counts
    )


def test_vectors_round_trip(owner, provider):
    remember(owner)
    embed_pending()
    before = user_export(owner, vectors="true")
    first = next(m for m in before["memories"] if m["content"] == "I moved to Lisbon last spring")
    [entry] = first["embeddings"]
    assert entry["space"] == {"provider": "hashing", "model": "pipeline-test", "dimension": 16}
    assert len(entry["windows"]) == 1 and len(entry["windows"][0]) == 16
    vectors = {m.pk: list(m.embeddings.get().vector) for m in Memory.objects.all()}

    owner.client.delete("/api/v1/users/alice/")
    report = import_(owner, before)
    assert report["vectors"] == {"stored": 9, "ignored": 0}
    assert report["notes"] == []
    imported = Memory.objects.filter(end_user__external_id="alice")
    assert {m.embedding_status for m in imported} == {"done"}
    assert all(list(m.embeddings.get().vector) == vectors[m.pk] for m in imported)
    assert without_time(user_export(owner, vectors="true")) == without_time(before)
    assert "embeddings" not in user_export(owner)["memories"][0]


def test_vectors_of_another_space_are_ignored_and_the_memories_embedded_again(owner, provider):
    remember(owner)
    embed_pending()
    document = user_export(owner, vectors="true")
    for memory in document["memories"]:
        memory["embeddings"][0]["space"]["model"] = "another-model"
    owner.client.delete("/api/v1/users/alice/")

    report = import_(owner, document)
    assert report["vectors"] == {"stored": 0, "ignored": 9}
    [note] = report["notes"]
    assert "hashing:another-model (16d)" in note and "embedded again" in note
    imported = Memory.objects.filter(end_user__external_id="alice")
    assert {m.embedding_status for m in imported} == {"pending"}
    assert not Embedding.objects.filter(memory__in=imported).exists()
    assert embed_pending() == 9


# --- tenants -----------------------------------------------------------------------------


def test_another_projects_user_or_room_is_a_404(owner, outsider):
    remember(owner)
    assert outsider.client.get("/api/v1/users/alice/export/").status_code == 404
    assert outsider.client.get("/api/v1/rooms/r1/export/").status_code == 404
    assert owner.client.get("/api/v1/users/nobody/export/").status_code == 404
    assert owner.client.get("/api/v1/rooms/nowhere/export/").status_code == 404


def snapshot(project):
    """Every row of a project that an import could touch."""
    return (
        sorted(EndUser.objects.filter(project=project).values_list()),
        sorted(Room.objects.filter(project=project).values_list()),
        sorted(Agent.objects.filter(project=project).values_list()),
        sorted(Memory.objects.filter(project=project).values_list("pk", "updated_at", "status")),
        MemoryRevision.objects.filter(project=project).count(),
    )


def test_an_import_into_another_project_creates_its_own_rows_and_leaves_the_first(owner, outsider):
    remember(owner)
    document = room_export(owner)
    # the memories move: the owner forgets the room's memories, the outsider takes them
    owner.client.delete("/api/v1/memories/?room=r1")
    owners = snapshot(owner.project)

    report = import_(outsider, document)
    assert report["memories"]["created"] == 6
    assert report["users"] == {"created": 2, "existing": 0}
    assert snapshot(owner.project) == owners
    room = Room.objects.get(project=outsider.project, external_id="r1")
    assert room.agent.project == outsider.project
    assert set(Memory.objects.filter(room=room).values_list("project", flat=True)) == {
        outsider.project.pk
    }
    assert without_time(room_export(outsider)) == without_time(document)


def test_an_export_imports_into_another_project_with_the_same_ids(owner, outsider):
    """Memory ids are scoped to the project: the outsider's import keeps every id of the
    owner's export, each project then reads, changes and deletes its own copy."""
    ids = remember(owner)
    document = user_export(owner)
    owners = snapshot(owner.project)

    report = import_(outsider, document)
    assert report["memories"] == {"created": 9, "skipped": 0}
    assert snapshot(owner.project) == owners
    copy = user_export(outsider)
    assert [m["id"] for m in copy["memories"]] == [m["id"] for m in document["memories"]]
    assert without_time(copy)["memories"] == without_time(document)["memories"]
    # the pks differ (the owner's are taken); the public ids are the same
    theirs = Memory.objects.filter(project=outsider.project, public_id__in=ids)
    assert theirs.count() == len(document["memories"])
    assert not set(theirs.values_list("pk", flat=True)) & set(
        Memory.objects.filter(project=owner.project).values_list("pk", flat=True)
    )
    again = import_(outsider, document, status=200)
    assert again["memories"] == {"created": 0, "skipped": 9}

    memory_id = ids[0]
    outsider.client.patch(f"/api/v1/memories/{memory_id}/", {"content": "outsider's text"})
    assert owner.client.get(f"/api/v1/memories/{memory_id}/").json()["content"] == (
        "I moved to Lisbon last spring"
    )
    assert outsider.client.delete(f"/api/v1/memories/{memory_id}/").status_code == 204
    assert owner.client.get(f"/api/v1/memories/{memory_id}/").status_code == 200
    assert snapshot(owner.project) == owners


def test_a_read_only_key_can_export_but_not_import(owner):
    remember(owner)
    response = owner.read_client.get("/api/v1/users/alice/export/")
    assert response.status_code == 200
    owner.client.delete("/api/v1/users/alice/")
    assert owner.read_client.post(IMPORT, response.json()).status_code == 403
    assert not EndUser.objects.filter(external_id="alice").exists()


def test_without_a_key_nothing_is_exported(owner, anonymous):
    remember(owner)
    assert anonymous.get("/api/v1/users/alice/export/").status_code == 401
    assert anonymous.post(IMPORT, {}).status_code == 401


def test_an_invalid_query_parameter_is_a_400(owner):
    remember(owner)
    response = owner.client.get("/api/v1/users/alice/export/", {"vectors": "maybe"})
    assert response.status_code == 400
    assert "vectors" in response.json()
