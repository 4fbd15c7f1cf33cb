"""A room's buffer: GET .../buffer/ (the window and the newest summary) and
POST .../buffer/search/ (semantic and recency over the messages in capacity)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import Memory
from memories.services import buffer as buffer_service
from tests.conftest import embed_pending

BUFFER = "/api/v1/rooms/r1/buffer/"
SEARCH = "/api/v1/rooms/r1/buffer/search/"
START = timezone.now() - timedelta(days=1)


def append(tenant, *texts, room="r1", start=0, **fields):
    """Messages written to the room one minute apart, as an agent appends turns."""
    items = [
        {
            "room": room,
            "user": "maria",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": text,
            "created_at": (START + timedelta(minutes=start + i)).isoformat(),
            **fields,
        }
        for i, text in enumerate(texts)
    ]
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": items}, format="json")
    assert response.status_code == 201, response.json()
    return [result["memory"]["id"] for result in response.json()["results"]]


def test_the_window_is_the_last_max_size_active_messages_oldest_first(owner):
    ids = append(owner, *[f"turn {i}" for i in range(15)])
    append(owner, "a turn in another room", room="r2")
    owner.client.post("/api/v1/memories/", {"room": "r1", "kind": "fact", "content": "a fact"})
    Memory.objects.filter(pk=ids[14]).update(status="archived")  # summarized: out of the window
    body = owner.read_client.get(BUFFER).json()
    assert [m["id"] for m in body["messages"]] == ids[4:14]
    assert body["settings"]["max_size"] == 10 and body["settings"]["capacity"] == 100
    assert (body["summary"], body["unsummarized"]) == (None, 14)


def test_the_window_follows_the_rooms_max_size(owner):
    ids = append(owner, *[f"turn {i}" for i in range(6)])
    owner.client.patch("/api/v1/rooms/r1/", {"settings": {"buffer": {"max_size": 3}}})
    assert [m["id"] for m in owner.client.get(BUFFER).json()["messages"]] == ids[3:]


def test_the_newest_summary_comes_with_the_window(owner):
    append(owner, "hello")
    older = Memory.objects.create(
        project=owner.project,
        room_id=Memory.objects.get(content="hello").room_id,
        kind="summary",
        content="older summary",
        content_hash="x",
    )
    Memory.objects.create(
        project=owner.project,
        room_id=older.room_id,
        kind="summary",
        content="newest summary",
        content_hash="y",
    )
    assert owner.client.get(BUFFER).json()["summary"]["content"] == "newest summary"


TURNS = [
    "My dog Rex loves chasing tennis balls in the park.",
    "I am learning to play the violin, scales every morning.",
    "We booked flights to Tokyo for the cherry blossom season.",
    "The quarterly tax return is due at the end of the month.",
    "I baked sourdough bread with a new starter yesterday.",
]


def test_search_ranks_by_meaning_with_a_little_recency(owner):
    append(owner, *TURNS)
    embed_pending()
    response = owner.read_client.post(SEARCH, {"query": "a dog chasing tennis balls"})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["method"], body["unembedded"], body["searched"]) == ("semantic", 0, 5)
    assert body["recency_bias"] == 0.3
    first = body["results"][0]
    assert first["memory"]["content"] == TURNS[0]
    assert first["score"] == pytest.approx(0.7 * first["semantic"] + 0.3 * first["recency"])
    assert first["recency"] == 0.0  # the oldest of the five
    assert [hit["score"] for hit in body["results"]] == sorted(
        (hit["score"] for hit in body["results"]), reverse=True
    )


def test_all_recency_returns_the_newest_first(owner):
    append(owner, *TURNS)
    embed_pending()
    body = owner.client.post(SEARCH, {"query": "pet", "recency_bias": 1, "limit": 3}).json()
    assert [hit["memory"]["content"] for hit in body["results"]] == TURNS[::-1][:3]
    assert [hit["recency"] for hit in body["results"]] == [1.0, 0.75, 0.5]


def test_messages_not_embedded_yet_are_ranked_by_recency_and_counted(owner):
    append(owner, *TURNS)
    body = owner.client.post(SEARCH, {"query": "my dog"}).json()
    assert (body["method"], body["unembedded"]) == ("semantic", 5)
    assert [hit["memory"]["content"] for hit in body["results"]] == TURNS[::-1]
    assert all(hit["semantic"] is None for hit in body["results"])


def test_without_the_model_search_falls_back_to_recency_and_says_why(owner, monkeypatch):
    append(owner, *TURNS)
    embed_pending()

    def broken(query, embedding, project):
        raise RuntimeError("model files missing")

    monkeypatch.setattr(buffer_service, "query_embedding_start", broken)
    body = owner.client.post(SEARCH, {"query": "my dog"}).json()
    assert body["method"] == "recency"
    assert "model files missing" in body["reason"]
    assert body["results"][0]["memory"]["content"] == TURNS[-1]


def test_filter_metadata_keeps_only_matching_messages(owner):
    append(owner, *TURNS[:3], metadata={"channel": "web"})
    append(owner, *TURNS[3:], start=10, metadata={"channel": "sms"})
    embed_pending()
    body = owner.client.post(
        SEARCH,
        {"query": "bread", "filter_metadata": {"channel": "web"}, "limit": 10},
        format="json",
    ).json()
    assert {hit["memory"]["content"] for hit in body["results"]} == set(TURNS[:3])


def test_only_the_capacity_is_searched(owner):
    append(owner, *TURNS)
    small = {"max_size": 2, "buffer_multiplier": 2, "summarize": False}
    response = owner.client.patch(
        "/api/v1/rooms/r1/", {"settings": {"buffer": small}}, format="json"
    )
    assert response.status_code == 200
    body = owner.client.post(SEARCH, {"query": "dog", "limit": 10}).json()
    assert body["searched"] == 4
    assert TURNS[0] not in {hit["memory"]["content"] for hit in body["results"]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x", "recency_bias": 1.5}, "recency_bias"),
        ({"query": "x", "recency_bias": -0.1}, "recency_bias"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "limit": 101}, "limit"),
        ({"query": "x", "filter_metadata": ["a"]}, "filter_metadata"),
    ],
)
def test_bad_input_is_400_naming_the_field(owner, body, field):
    append(owner, "hello")
    response = owner.client.post(SEARCH, body, format="json")
    assert response.status_code == 400
    assert field in response.json(), response.json()


def test_another_projects_room_is_404(owner, outsider):
    append(owner, "hello")
    assert outsider.client.get(BUFFER).status_code == 404
    assert outsider.client.post(SEARCH, {"query": "hello"}).status_code == 404
    assert owner.client.get("/api/v1/rooms/nope/buffer/").status_code == 404
