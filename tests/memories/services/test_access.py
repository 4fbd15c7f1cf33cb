"""Access tracking: reads counted in Redis by search and buffer search (one round trip,
never failing the read), written to access_count / accessed_at by the flush."""

from __future__ import annotations

import socket
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memories.models import Memory, MemoryRevision, content_hash
from memories.providers import redis_client
from memories.services import access
from memories.services import buffer as buffer_service
from memories.services.access import (
    ACCESS_AT_KEY,
    ACCESS_COUNT_KEY,
    TAKEN_KEY,
    accesses_flush,
    accesses_record,
)
from memories.tasks import accesses_flush_task

SEARCH = "/api/v1/search/"
BUFFER_SEARCH = "/api/v1/rooms/r1/buffer/search/"


@pytest.fixture(autouse=True)
def clean_redis(redis_client, monkeypatch):
    """No counts left by other tests; counting not paused by an earlier failure."""
    monkeypatch.setattr(access, "_paused_until", 0.0)
    keys = [ACCESS_COUNT_KEY, ACCESS_AT_KEY, TAKEN_KEY, *redis_client.keys(f"{TAKEN_KEY}:*")]
    redis_client.delete(*keys)


def remember(tenant, *texts, room=None):
    items = [{"user": "alice", "room": room, "content": text} for text in texts]
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": items})
    assert response.status_code == 201, response.json()
    return [Memory.objects.get(pk=result["memory"]["id"]) for result in response.json()["results"]]


def keyword_search(tenant, query):
    response = tenant.read_client.post(SEARCH, {"query": query, "mode": "keyword"})
    assert response.status_code == 200, response.json()
    return [hit["memory"]["id"] for hit in response.json()["results"]]


def test_recorded_reads_are_flushed_to_the_memories(owner):
    cat, dog = remember(owner, "my cat Whiskers", "my dog Rex")
    accesses_record(project=owner.project, memory_ids=[cat.pk, dog.pk])
    accesses_record(project=owner.project, memory_ids=[cat.pk, cat.pk])  # once per read
    assert Memory.objects.get(pk=cat.pk).access_count == 0  # not on the request path
    before = timezone.now()
    assert accesses_flush() == 2
    cat_row, dog_row = Memory.objects.get(pk=cat.pk), Memory.objects.get(pk=dog.pk)
    assert (cat_row.access_count, dog_row.access_count) == (2, 1)
    assert before - timedelta(seconds=5) < cat_row.accessed_at <= timezone.now()
    assert cat_row.updated_at == cat.updated_at  # a read is not a change
    assert MemoryRevision.objects.filter(action="update").count() == 0
    assert accesses_flush() == 0  # taken once


def test_api_search_counts_each_returned_memory(owner):
    cat, dog = remember(owner, "my cat Whiskers", "my dog Rex")
    for _ in range(3):
        assert keyword_search(owner, "Whiskers") == [str(cat.pk)]
    assert keyword_search(owner, "cat dog") != []
    assert accesses_flush_task() == 2
    assert Memory.objects.get(pk=cat.pk).access_count == 4
    assert Memory.objects.get(pk=dog.pk).access_count == 1
    keyword_search(owner, "Rex")
    accesses_flush()
    dog_row = Memory.objects.get(pk=dog.pk)
    assert dog_row.access_count == 2  # counts add up over flushes
    assert dog_row.accessed_at > Memory.objects.get(pk=cat.pk).accessed_at


def test_buffer_search_counts_each_returned_message(owner, monkeypatch):
    def no_model(query, embedding):  # ranked by recency alone, without loading the model
        raise RuntimeError("no model in this test")

    monkeypatch.setattr(buffer_service, "query_embedding_start", no_model)
    messages = remember(owner, "first turn", "second turn", "third turn", room="r1")
    for _ in range(2):
        response = owner.read_client.post(BUFFER_SEARCH, {"query": "turn", "limit": 2})
        assert response.status_code == 200, response.json()
    accesses_flush()
    counts = {m.content: m.access_count for m in Memory.objects.filter(room__external_id="r1")}
    assert counts == {"first turn": 0, "second turn": 2, "third turn": 2}
    assert len(messages) == 3


def test_nothing_is_counted_when_the_project_turns_tracking_off(owner, redis_client):
    [cat] = remember(owner, "my cat Whiskers")
    owner.project.settings = {"importance": {"track_access": False}}
    owner.project.save()
    assert keyword_search(owner, "Whiskers") == [str(cat.pk)]
    assert not redis_client.exists(ACCESS_COUNT_KEY, ACCESS_AT_KEY)
    assert accesses_flush() == 0


def test_with_redis_down_search_still_answers_and_counting_pauses(owner, settings):
    [cat] = remember(owner, "my cat Whiskers")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    assert keyword_search(owner, "Whiskers") == [str(cat.pk)]
    access.accesses_sent()  # the counting thread has tried (and failed)
    assert access._paused_until > time.monotonic()  # the next reads do not try
    settings.REDIS_URL = settings.CACHES["default"]["LOCATION"]
    redis_client._paused_until = 0.0  # the client's own pause over (redis_client.py)
    assert keyword_search(owner, "Whiskers") == [str(cat.pk)]
    assert accesses_flush() == 0  # counting still paused: those reads went uncounted


def test_memories_deleted_before_the_flush_are_skipped(owner):
    cat, dog = remember(owner, "my cat Whiskers", "my dog Rex")
    accesses_record(project=owner.project, memory_ids=[cat.pk, dog.pk])
    owner.client.delete(f"/api/v1/memories/{dog.pk}/")
    assert accesses_flush() == 1
    assert Memory.objects.get(pk=cat.pk).access_count == 1


def test_the_latest_read_wins(owner):
    later = timezone.now() + timedelta(days=1)
    memory = Memory.objects.create(
        project=owner.project, content="x", content_hash=content_hash("x"), accessed_at=later
    )
    accesses_record(project=owner.project, memory_ids=[memory.pk])
    accesses_flush()
    assert Memory.objects.get(pk=memory.pk).accessed_at == later


def test_a_flush_that_failed_leaves_its_counts_for_a_later_one(owner, monkeypatch, redis_client):
    [cat] = remember(owner, "my cat Whiskers")
    accesses_record(project=owner.project, memory_ids=[cat.pk])

    def broken(counts, times):
        raise RuntimeError("database went away")

    with monkeypatch.context() as patch:
        patch.setattr(access, "_accesses_write", broken)
        with pytest.raises(RuntimeError):
            accesses_flush()
    [token] = [raw.decode() for raw in redis_client.smembers(TAKEN_KEY)]
    assert accesses_flush() == 0  # too recent to be taken over: it may still be running
    monkeypatch.setattr(access, "ORPHAN_AFTER_SECONDS", -1)
    accesses_record(project=owner.project, memory_ids=[cat.pk])
    assert accesses_flush() == 2  # the orphan's memory and the new read's, once each
    assert Memory.objects.get(pk=cat.pk).access_count == 2
    assert not redis_client.smembers(TAKEN_KEY)
    assert not redis_client.keys(f"{TAKEN_KEY}:{token}:*")


def test_the_flush_rewrites_each_row_on_its_own_page(owner):
    """The table keeps room on its pages (migration 0015, fillfactor 85): a memory read
    is rewritten beside itself, without new entries in the table's indexes (a HOT
    update). With full pages (fillfactor 100) every row below moves and this fails."""
    walk = "the weather was fine and we walked " * 16
    remember(owner, *[f"note {n}: {walk}" for n in range(48)])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (ctid::text::point)[0]::int AS page, id FROM memories_memory "
            "WHERE project_id = %s ORDER BY ctid",
            [owner.project.pk],
        )
        pages = dict(cursor.fetchall())  # page -> one of its memories (the last)
    read = [memory_id for page, memory_id in pages.items() if page != max(pages)]
    assert len(read) >= 3  # the memories fill several pages; the last may have room anyway
    accesses_record(project=owner.project, memory_ids=read)
    before = _updates()
    assert accesses_flush() == len(read)
    updated, in_place = (after - then for after, then in zip(_updates(), before, strict=True))
    assert (updated, in_place) == (len(read), len(read))


def _updates() -> tuple[int, int]:
    """Rows of memories_memory updated in this transaction, and how many of them in place."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_stat_get_xact_tuples_updated('memories_memory'::regclass), "
            "pg_stat_get_xact_tuples_hot_updated('memories_memory'::regclass)"
        )
        updated, in_place = cursor.fetchone()
    return int(updated), int(in_place)
