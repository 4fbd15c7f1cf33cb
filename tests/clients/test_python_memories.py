"""The sync client's memories calls against a live hub: store, batch, list across
pages, count, get, update, revisions, delete; the client's default user and room; the
errors a user meets (400 with fields, 401, 403, 404, 409)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from memoryhub_client import (
    AuthenticationError,
    BadRequest,
    Conflict,
    Memory,
    MemoryHub,
    NotFound,
    Pager,
    PermissionDenied,
)

from memories.models import Memory as StoredMemory
from memories.providers.embeddings import get_provider

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_memory_goes_in_with_every_field_and_comes_back_typed(hub: MemoryHub) -> None:
    when = datetime(2026, 5, 2, 10, 30, tzinfo=UTC)
    chosen = str(uuid.uuid4())
    created = hub.memories.add(
        "Ana lives in Lisbon",
        user="alice",
        room="chat-1",
        agent="helper",
        kind="fact",
        content_json={"category": "relationship"},
        metadata={"source": "test", "n": 1},
        importance=0.7,
        pinned=True,
        confidence=0.9,
        created_at=when,
        id=chosen,
    )
    assert created.created is True
    memory = created.memory
    assert isinstance(memory, Memory)
    assert (memory.id, memory.user, memory.room, memory.agent) == (
        chosen,
        "alice",
        "chat-1",
        "helper",
    )
    assert (memory.kind, memory.pinned, memory.confidence) == ("fact", True, 0.9)
    assert memory.metadata == {"source": "test", "n": 1}
    assert memory.created_at == when  # a datetime, parsed
    assert memory.embedding_status == "pending"
    again = hub.memories.get(chosen)
    assert again.content == "Ana lives in Lisbon" and again.importance == 0.7
    # the same id and content again: the hub's idempotent answer, nothing new stored
    repeated = hub.memories.add(
        "Ana lives in Lisbon",
        user="alice",
        room="chat-1",
        agent="helper",
        kind="fact",
        id=chosen,
        content_json={"category": "relationship"},
        metadata={"source": "test", "n": 1},
        importance=0.7,
        pinned=True,
        confidence=0.9,
        created_at=when,
    )
    assert repeated.created is False and repeated.memory.id == chosen
    assert StoredMemory.objects.filter(public_id=chosen).count() == 1


def test_a_batch_lists_across_pages_and_counts(hub: MemoryHub) -> None:
    turns = [{"content": f"turn {n}", "role": "user" if n % 2 else "assistant"} for n in range(7)]
    results = hub.memories.add_batch(turns, user="bob", room="walk")
    assert [r.memory.content for r in results] == [f"turn {n}" for n in range(7)]
    assert all(r.created and r.memory.room == "walk" for r in results)
    pager = hub.memories.list(user="bob", order="asc", limit=3)
    assert isinstance(pager, Pager)
    pages = list(pager.pages())
    assert [len(page.results) for page in pages] == [3, 3, 1]
    assert pages[0].count == 7 and pages[-1].next_cursor is None
    assert [m.content for m in pager] == [f"turn {n}" for n in range(7)]
    first = hub.memories.page(user="bob", limit=2)  # one page only, newest first
    assert [m.content for m in first.results] == ["turn 6", "turn 5"]
    rest = hub.memories.page(user="bob", limit=5, cursor=first.next_cursor)
    assert [m.content for m in rest.results] == [f"turn {n}" for n in range(4, -1, -1)]
    assert hub.memories.count(user="bob") == 7
    assert hub.memories.count(user="bob", kind=["message"], room="walk") == 7
    assert hub.memories.count(user="nobody") == 0


def test_update_records_revisions_and_delete_removes(hub: MemoryHub) -> None:
    memory = hub.memories.add("I like tea", user="carol").memory
    changed = hub.memories.update(
        memory.id, content="I like green tea", metadata={"v": 2}, pinned=True
    )
    assert (changed.content, changed.metadata, changed.pinned) == (
        "I like green tea",
        {"v": 2},
        True,
    )
    revisions = list(hub.memories.revisions(memory.id, limit=1))  # two pages of one
    assert [r.action for r in revisions] == ["update", "create"]
    assert revisions[0].before["content"] == "I like tea"
    assert revisions[0].after["content"] == "I like green tea"
    assert hub.memories.revisions_page(memory.id).count == 2
    assert hub.memories.delete(memory.id) is None
    with pytest.raises(NotFound) as missing:
        hub.memories.get(memory.id)
    assert missing.value.status == 404
    assert f"GET /api/v1/memories/{memory.id}/" in str(missing.value)


def test_delete_where_takes_a_rooms_memories_only(hub: MemoryHub) -> None:
    hub.memories.add_batch([{"content": "a"}, {"content": "b"}], user="dan", room="r1")
    hub.memories.add("c", user="dan", room="r2")
    assert hub.memories.delete_where(room="r1") == 2
    assert [m.content for m in hub.memories.list(user="dan")] == ["c"]
    with pytest.raises(BadRequest) as refused:  # no filter: the hub refuses to delete all
        hub.memories.delete_where()
    assert "room" in refused.value.fields


def test_the_clients_default_user_and_room_fill_the_calls(hub: MemoryHub) -> None:
    scoped = hub.scoped(user="erin", room="kitchen")
    stored = scoped.memories.add("Dinner at eight", role="user").memory
    assert (stored.user, stored.room) == ("erin", "kitchen")
    assert scoped.memories.count() == 1  # filtered by the defaults
    assert hub.memories.count(user="erin", room="kitchen") == 1
    elsewhere = scoped.memories.add("Lunch", room="office").memory  # an argument wins
    assert (elsewhere.user, elsewhere.room) == ("erin", "office")
    assert scoped.buffer.window().room == "kitchen"
    with pytest.raises(ValueError, match="room is required"):
        hub.buffer.window()  # no default room: said before anything is sent


def test_a_bad_field_is_a_400_naming_it(hub: MemoryHub) -> None:
    with pytest.raises(BadRequest) as bad:
        hub.memories.add("x", user="alice", kind="diary", importance=7)
    error = bad.value
    assert error.status == 400
    assert set(error.fields) == {"kind", "importance"}
    assert "kind:" in str(error) and "importance:" in str(error)
    assert not StoredMemory.objects.exists()


def test_a_batch_error_names_the_item(hub: MemoryHub) -> None:
    with pytest.raises(BadRequest) as bad:
        hub.memories.add_batch([{"content": "ok"}, {"content": ""}], user="alice")
    assert "memories" in bad.value.fields
    assert "memories[1].content" in str(bad.value)


def test_an_id_of_another_memory_is_a_409(hub: MemoryHub) -> None:
    chosen = str(uuid.uuid4())
    hub.memories.add("first", user="alice", id=chosen)
    with pytest.raises(Conflict) as clash:
        hub.memories.add("something else", user="alice", id=chosen)
    assert clash.value.status == 409 and "id" in clash.value.fields


def test_an_unknown_key_is_a_401_and_a_read_only_key_a_403(
    hub_for, read_hub: MemoryHub, hub: MemoryHub
) -> None:
    with pytest.raises(AuthenticationError) as unknown:
        hub_for("mh_not_a_key").memories.count()
    assert unknown.value.status == 401
    with pytest.raises(PermissionDenied) as denied:
        read_hub.memories.add("no", user="alice")
    assert denied.value.status == 403
    hub.memories.add("yes", user="alice")
    assert read_hub.memories.count(user="alice") == 1  # reads are fine


def test_another_projects_memory_is_not_found(hub: MemoryHub, hub_for, outsider) -> None:
    memory = hub.memories.add("mine", user="alice").memory
    with pytest.raises(NotFound):
        hub_for(outsider.raw_key).memories.get(memory.id)
    with pytest.raises(NotFound):
        hub_for(outsider.raw_key).memories.delete(memory.id)
    assert hub.memories.get(memory.id).content == "mine"


def test_own_vectors_and_the_agent_and_world_filters(hub: MemoryHub) -> None:
    """A memory sent with its vector (a numpy array) is embedded at once: a vector search
    finds it with no worker running; list, count, search and context take the agent and
    the world (the world_id of the memory's room)."""
    vectors = get_provider().embed(["Whiskers the cat naps", "Rex the dog barks"])
    hub.rooms.create("den", world_id="home")
    cat = hub.memories.add(
        "Whiskers the cat naps", user="dana", agent="eliza", room="den", embedding=vectors[0]
    ).memory
    assert cat.embedding_status == "done"
    [dog] = hub.memories.add_batch(
        [{"content": "Rex the dog barks", "agent": "other", "embedding": vectors[1]}],
        user="dana",
    )
    assert dog.memory.embedding_status == "done"
    assert [m.content for m in hub.memories.list(agent="eliza")] == [cat.content]
    assert hub.memories.count(world="home") == 1 and hub.memories.count(agent="nobody") == 0
    found = hub.search(embedding=vectors[1], mode="vector", agent="eliza", world="home")
    assert [hit.memory.id for hit in found.results] == [cat.id]
    context = hub.context("pets", user="dana", agent="other")
    [retrieved] = [s for s in context.sections if s.name == "retrieved"]
    assert [item.id for item in retrieved.items] == [dog.memory.id]
