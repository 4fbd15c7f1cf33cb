"""A room's working memory: POST/GET/DELETE /api/v1/rooms/{room}/working/,
DELETE .../working/{item_id}/ and POST .../working/search/."""

from __future__ import annotations

import time
import uuid

import pytest
from django.test import Client

from memories.models import Memory, MemoryRevision, Room
from memories.services import embedding_spaces, working_store
from tests.memories.api.test_openapi import _check
from tests.memories.conftest import CountingProvider

WORKING = "/api/v1/rooms/r1/working/"
SEARCH = "/api/v1/rooms/r1/working/search/"


@pytest.fixture(autouse=True)
def clean_working_memory(redis_client):
    for key in redis_client.scan_iter(match=f"{working_store.KEY_PREFIX}:*"):
        redis_client.delete(key)


@pytest.fixture
def counting(monkeypatch):
    provider = CountingProvider(model="working-api-test", dimension=32)
    monkeypatch.setattr(embedding_spaces, "get_provider", lambda: provider)
    return provider


def add(tenant, content, room="r1", **fields):
    response = tenant.client.post(f"/api/v1/rooms/{room}/working/", {"content": content, **fields})
    assert response.status_code == 201, response.json()
    return response.json()


def listed(tenant, room="r1"):
    response = tenant.read_client.get(f"/api/v1/rooms/{room}/working/")
    assert response.status_code == 200, response.json()
    return response.json()


def test_an_item_is_stored_and_listed_and_the_room_created_if_new(owner):
    item = add(owner, "tool output: 42", metadata={"tool": "calc"}, ttl_seconds=120)
    assert set(item) == {"id", "content", "metadata", "created_at", "expires_at"}
    assert (item["content"], item["metadata"]) == ("tool output: 42", {"tool": "calc"})
    assert owner.client.get("/api/v1/rooms/r1/").status_code == 200  # created by the write
    add(owner, "second")
    body = listed(owner)
    assert [i["content"] for i in body["results"]] == ["tool output: 42", "second"]
    assert body["results"][0] == item
    assert (body["room"], body["count"], body["ttl_seconds"]) == ("r1", 2, 3600)
    assert body["max_bytes"] == 10 * 1024 * 1024 and body["bytes"] > 0


def test_the_default_ttl_is_an_hour(owner):
    item = add(owner, "note")
    created, expires = (
        time.mktime(time.strptime(item[k][:19], "%Y-%m-%dT%H:%M:%S"))
        for k in ("created_at", "expires_at")
    )
    assert expires - created == 3600


def test_an_item_is_gone_after_its_ttl(owner):
    add(owner, "lasting")
    add(owner, "fleeting", ttl_seconds=1)
    time.sleep(1.2)
    assert [i["content"] for i in listed(owner)["results"]] == ["lasting"]


def test_the_rooms_cap_drops_the_oldest_items_first(owner):
    add(owner, "first")
    response = owner.client.patch(
        "/api/v1/rooms/r1/", {"settings": {"working": {"max_memory_mb": 0.01}}}
    )
    assert response.status_code == 200, response.json()
    for i in range(4):
        add(owner, f"{i}" * 3000)
    body = listed(owner)
    assert [i["content"][0] for i in body["results"]] == ["2", "3"]  # the newest kept
    assert body["bytes"] <= body["max_bytes"] == int(0.01 * 1024 * 1024)


def test_an_item_larger_than_the_rooms_cap_is_a_400_naming_content(owner):
    owner.client.post("/api/v1/rooms/", {"external_id": "r1"})
    owner.client.patch("/api/v1/rooms/r1/", {"settings": {"working": {"max_memory_mb": 0.01}}})
    response = owner.client.post(WORKING, {"content": "x" * 11_000})
    assert response.status_code == 400
    assert "max_memory_mb" in response.json()["content"][0]


def test_nothing_is_written_to_postgresql(owner, counting):
    add(owner, "warm up the room")  # creating the room is the one write
    before = (Memory.objects.count(), MemoryRevision.objects.count(), Room.objects.count())
    for i in range(3):
        add(owner, f"note {i}", metadata={"i": i})
    assert owner.read_client.post(SEARCH, {"query": "note"}).status_code == 200
    owner.client.delete(f"{WORKING}{listed(owner)['results'][0]['id']}/")
    owner.client.delete(WORKING)
    after = (Memory.objects.count(), MemoryRevision.objects.count(), Room.objects.count())
    assert after == before


def test_delete_one_item_then_it_is_a_404(owner):
    item = add(owner, "to delete")
    add(owner, "to keep")
    assert owner.client.delete(f"{WORKING}{item['id']}/").status_code == 204
    assert owner.client.delete(f"{WORKING}{item['id']}/").status_code == 404
    assert owner.client.delete(f"{WORKING}{uuid.uuid4()}/").status_code == 404
    response = owner.client.delete(f"{WORKING}not-a-uuid/")
    assert response.status_code == 400 and "item_id" in response.json()
    assert [i["content"] for i in listed(owner)["results"]] == ["to keep"]


def test_clear_returns_the_count(owner):
    for i in range(3):
        add(owner, f"note {i}")
    assert owner.client.delete(WORKING).json() == {"deleted": 3}
    assert listed(owner)["results"] == []
    assert owner.client.delete(WORKING).json() == {"deleted": 0}


def test_search_finds_by_meaning_with_the_real_model(owner):
    add(owner, "The user's flight to Lisbon departs at 7:40 from gate B12.")
    add(owner, "Quarterly revenue grew 12 percent, driven by the cloud segment.")
    add(owner, "Her cat, Miso, is afraid of the vacuum cleaner.")
    add(owner, "Tomato soup recipe: roast the tomatoes with garlic first.")
    response = owner.read_client.post(SEARCH, {"query": "when does the plane leave?", "limit": 2})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["method"], body["reason"], body["searched"], body["embedded"]) == (
        "semantic",
        None,
        4,
        4,
    )
    assert "Lisbon" in body["results"][0]["item"]["content"]
    assert len(body["results"]) == 2
    assert body["results"][0]["score"] > body["results"][1]["score"]
    pet = owner.read_client.post(SEARCH, {"query": "pet scared of noise"}).json()
    assert "Miso" in pet["results"][0]["item"]["content"] and pet["embedded"] == 0


def test_filter_metadata_never_leaks_other_items(owner, counting):
    add(owner, "secret plan of user b", metadata={"user": "b"})
    add(owner, "secret plan of user b, again", metadata={"user": "b"})
    add(owner, "shopping list", metadata={"user": "a"})
    body = owner.read_client.post(
        SEARCH, {"query": "secret plan", "filter_metadata": {"user": "a"}}
    ).json()
    assert [r["item"]["metadata"] for r in body["results"]] == [{"user": "a"}]
    assert body["searched"] == 1


def test_without_the_model_search_says_recency(owner, monkeypatch):
    def broken():
        raise RuntimeError("model files missing")

    monkeypatch.setattr(embedding_spaces, "get_provider", broken)
    add(owner, "older")
    add(owner, "newer")
    body = owner.read_client.post(SEARCH, {"query": "anything"}).json()
    assert body["method"] == "recency" and "model files missing" in body["reason"]
    assert [(r["item"]["content"], r["score"]) for r in body["results"]] == [
        ("newer", None),
        ("older", None),
    ]


def test_another_projects_room_is_a_404_on_every_endpoint(owner, outsider, counting):
    item = add(owner, "owner's note", metadata={"k": "v"})
    for client in (outsider.client, outsider.read_client):
        assert client.get(WORKING).status_code == 404
        assert client.post(SEARCH, {"query": "note"}).status_code == 404
    assert outsider.client.delete(WORKING).status_code == 404
    assert outsider.client.delete(f"{WORKING}{item['id']}/").status_code == 404
    # a write names a room of the caller's project: a new room, nothing of the owner's touched
    assert outsider.client.post(WORKING, {"content": "outsider's note"}).status_code == 201
    theirs = outsider.client.get(WORKING).json()
    assert [i["content"] for i in theirs["results"]] == ["outsider's note"]
    assert outsider.client.post(SEARCH, {"query": "owner's note"}).json()["searched"] == 1
    assert outsider.client.delete(f"/api/v1/rooms/r1/working/{item['id']}/").status_code == 404
    assert owner.client.get(WORKING).json()["results"] == [item]


def test_a_read_only_key_reads_and_searches_but_cannot_write(owner, counting):
    item = add(owner, "note")
    read = owner.read_client
    assert read.post(WORKING, {"content": "x"}).status_code == 403
    assert read.post("/api/v1/rooms/new-room/working/", {"content": "x"}).status_code == 403
    assert read.delete(WORKING).status_code == 403
    assert read.delete(f"{WORKING}{item['id']}/").status_code == 403
    assert read.get(WORKING).status_code == 200
    assert read.post(SEARCH, {"query": "note"}).status_code == 200
    assert listed(owner)["results"] == [item]
    assert not Room.objects.filter(external_id="new-room").exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "content"),
        ({"content": ""}, "content"),
        ({"content": "   "}, "content"),
        ({"content": "x" * 32_001}, "content"),
        ({"content": "x", "metadata": [1]}, "metadata"),
        ({"content": "x", "metadata": "tag"}, "metadata"),
        ({"content": "x", "ttl_seconds": 0}, "ttl_seconds"),
        ({"content": "x", "ttl_seconds": 30 * 86400 + 1}, "ttl_seconds"),
        ({"content": "x", "ttl_seconds": "soon"}, "ttl_seconds"),
    ],
)
def test_a_bad_write_is_a_400_naming_the_field_and_stores_nothing(owner, body, field):
    response = owner.client.post(WORKING, body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert not Room.objects.filter(external_id="r1").exists()


def test_the_longest_allowed_content_and_ttl_are_accepted(owner):
    add(owner, "x" * 32_000, ttl_seconds=30 * 86400)


def test_a_room_id_too_long_for_a_room_is_a_400(owner):
    response = owner.client.post(f"/api/v1/rooms/{'r' * 256}/working/", {"content": "x"})
    assert response.status_code == 400 and list(response.json()) == ["room"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "limit": 101}, "limit"),
        ({"query": "x", "filter_metadata": ["a"]}, "filter_metadata"),
    ],
)
def test_a_bad_search_is_a_400_naming_the_field(owner, body, field):
    add(owner, "note")
    response = owner.read_client.post(SEARCH, body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]


def test_redis_unreachable_is_a_json_503_with_retry_after(owner, settings, tmp_path):
    add(owner, "note")
    settings.REDIS_URL = f"unix://{tmp_path}/no-redis-here.sock"
    for response in (
        owner.client.post(WORKING, {"content": "x"}),
        owner.client.get(WORKING),
        owner.client.delete(WORKING),
        owner.client.delete(f"{WORKING}{uuid.uuid4()}/"),
        owner.client.post(SEARCH, {"query": "x"}),
    ):
        assert response.status_code == 503
        assert response["Retry-After"] == "5"
        assert "Redis" in response.json()["detail"]


def test_responses_match_the_document(owner, counting):
    schema = Client().get("/api/schema/", {"format": "json"}).json()
    path = "/api/v1/rooms/{external_id}/working/"
    created = owner.client.post(WORKING, {"content": "note", "metadata": {"a": 1}})
    _check(schema, path, "post", created)
    _check(schema, path, "get", owner.client.get(WORKING))
    _check(schema, f"{path}search/", "post", owner.client.post(SEARCH, {"query": "note"}))
    deleted = owner.client.delete(f"{WORKING}{created.json()['id']}/")
    _check(schema, f"{path}{{item_id}}/", "delete", deleted)
    _check(schema, path, "delete", owner.client.delete(WORKING))
    for method in ("get", "post", "delete"):
        assert "working memory" in schema["paths"][path][method]["tags"]
        assert "Redis restart" in schema["paths"][path][method]["description"]


def test_an_add_retried_with_its_idempotency_key_keeps_one_item(owner):
    headers = {"HTTP_IDEMPOTENCY_KEY": "working-1"}
    first = owner.client.post(WORKING, {"content": "tool output: 42"}, **headers)
    again = owner.client.post(WORKING, {"content": "tool output: 42"}, **headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert listed(owner)["count"] == 1
    other = owner.client.post(WORKING, {"content": "another output"}, **headers)
    assert other.status_code == 422 and listed(owner)["count"] == 1
