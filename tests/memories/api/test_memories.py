"""Memories: create (single, batch, unique, client ids, Idempotency-Key), read, list,
count, update, delete, bulk delete, revisions; bad input writes nothing; tenants."""

import base64
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from memories.models import (
    Embedding,
    EmbeddingSpace,
    EndUser,
    Memory,
    MemoryRevision,
    Room,
    content_hash,
)

MEMORIES = "/api/v1/memories/"
BATCH = "/api/v1/memories/batch/"


def create(tenant, **body):
    response = tenant.client.post(MEMORIES, body)
    assert response.status_code in (200, 201), response.json()
    return response.json()["memory"]


def batch(tenant, items, **extra):
    return tenant.client.post(BATCH, {"memories": items}, **extra)


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


# --- read --------------------------------------------------------------------------------


def test_get_by_id(owner):
    memory = create(owner, user="alice", content="hello")
    response = owner.client.get(f"{MEMORIES}{memory['id']}/")
    assert response.status_code == 200
    assert response.json()["content"] == "hello"
    assert response.json()["user"] == "alice"
    assert owner.client.get(f"{MEMORIES}{uuid.uuid4()}/").status_code == 404


@pytest.fixture
def spread(owner):
    """Memories of two users, two rooms and two kinds, one per day of January 2024."""
    day = datetime(2024, 1, 1, tzinfo=UTC)
    items = []
    for n in range(8):
        items.append(
            {
                "user": "alice" if n % 2 == 0 else "bob",
                "room": "r1" if n < 4 else "r2",
                "kind": "fact" if n % 4 == 0 else "message",
                "content": f"memory {n}",
                "created_at": (day + timedelta(days=n)).isoformat(),
            }
        )
    assert batch(owner, items).status_code == 201
    return items


def contents(response):
    assert response.status_code == 200, response.json()
    return [m["content"] for m in response.json()["results"]]


def test_list_filters_by_user_room_and_kind(owner, spread):
    response = owner.client.get(MEMORIES, {"user": "alice"})
    assert response.json()["count"] == 4
    assert contents(response) == ["memory 6", "memory 4", "memory 2", "memory 0"]  # newest first
    assert contents(owner.client.get(MEMORIES, {"room": "r2", "user": "bob"})) == [
        "memory 7",
        "memory 5",
    ]
    assert contents(owner.client.get(MEMORIES, {"kind": "fact"})) == ["memory 4", "memory 0"]
    assert owner.client.get(MEMORIES, {"kind": "fact,message"}).json()["count"] == 8
    assert owner.client.get(MEMORIES, {"user": "nobody"}).json()["count"] == 0


def test_list_filters_by_time(owner, spread):
    response = owner.client.get(
        MEMORIES, {"start": "2024-01-03T00:00:00Z", "end": "2024-01-05T00:00:00Z", "order": "asc"}
    )
    assert contents(response) == ["memory 2", "memory 3"]  # start inclusive, end exclusive
    assert response.json()["count"] == 2


def test_list_hides_archived_unless_asked(owner, spread):
    memory = Memory.objects.get(content="memory 0")
    owner.client.patch(f"{MEMORIES}{memory.pk}/", {"status": "archived"})
    assert "memory 0" not in contents(owner.client.get(MEMORIES))
    assert contents(owner.client.get(MEMORIES, {"status": "archived"})) == ["memory 0"]


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_cursor_pagination_has_no_duplicates_and_no_gaps(owner, order):
    # many memories share a timestamp: the cursor must break ties by id
    base = datetime(2024, 1, 1, tzinfo=UTC)
    items = [
        {
            "user": "alice",
            "content": f"m{n}",
            "created_at": (base + timedelta(minutes=n // 5)).isoformat(),
        }
        for n in range(23)
    ]
    assert batch(owner, items).status_code == 201
    batch(owner, [{"user": "bob", "content": "not alice's"}])

    seen, cursor, pages = [], None, 0
    while True:
        params = {"user": "alice", "limit": 4, "order": order}
        if cursor:
            params["cursor"] = cursor
        page = owner.client.get(MEMORIES, params).json()
        assert page["count"] == 23
        seen += [(m["created_at"], m["id"]) for m in page["results"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 6
    assert len(seen) == len(set(seen)) == 23
    ids = [memory_id for _, memory_id in seen]
    expected = Memory.objects.filter(end_user__external_id="alice").order_by(
        *(("created_at", "pk") if order == "asc" else ("-created_at", "-pk"))
    )
    assert ids == [str(m.pk) for m in expected]


def test_count(owner, outsider, spread):
    count = f"{MEMORIES}count/"
    assert owner.client.get(count).json() == {"count": 8}
    assert owner.client.get(count, {"user": "alice", "kind": "fact"}).json() == {"count": 2}
    assert owner.client.get(count, {"room": "r1", "start": "2024-01-02T00:00:00Z"}).json() == {
        "count": 3
    }
    assert outsider.client.get(count).json() == {"count": 0}


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
    assert revisions[0]["before"]["content"] == "hello again"
    assert revisions[0]["after"] is None
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
    assert response.json() == {"deleted": 2}
    assert sorted(Memory.objects.values_list("content", flat=True)) == ["f1", "m3"]
    deleted = MemoryRevision.objects.filter(action="delete")
    assert {str(r.memory_id) for r in deleted} == set(ids[:2])
    assert {r.before["content"] for r in deleted} == {"m1", "m2"}
    assert owner.client.delete(f"{MEMORIES}?room=nowhere").json() == {"deleted": 0}


def test_bulk_delete_honours_the_time_filter(owner):
    items = [
        {"room": "r1", "content": "old", "created_at": "2023-06-01T00:00:00Z"},
        {"room": "r1", "content": "new", "created_at": "2024-06-01T00:00:00Z"},
    ]
    batch(owner, items)
    response = owner.client.delete(f"{MEMORIES}?room=r1&end=2024-01-01T00:00:00Z")
    assert response.json() == {"deleted": 1}
    assert list(Memory.objects.values_list("content", flat=True)) == ["new"]
    assert MemoryRevision.objects.get(action="delete").before["content"] == "old"


def test_bulk_delete_honours_the_status_filter(owner):
    ids = [
        r["memory"]["id"]
        for r in batch(owner, [{"room": "r1", "content": c} for c in "ab"]).json()["results"]
    ]
    owner.client.patch(f"{MEMORIES}{ids[0]}/", {"status": "archived"})
    response = owner.client.delete(f"{MEMORIES}?room=r1&status=archived")
    assert response.json() == {"deleted": 1}
    assert [str(pk) for pk in Memory.objects.values_list("pk", flat=True)] == [ids[1]]


@pytest.mark.parametrize("query", ["", "?start=2020-01-01T00:00:00Z", "?status=active"])
def test_bulk_delete_without_a_scope_is_refused(owner, query):
    create(owner, room="r1", content="keep me")
    response = owner.client.delete(f"{MEMORIES}{query}")
    assert response.status_code == 400
    assert "room" in response.json()
    assert Memory.objects.count() == 1


# --- bad input writes nothing ------------------------------------------------------------


@pytest.mark.parametrize(
    "body, field",
    [
        ({"user": "alice"}, "content"),
        ({"user": "alice", "content": ""}, "content"),
        ({"user": "alice", "content": " \n\t "}, "content"),
        ({"user": "alice", "content": "a\x00b"}, "content"),
        ({"user": "alice", "content": "hi", "kind": "dream"}, "kind"),
        ({"user": "alice", "content": "hi", "role": "narrator"}, "role"),
        ({"user": "alice", "content": "hi", "metadata": ["a"]}, "metadata"),
        ({"user": "alice", "content": "hi", "metadata": "a"}, "metadata"),
        ({"user": "alice", "content": "hi", "metadata": {"x": "y" * 20_000}}, "metadata"),
        ({"user": "alice", "content": "hi", "content_json": [1]}, "content_json"),
        # PostgreSQL cannot store a NUL in jsonb: refused up front, not a 500 at the INSERT
        ({"user": "alice", "content": "hi", "metadata": {"a": "x\u0000y"}}, "metadata"),
        ({"user": "alice", "content": "hi", "metadata": {"a\u0000": 1}}, "metadata"),
        ({"user": "alice", "content": "hi", "content_json": {"a": ["\u0000"]}}, "content_json"),
        ({"user": "alice", "content": "hi", "importance": 1.5}, "importance"),
        ({"user": "alice", "content": "hi", "id": "not-a-uuid"}, "id"),
        ({"user": "alice", "content": "hi", "created_at": "yesterday"}, "created_at"),
        ({"user": "", "content": "hi"}, "user"),
        # a user or room with a '/' could not be fetched or deleted under /users/<id>/
        ({"user": "discord/42", "content": "hi"}, "user"),
        ({"room": "guild/1", "content": "hi"}, "room"),
    ],
)
def test_bad_input_is_400_naming_the_field_and_writes_nothing(owner, body, field):
    response = owner.client.post(MEMORIES, body)
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert Memory.objects.count() == 0
    assert EndUser.objects.count() == 0
    assert MemoryRevision.objects.count() == 0


def test_content_over_the_cap_is_400(owner, settings):
    settings.MEMORYHUB = {**settings.MEMORYHUB, "MAX_CONTENT_CHARS": 10}
    assert owner.client.post(MEMORIES, {"content": "x" * 10}).status_code == 201
    response = owner.client.post(MEMORIES, {"content": "x" * 11})
    assert response.status_code == 400
    assert "10 characters" in response.json()["content"][0]
    assert Memory.objects.count() == 1


def test_a_batch_with_one_bad_item_writes_nothing_and_names_the_item(owner):
    items = [{"user": "alice", "content": "fine"}, {"user": "alice", "content": "fine too"}]
    items.append({"user": "alice", "content": "  "})
    response = batch(owner, items)
    assert response.status_code == 400
    assert response.json()["memories"] == {"2": {"content": ["This field may not be blank."]}}
    assert Memory.objects.count() == 0
    assert EndUser.objects.count() == 0


def test_batch_too_large_or_empty_is_400(owner, settings):
    settings.MEMORYHUB = {**settings.MEMORYHUB, "MAX_BATCH_SIZE": 3}
    response = batch(owner, [{"content": f"m{n}"} for n in range(4)])
    assert response.status_code == 400
    assert "3" in str(response.json()["memories"])
    assert batch(owner, []).status_code == 400
    assert owner.client.post(BATCH, {}).status_code == 400
    assert batch(owner, [{"content": f"m{n}"} for n in range(3)]).status_code == 201
    assert Memory.objects.count() == 3


@pytest.mark.parametrize(
    "method, suffix", [("get", ""), ("patch", ""), ("delete", ""), ("get", "revisions/")]
)
def test_malformed_id_in_path_is_400(owner, method, suffix):
    response = getattr(owner.client, method)(f"{MEMORIES}not-a-uuid/{suffix}", {"content": "x"})
    assert response.status_code == 400
    assert "id" in response.json()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "!!!",
        "garbage",
        _b64(b"{}"),
        _b64(b"42"),
        _b64(b'["not a date", "also not a uuid"]'),
        _b64(b'["2024-01-01T00:00:00+00:00", "not-a-uuid"]'),
        _b64(b"\xff\xfe"),
    ],
)
def test_invalid_cursor_is_400(owner, cursor):
    response = owner.client.get(MEMORIES, {"cursor": cursor})
    assert response.status_code == 400
    assert "cursor" in response.json()


@pytest.mark.parametrize(
    "params, field",
    [
        ({"kind": "dream"}, "kind"),
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"order": "sideways"}, "order"),
        ({"start": "soon"}, "start"),
        ({"start": "2024-02-01T00:00:00Z", "end": "2024-01-01T00:00:00Z"}, "end"),
    ],
)
def test_bad_list_parameters_are_400(owner, params, field):
    response = owner.client.get(MEMORIES, params)
    assert response.status_code == 400
    assert field in response.json()


# --- across tenants ----------------------------------------------------------------------


class TestAcrossTenants:
    @pytest.fixture
    def secret(self, owner):
        return create(owner, user="alice", room="r1", kind="fact", content="the secret")

    def test_outsider_gets_404(self, owner, outsider, secret):
        path = f"{MEMORIES}{secret['id']}/"
        assert outsider.client.get(path).status_code == 404
        assert outsider.client.patch(path, {"content": "hacked"}).status_code == 404
        assert outsider.client.delete(path).status_code == 404
        assert outsider.client.get(f"{path}revisions/").status_code == 404
        assert Memory.objects.get(pk=secret["id"]).content == "the secret"
        assert MemoryRevision.objects.filter(memory_id=secret["id"]).count() == 1

    def test_outsider_sees_none_in_lists_and_counts(self, outsider, secret):
        for params in [{}, {"user": "alice"}, {"room": "r1"}, {"kind": "fact"}]:
            listed = outsider.client.get(MEMORIES, params).json()
            assert (listed["count"], listed["results"]) == (0, [])
            assert outsider.client.get(f"{MEMORIES}count/", params).json() == {"count": 0}

    def test_outsider_bulk_delete_deletes_nothing(self, outsider, secret):
        for query in ["room=r1", "user=alice", "kind=fact", "room=r1&user=alice&kind=fact"]:
            response = outsider.client.delete(f"{MEMORIES}?{query}")
            assert response.json() == {"deleted": 0}
        assert Memory.objects.filter(pk=secret["id"]).exists()
        assert not MemoryRevision.objects.filter(action="delete").exists()

    def test_outsider_with_the_same_external_ids_gets_its_own_rows(self, owner, outsider, secret):
        theirs = create(outsider, user="alice", room="r1", kind="fact", content="theirs")
        assert outsider.client.get(MEMORIES, {"user": "alice"}).json()["count"] == 1
        assert owner.client.get(MEMORIES, {"user": "alice"}).json()["count"] == 1
        assert outsider.client.delete(f"{MEMORIES}?room=r1").json() == {"deleted": 1}
        assert Memory.objects.filter(pk=secret["id"]).exists()
        assert not Memory.objects.filter(pk=theirs["id"]).exists()


# --- concurrent writers ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("conflict", ["unique", "id"])
def test_a_concurrent_identical_write_returns_the_stored_memory(owner, conflict):
    """A writer that inserts while another's identical insert is uncommitted waits for it,
    then returns that memory instead of failing or storing a second copy."""
    import threading

    from django.db import connection, transaction

    from memories.services.memories import MemoryInput, memory_create_batch
    from memories.services.revisions import Actor
    from tests.conftest import wait_until

    memory_id = uuid.uuid4()
    body = {"user": "alice", "content": "Likes tea", "unique": True}
    if conflict == "id":
        body = {"id": str(memory_id), "content": "Likes tea"}
    responses = []

    def second_writer():
        try:
            responses.append(owner.client.post(MEMORIES, body))
        finally:
            connection.close()

    with transaction.atomic():
        item = MemoryInput(**{**body, "id": memory_id})
        [(first, created)] = memory_create_batch(
            project=owner.project, items=[item], actor=Actor.system("test")
        )
        assert created
        thread = threading.Thread(target=second_writer)
        thread.start()

        def second_writer_waits():
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                return cursor.fetchone()[0] > 0

        wait_until(second_writer_waits)
    thread.join(timeout=30)
    [response] = responses
    assert response.status_code == 200, response.json()
    assert response.json()["created"] is False
    assert response.json()["memory"]["id"] == str(first.pk)
    assert Memory.objects.count() == 1
    assert MemoryRevision.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_retry_while_the_first_request_still_runs_writes_once(owner, monkeypatch):
    """A client that times out and retries with the same Idempotency-Key while its first
    request is still being processed must not store the memory twice."""
    import threading

    from django.db import connection

    from memories.api import memories as views
    from tests.conftest import wait_until

    first_is_writing, finish_first = threading.Event(), threading.Event()
    write = views.memory_create_batch

    def slow_first_write(**kwargs):
        if not first_is_writing.is_set():
            first_is_writing.set()
            finish_first.wait(timeout=30)
        return write(**kwargs)

    monkeypatch.setattr(views, "memory_create_batch", slow_first_write)
    responses = {}

    def post(name):
        try:
            responses[name] = owner.client.post(
                MEMORIES, {"content": "hello"}, HTTP_IDEMPOTENCY_KEY="retry-while-running"
            )
        finally:
            connection.close()

    first = threading.Thread(target=post, args=["first"])
    first.start()
    try:
        assert first_is_writing.wait(timeout=30)
        retry = threading.Thread(target=post, args=["retry"])
        retry.start()

        def retry_waits_or_is_done():
            if not retry.is_alive():
                return True
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                return cursor.fetchone()[0] > 0

        wait_until(retry_waits_or_is_done)
    finally:
        finish_first.set()
        first.join(timeout=30)
    retry.join(timeout=30)
    assert Memory.objects.count() == 1
    assert responses["retry"].json() == responses["first"].json()
    assert responses["retry"].status_code == 201
