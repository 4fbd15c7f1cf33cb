"""Memories: bad input gets a 400 naming the field and writes nothing."""

import base64

import pytest

from memories.models import (
    EndUser,
    Memory,
    MemoryRevision,
)
from tests.memories.api.memory_calls import BATCH, MEMORIES, batch

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
