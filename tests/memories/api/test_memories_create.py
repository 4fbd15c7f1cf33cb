"""Memories: create (single, batch, unique, client ids, Idempotency-Key), each recorded."""

import uuid

from memories.models import (
    EndUser,
    Memory,
    MemoryRevision,
    Room,
)
from tests.memories.api.memory_calls import MEMORIES, batch, create

# --- create ------------------------------------------------------------------------------


def test_create_stores_a_pending_memory_and_a_create_revision(owner):
    response = owner.client.post(
        MEMORIES,
        {
            "user": "alice",
            "room": "r1",
            "agent": "helper",
            "kind": "fact",
            "role": "user",
            "content": "Alice is allergic to peanuts",
            "content_json": {"source": "chat"},
            "metadata": {"topic": "health"},
            "importance": 0.9,
        },
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["created"] is True
    memory = body["memory"]
    assert memory["embedding_status"] == "pending"
    assert (memory["user"], memory["room"], memory["agent"]) == ("alice", "r1", "helper")
    assert (memory["kind"], memory["role"], memory["importance"]) == ("fact", "user", 0.9)

    stored = Memory.objects.get(pk=memory["id"])
    assert stored.project == owner.project
    assert stored.embedding_status == Memory.EmbeddingStatus.PENDING
    assert stored.metadata == {"topic": "health"}
    [revision] = MemoryRevision.objects.filter(memory_id=stored.pk)
    assert revision.action == "create"
    assert (revision.actor_type, revision.actor) == ("api_key", owner.key.prefix)
    assert revision.before is None
    assert revision.after["content"] == "Alice is allergic to peanuts"


def test_created_at_can_be_given(owner):
    memory = create(owner, content="old news", created_at="2020-05-01T12:00:00Z")
    assert memory["created_at"].startswith("2020-05-01T12:00:00")


def test_batch_create(owner):
    items = [{"user": "alice", "room": "r1", "content": f"turn {i}"} for i in range(5)]
    response = batch(owner, items)
    assert response.status_code == 201, response.json()
    results = response.json()["results"]
    assert [r["memory"]["content"] for r in results] == [f"turn {i}" for i in range(5)]
    assert all(r["created"] for r in results)
    assert Memory.objects.filter(project=owner.project).count() == 5
    assert MemoryRevision.objects.filter(action="create").count() == 5
    assert EndUser.objects.filter(project=owner.project).count() == 1
    assert Room.objects.filter(project=owner.project).count() == 1


class TestUnique:
    def test_second_identical_unique_write_returns_the_first(self, owner):
        first = owner.client.post(
            MEMORIES, {"user": "alice", "content": "Likes tea", "kind": "fact", "unique": True}
        )
        assert first.status_code == 201
        # whitespace differences are the same text
        second = owner.client.post(
            MEMORIES, {"user": "alice", "content": "Likes  tea ", "kind": "fact", "unique": True}
        )
        assert second.status_code == 200
        assert second.json()["created"] is False
        assert second.json()["memory"]["id"] == first.json()["memory"]["id"]
        assert Memory.objects.count() == 1
        assert MemoryRevision.objects.count() == 1

    def test_unique_is_per_user_kind_and_project(self, owner, outsider):
        body = {"user": "alice", "content": "Likes tea", "kind": "fact", "unique": True}
        create(owner, **body)
        assert owner.client.post(MEMORIES, {**body, "user": "bob"}).status_code == 201
        assert owner.client.post(MEMORIES, {**body, "kind": "goal"}).status_code == 201
        assert outsider.client.post(MEMORIES, body).status_code == 201
        assert Memory.objects.count() == 4

    def test_in_a_batch_including_duplicates_inside_it(self, owner):
        existing = create(owner, user="alice", content="Likes tea", unique=True)
        items = [
            {"user": "alice", "content": "Likes tea", "unique": True},
            {"user": "alice", "content": "Plays chess", "unique": True},
            {"user": "alice", "content": "Plays chess", "unique": True},
            {"user": "alice", "content": "Plays chess"},  # not unique: stored again
        ]
        response = batch(owner, items)
        assert response.status_code == 201, response.json()
        results = response.json()["results"]
        assert [r["created"] for r in results] == [False, True, False, True]
        assert results[0]["memory"]["id"] == existing["id"]
        assert results[1]["memory"]["id"] == results[2]["memory"]["id"]
        assert results[3]["memory"]["id"] != results[1]["memory"]["id"]
        assert Memory.objects.count() == 3


class TestClientIds:
    def test_retry_with_the_same_id_returns_the_stored_memory(self, owner):
        memory_id = str(uuid.uuid4())
        first = owner.client.post(MEMORIES, {"id": memory_id, "content": "hello"})
        assert first.status_code == 201
        assert first.json()["memory"]["id"] == memory_id
        retry = owner.client.post(MEMORIES, {"id": memory_id, "content": "hello"})
        assert retry.status_code == 200
        assert retry.json()["created"] is False
        assert retry.json()["memory"]["id"] == memory_id
        assert Memory.objects.count() == 1
        assert MemoryRevision.objects.count() == 1

    def test_retry_in_a_batch(self, owner):
        ids = [str(uuid.uuid4()) for _ in range(3)]
        items = [{"id": i, "content": f"item {n}"} for n, i in enumerate(ids)]
        assert batch(owner, items[:2]).status_code == 201
        results = batch(owner, items).json()["results"]
        assert [r["created"] for r in results] == [False, False, True]
        assert [r["memory"]["id"] for r in results] == ids
        assert Memory.objects.count() == 3

    def test_same_id_with_different_content_is_409(self, owner):
        memory_id = str(uuid.uuid4())
        create(owner, id=memory_id, content="hello")
        response = owner.client.post(MEMORIES, {"id": memory_id, "content": "goodbye"})
        assert response.status_code == 409
        assert "id" in response.json()
        assert Memory.objects.get(pk=memory_id).content == "hello"

    def test_id_of_another_project_is_free_to_use(self, owner, outsider):
        memory_id = str(uuid.uuid4())
        create(owner, id=memory_id, content="hello")
        response = batch(
            outsider,
            [{"user": "eve", "content": "first"}, {"id": memory_id, "user": "eve", "content": "x"}],
        )
        assert response.status_code == 201, response.json()
        assert response.json()["results"][1]["memory"]["id"] == memory_id
        assert Memory.objects.get(public_id=memory_id, project=outsider.project).content == "x"
        assert Memory.objects.get(pk=memory_id).project == owner.project

    def test_a_conflict_in_a_batch_writes_nothing(self, owner):
        memory_id = str(uuid.uuid4())
        create(owner, id=memory_id, content="hello")
        response = batch(
            owner,
            [{"user": "eve", "content": "first"}, {"id": memory_id, "user": "eve", "content": "x"}],
        )
        assert response.status_code == 409
        assert "id" in response.json()
        assert list(Memory.objects.values_list("content", flat=True)) == ["hello"]
        assert not EndUser.objects.filter(external_id="eve").exists()


class TestIdempotencyKey:
    def test_same_key_and_body_replays_the_first_response(self, owner):
        headers = {"HTTP_IDEMPOTENCY_KEY": "retry-1"}
        first = owner.client.post(MEMORIES, {"content": "hello"}, **headers)
        second = owner.client.post(MEMORIES, {"content": "hello"}, **headers)
        assert first.status_code == second.status_code == 201
        assert second.json() == first.json()
        assert second.headers["Idempotent-Replayed"] == "true"
        assert Memory.objects.count() == 1

    def test_batch_replay(self, owner):
        headers = {"HTTP_IDEMPOTENCY_KEY": "batch-1"}
        items = [{"content": "one"}, {"content": "two"}]
        first = batch(owner, items, **headers).json()
        assert batch(owner, items, **headers).json() == first
        assert Memory.objects.count() == 2

    def test_same_key_with_another_body_is_422(self, owner):
        headers = {"HTTP_IDEMPOTENCY_KEY": "retry-1"}
        assert owner.client.post(MEMORIES, {"content": "hello"}, **headers).status_code == 201
        response = owner.client.post(MEMORIES, {"content": "something else"}, **headers)
        assert response.status_code == 422
        assert Memory.objects.count() == 1

    def test_keys_are_per_project(self, owner, outsider):
        headers = {"HTTP_IDEMPOTENCY_KEY": "shared-key"}
        mine = owner.client.post(MEMORIES, {"content": "hello"}, **headers).json()
        theirs = outsider.client.post(MEMORIES, {"content": "hello"}, **headers)
        assert theirs.status_code == 201
        assert theirs.json()["memory"]["id"] != mine["memory"]["id"]
        assert Memory.objects.filter(project=outsider.project).count() == 1

    def test_a_rejected_request_can_be_retried_with_the_same_key(self, owner):
        headers = {"HTTP_IDEMPOTENCY_KEY": "retry-2"}
        assert owner.client.post(MEMORIES, {"content": ""}, **headers).status_code == 400
        assert owner.client.post(MEMORIES, {"content": "fixed"}, **headers).status_code == 201
