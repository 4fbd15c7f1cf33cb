"""Memories: get, list with filters and cursor pages, count."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from memories.models import (
    Memory,
)
from tests.memories.api.memory_calls import MEMORIES, batch, create

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
