"""Working memory (services/working.py): items in Redis with their own TTL, FIFO cap per
room, search by meaning with FAISS (recency without the model), the beat trim."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from memories.models import Room
from memories.providers.embeddings import EmbeddingError
from memories.services import embedding_spaces, working, working_store
from memories.services.configuration import room_settings_update
from memories.services.revisions import Actor
from memories.services.users import room_get_or_create
from tests.memories.conftest import CountingProvider

DIMENSION_BYTES = 384 * 4  # the vector each item reserves (EMBEDDING_DIMENSION 384)


@pytest.fixture(autouse=True)
def clean_working_memory(redis_client):
    """Working memory left by earlier tests (their rooms were rolled back) is not ours."""
    for key in redis_client.scan_iter(match=f"{working_store.KEY_PREFIX}:*"):
        redis_client.delete(key)


@pytest.fixture
def counting(monkeypatch):
    """A deterministic stand-in for the model, recording what it embeds."""
    provider = CountingProvider(model="working-test", dimension=32)
    monkeypatch.setattr(embedding_spaces, "get_provider", lambda: provider)
    return provider


def room_of(owner, external_id="r1", **working_settings):
    room, _ = room_get_or_create(project=owner.project, external_id=external_id)
    if working_settings:
        room_settings_update(
            room=room, changes={"working": working_settings}, actor=Actor.system("test")
        )
    return Room.objects.select_related("project").get(pk=room.pk)


def contents(room):
    return [item.content for item in working.working_list(room=room).items]


def test_an_item_is_kept_with_its_metadata_for_the_rooms_ttl(owner):
    room = room_of(owner)
    item = working.working_add(room=room, content="tool output: 42", metadata={"tool": "calc"})
    [listed] = working.working_list(room=room).items
    assert (listed.id, listed.content, listed.metadata) == (
        item.id,
        "tool output: 42",
        {"tool": "calc"},
    )
    assert listed.created_at == item.created_at
    assert (listed.expires_at - listed.created_at).total_seconds() == 3600


def test_items_are_listed_oldest_first_with_the_rooms_usage(owner):
    room = room_of(owner)
    for i in range(5):
        working.working_add(room=room, content=f"note {i}")
    listed = working.working_list(room=room)
    assert [item.content for item in listed.items] == [f"note {i}" for i in range(5)]
    assert listed.bytes == sum(len(f"note {i}") + 2 + DIMENSION_BYTES for i in range(5))
    assert listed.max_bytes == 10 * 1024 * 1024


def test_an_item_expires_after_its_own_ttl(owner, redis_client):
    room = room_of(owner)
    working.working_add(room=room, content="lasting")
    working.working_add(room=room, content="fleeting", ttl_seconds=1)
    assert contents(room) == ["lasting", "fleeting"]
    time.sleep(1.2)
    listed = working.working_list(room=room)
    assert [item.content for item in listed.items] == ["lasting"]
    assert listed.bytes == len("lasting") + 2 + DIMENSION_BYTES  # its bytes were given back
    index, expiry, sizes, _ = working_store.room_keys(
        working_store.room_prefix(room.project_id, room.pk)
    )
    assert redis_client.zcard(index) == redis_client.zcard(expiry) == redis_client.hlen(sizes) == 1


def test_a_room_whose_items_all_expired_leaves_no_key_behind(owner, redis_client):
    room = room_of(owner)
    working.working_add(room=room, content="gone soon", ttl_seconds=1)
    time.sleep(1.2)
    assert contents(room) == []
    assert list(redis_client.scan_iter(match=f"{working_store.KEY_PREFIX}:*")) == []


def test_the_room_ttl_setting_is_the_default(owner):
    room = room_of(owner, ttl_seconds=60)
    item = working.working_add(room=room, content="x")
    assert (item.expires_at - item.created_at).total_seconds() == 60


def test_a_write_over_the_cap_drops_the_oldest_items(owner):
    room = room_of(owner, max_memory_mb=0.01)  # 10,485 bytes: two items of 3,000 characters
    for i in range(4):
        working.working_add(room=room, content=f"{i}" * 3000)
    listed = working.working_list(room=room)
    assert [item.content[0] for item in listed.items] == ["2", "3"]
    assert listed.bytes == 2 * (3000 + 2 + DIMENSION_BYTES) <= listed.max_bytes


def test_an_item_larger_than_the_whole_cap_is_refused_and_nothing_dropped(owner):
    room = room_of(owner, max_memory_mb=0.01)
    working.working_add(room=room, content="kept")
    with pytest.raises(working.WorkingItemTooLarge):
        working.working_add(room=room, content="x" * 11_000)
    assert contents(room) == ["kept"]


def test_concurrent_writers_never_leave_the_room_over_its_cap(owner):
    room = room_of(owner, max_memory_mb=0.01)
    barrier = threading.Barrier(8)

    def write(worker):
        barrier.wait()
        for i in range(10):
            working.working_add(room=room, content=f"w{worker}-{i} " + "x" * 1500)
            listed = working.working_list(room=room)
            assert listed.bytes <= listed.max_bytes

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(8)))
    listed = working.working_list(room=room)
    sizes = [len(item.content) + 2 + DIMENSION_BYTES for item in listed.items]
    assert listed.bytes == sum(sizes) <= listed.max_bytes
    assert len(listed.items) == listed.max_bytes // sizes[0]  # full, not emptied


def test_rooms_and_projects_are_apart(owner, outsider):
    mine, other = room_of(owner, "r1"), room_of(owner, "r2")
    theirs = room_of(outsider, "r1")  # the same external id in another project
    working.working_add(room=mine, content="mine")
    working.working_add(room=theirs, content="theirs")
    assert (contents(mine), contents(other), contents(theirs)) == (["mine"], [], ["theirs"])
    assert working.working_clear(room=theirs) == 1
    assert contents(mine) == ["mine"]


def test_delete_one_item_and_clear_the_room(owner):
    room = room_of(owner)
    first = working.working_add(room=room, content="first")
    working.working_add(room=room, content="second")
    working.working_add(room=room, content="third", ttl_seconds=1)
    assert working.working_delete(room=room, item_id=first.id) is True
    assert working.working_delete(room=room, item_id=first.id) is False
    time.sleep(1.2)
    assert working.working_clear(room=room) == 1  # the expired one is not counted
    assert working.working_list(room=room).bytes == 0


def test_search_ranks_by_meaning_and_embeds_new_items_once_in_one_batch(owner, counting):
    room = room_of(owner)
    for text in ["the weather in paris is sunny", "stock prices fell today", "paris hotel booked"]:
        working.working_add(room=room, content=text)
    result = working.working_search(room=room, query="paris hotel booked", limit=2)
    assert result.method == "semantic" and result.reason is None
    assert [hit.item.content for hit in result.hits][0] == "paris hotel booked"
    assert len(result.hits) == 2 and result.hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert result.hits[0].score >= result.hits[1].score
    item_batches = [call for call in counting.calls if len(call) == 3]
    assert (result.embedded, len(item_batches)) == (3, 1)

    working.working_add(room=room, content="paris museum tickets")
    again = working.working_search(room=room, query="paris museum", limit=10)
    assert again.embedded == 1  # the others kept their vectors in Redis
    assert ["paris museum tickets"] in counting.calls


def test_filter_metadata_applies_before_the_top_k_and_never_leaks(owner, counting):
    room = room_of(owner)
    working.working_add(room=room, content="invoice total 90 euros", metadata={"user": "b"})
    working.working_add(room=room, content="invoice total", metadata={"user": "b", "n": 1})
    working.working_add(room=room, content="an unrelated note", metadata={"user": "a"})
    working.working_add(room=room, content="flag", metadata={"user": "a", "n": True})
    result = working.working_search(
        room=room, query="invoice total", limit=1, filter_metadata={"user": "a"}
    )
    assert [hit.item.metadata["user"] for hit in result.hits] == ["a"]
    assert result.searched == 2
    strict = working.working_search(room=room, query="invoice", filter_metadata={"n": 1})
    assert [hit.item.content for hit in strict.hits] == ["invoice total"]  # true is not 1
    assert working.working_search(room=room, query="x", filter_metadata={"nope": None}).hits == []


def test_without_the_model_search_answers_with_the_newest_items(owner, monkeypatch):
    class Broken(CountingProvider):
        def embed(self, texts):
            raise EmbeddingError("model files missing", retryable=False)

    monkeypatch.setattr(embedding_spaces, "get_provider", lambda: Broken(model="broken"))
    room = room_of(owner)
    for i in range(4):
        working.working_add(room=room, content=f"note {i}", metadata={"i": i % 2})
    result = working.working_search(room=room, query="anything", limit=2)
    assert result.method == "recency" and "model files missing" in result.reason
    assert [hit.item.content for hit in result.hits] == ["note 3", "note 2"]
    assert all(hit.score is None for hit in result.hits)
    filtered = working.working_search(room=room, query="x", filter_metadata={"i": 0})
    assert [hit.item.content for hit in filtered.hits] == ["note 2", "note 0"]


def test_a_vector_stored_back_never_revives_an_item_deleted_meanwhile(owner, redis_client):
    room = room_of(owner)
    item = working.working_add(room=room, content="short-lived")
    working.working_delete(room=room, item_id=item.id)
    prefix = working_store.room_prefix(room.project_id, room.pk)
    assert working_store.script_run("vectors", prefix, "m", item.id, b"\x00" * 16) == 0
    assert not redis_client.exists(f"{prefix}:item:{item.id}")


def test_trim_applies_a_lowered_cap_purges_expired_ids_and_clears_rooms_gone(owner, outsider):
    room, short, gone = room_of(owner, "r1"), room_of(owner, "r2"), room_of(owner, "r3")
    for i in range(4):
        working.working_add(room=room, content=f"{i}" * 3000)
    working.working_add(room=short, content="expires", ttl_seconds=1)
    working.working_add(room=short, content="stays")
    working.working_add(room=gone, content="orphan")
    Room.objects.filter(pk=gone.pk).delete()  # deleted without working_clear
    theirs = room_of(outsider, "r1")
    for i in range(3):
        working.working_add(room=theirs, content=f"{i}" * 3000)
    for lowered in (room, theirs):  # 10,485 bytes: two of those items
        room_settings_update(
            room=lowered, changes={"working": {"max_memory_mb": 0.01}}, actor=Actor.system("t")
        )
    room, theirs = (Room.objects.select_related("project").get(pk=r.pk) for r in (room, theirs))
    time.sleep(1.2)

    assert working.working_trim(project_id=owner.project.pk) == 2 + 1 + 1
    assert [text[0] for text in contents(room)] == ["2", "3"]
    assert contents(short) == ["stays"]
    assert working.working_list(room=gone).items == []
    assert len(contents(theirs)) == 3  # another project: untouched
    assert working.working_trim() == 1
    assert [text[0] for text in contents(theirs)] == ["1", "2"]
    assert working.working_trim() == 0


def test_redis_unreachable_is_said_as_such(owner, settings, tmp_path):
    room = room_of(owner)
    settings.REDIS_URL = f"unix://{tmp_path}/no-redis-here.sock"
    for call in (
        lambda: working.working_add(room=room, content="x"),
        lambda: working.working_list(room=room),
        lambda: working.working_clear(room=room),
        lambda: working.working_trim(),
    ):
        with pytest.raises(working.WorkingMemoryUnavailable):
            call()
