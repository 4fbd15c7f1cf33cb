"""Memories: update (re-embedded, before and after recorded), delete, bulk delete."""

import hashlib

import pytest

from memories.models import (
    Embedding,
    EmbeddingSpace,
    Memory,
    MemoryRevision,
    content_hash,
)
from tests.memories.api.memory_calls import MEMORIES, batch, create


def sha(text):
    """What an erased memory's revision keeps of its text."""
    return hashlib.sha256(text.encode()).hexdigest()


# --- update ------------------------------------------------------------------------------


def test_patch_content_reembeds_and_records_before_and_after(owner):
    memory = create(owner, user="alice", content="Lives in Paris")
    stored = Memory.objects.get(pk=memory["id"])
    space = EmbeddingSpace.objects.create(provider="hashing", model="patch-test", dimension=3)
    Embedding.objects.create(memory=stored, space=space, vector=[1, 0, 0])
    Memory.objects.filter(pk=stored.pk).update(embedding_status="done")

    response = owner.client.patch(
        f"{MEMORIES}{memory['id']}/", {"content": "Lives in Berlin", "importance": 0.8}
    )
    assert response.status_code == 200, response.json()
    assert response.json()["content"] == "Lives in Berlin"
    assert response.json()["embedding_status"] == "pending"
    stored.refresh_from_db()
    assert stored.embedding_status == "pending"
    assert stored.content_hash == content_hash("Lives in Berlin")
    assert not Embedding.objects.filter(memory=stored).exists()

    revision = MemoryRevision.objects.get(memory_id=stored.pk, action="update")
    assert revision.actor == owner.key.prefix
    assert revision.before["content"] == "Lives in Paris"
    assert revision.after["content"] == "Lives in Berlin"
    assert (revision.before["importance"], revision.after["importance"]) == (0.5, 0.8)


def test_patch_without_content_keeps_the_embedding(owner):
    memory = create(owner, content="Lives in Paris")
    stored = Memory.objects.get(pk=memory["id"])
    space = EmbeddingSpace.objects.create(provider="hashing", model="patch-test", dimension=3)
    Embedding.objects.create(memory=stored, space=space, vector=[1, 0, 0])
    Memory.objects.filter(pk=stored.pk).update(embedding_status="done")
    response = owner.client.patch(f"{MEMORIES}{memory['id']}/", {"metadata": {"city": "Paris"}})
    assert response.status_code == 200
    assert response.json()["embedding_status"] == "done"
    assert Embedding.objects.filter(memory=stored).exists()


@pytest.mark.parametrize(
    "body, field",
    [
        ({"content": "   "}, "content"),
        ({"metadata": [1]}, "metadata"),
        ({"importance": 2}, "importance"),
        ({"status": "gone"}, "status"),
    ],
)
def test_patch_bad_input_is_400_and_changes_nothing(owner, body, field):
    memory = create(owner, content="hello")
    response = owner.client.patch(f"{MEMORIES}{memory['id']}/", body)
    assert response.status_code == 400
    assert field in response.json()
    assert Memory.objects.get(pk=memory["id"]).content == "hello"
    assert not MemoryRevision.objects.filter(action="update").exists()


def test_patch_with_nothing_to_change_is_400(owner):
    memory = create(owner, content="hello")
    assert owner.client.patch(f"{MEMORIES}{memory['id']}/", {}).status_code == 400


# --- delete ------------------------------------------------------------------------------


def test_delete_keeps_the_history(owner):
    memory = create(owner, content="hello")
    owner.client.patch(f"{MEMORIES}{memory['id']}/", {"content": "hello again"})
    response = owner.client.delete(f"{MEMORIES}{memory['id']}/")
    assert response.status_code == 204
    assert not Memory.objects.filter(pk=memory["id"]).exists()
    assert owner.client.get(f"{MEMORIES}{memory['id']}/").status_code == 404
    assert owner.client.delete(f"{MEMORIES}{memory['id']}/").status_code == 404

    history = owner.client.get(f"{MEMORIES}{memory['id']}/revisions/")
    assert history.status_code == 200
    revisions = history.json()["results"]
    assert [r["action"] for r in revisions] == ["delete", "update", "create"]
    # erased: the text's SHA-256 is kept, not the text (nor that of the earlier ones)
    assert "content" not in revisions[0]["before"]
    assert revisions[0]["before"]["content_sha256"] == hashlib.sha256(b"hello again").hexdigest()
    assert revisions[0]["after"] == {"erased": "delete"}
    assert not any("hello" in str(r["before"]) + str(r["after"]) for r in revisions)
    assert all(r["actor"] == owner.key.prefix for r in revisions)


def test_bulk_delete_by_room_and_kind(owner):
    items = [
        {"room": "r1", "kind": "message", "content": "m1"},
        {"room": "r1", "kind": "message", "content": "m2"},
        {"room": "r1", "kind": "fact", "content": "f1"},
        {"room": "r2", "kind": "message", "content": "m3"},
    ]
    ids = [r["memory"]["id"] for r in batch(owner, items).json()["results"]]
    response = owner.client.delete(f"{MEMORIES}?room=r1&kind=message")
    assert response.status_code == 200
    assert response.json()["deleted"] == 2
    assert sorted(Memory.objects.values_list("content", flat=True)) == ["f1", "m3"]
    deleted = MemoryRevision.objects.filter(action="delete")
    assert {str(r.memory_id) for r in deleted} == set(ids[:2])
    assert {r.before["content_sha256"] for r in deleted} == {sha("m1"), sha("m2")}
    assert owner.client.delete(f"{MEMORIES}?room=nowhere").json()["deleted"] == 0


def test_bulk_delete_honours_the_time_filter(owner):
    items = [
        {"room": "r1", "content": "old", "created_at": "2023-06-01T00:00:00Z"},
        {"room": "r1", "content": "new", "created_at": "2024-06-01T00:00:00Z"},
    ]
    batch(owner, items)
    response = owner.client.delete(f"{MEMORIES}?room=r1&end=2024-01-01T00:00:00Z")
    assert response.json()["deleted"] == 1
    assert list(Memory.objects.values_list("content", flat=True)) == ["new"]
    assert MemoryRevision.objects.get(action="delete").before["content_sha256"] == sha("old")


def test_bulk_delete_honours_the_status_filter(owner):
    ids = [
        r["memory"]["id"]
        for r in batch(owner, [{"room": "r1", "content": c} for c in "ab"]).json()["results"]
    ]
    owner.client.patch(f"{MEMORIES}{ids[0]}/", {"status": "archived"})
    response = owner.client.delete(f"{MEMORIES}?room=r1&status=archived")
    assert response.json()["deleted"] == 1
    assert [str(pk) for pk in Memory.objects.values_list("pk", flat=True)] == [ids[1]]


@pytest.mark.parametrize("query", ["", "?start=2020-01-01T00:00:00Z", "?status=active"])
def test_bulk_delete_without_a_scope_is_refused(owner, query):
    create(owner, room="r1", content="keep me")
    response = owner.client.delete(f"{MEMORIES}{query}")
    assert response.status_code == 400
    assert "room" in response.json()
    assert Memory.objects.count() == 1


@pytest.mark.parametrize("extra", ["agent=a1", "world=w1", "romo=r2"])
def test_bulk_delete_refuses_a_filter_it_does_not_take(owner, extra):
    batch(owner, [{"room": "r1", "content": "m1"}, {"room": "r1", "content": "m2"}])
    response = owner.client.delete(f"{MEMORIES}?room=r1&{extra}")
    assert response.status_code == 400
    assert extra.split("=")[0] in response.json()
    assert Memory.objects.count() == 2
