"""The sync client's users and rooms calls against a live hub: create, list across
pages, get, update, delete; a user's facts and synopsis; export and import."""

from __future__ import annotations

import pytest
from memoryhub_client import MemoryHub, NotFound, Room, User

pytestmark = pytest.mark.django_db(transaction=True)


def test_users_are_created_once_listed_changed_and_deleted(hub: MemoryHub) -> None:
    alice = hub.users.create("alice", name="Alice", metadata={"plan": "pro"})
    assert isinstance(alice, User) and (alice.name, alice.metadata) == ("Alice", {"plan": "pro"})
    assert hub.users.create("alice", name="Other").name == "Alice"  # existing: unchanged
    for name in ("bob", "carol", "dan"):
        hub.users.create(name)
    assert [u.external_id for u in hub.users.list(limit=3)] == ["alice", "bob", "carol", "dan"]
    assert hub.users.page(limit=3).count == 4
    assert [u.external_id for u in hub.users.list(external_id="bob")] == ["bob"]
    assert hub.users.update("alice", name="Alice B.").name == "Alice B."
    assert hub.users.get("alice").metadata == {"plan": "pro"}
    hub.memories.add("note", user="bob")
    assert hub.users.delete("bob") == 1
    with pytest.raises(NotFound):
        hub.users.get("bob")


def test_rooms_take_their_own_settings(hub: MemoryHub) -> None:
    room = hub.rooms.create("chat 1?#é", name="Chat", agent="helper", world_id="w1")
    assert isinstance(room, Room) and room.external_id == "chat 1?#é"  # quoted in the path
    assert (room.agent, room.world_id) == ("helper", "w1")
    changed = hub.rooms.update("chat 1?#é", settings={"buffer": {"max_size": 4}})
    assert changed.settings == {"buffer": {"max_size": 4}}
    assert hub.buffer.window(room="chat 1?#é").settings.max_size == 4
    hub.rooms.create("chat-2")
    assert [r.external_id for r in hub.rooms.list(limit=1)] == ["chat 1?#é", "chat-2"]
    assert hub.rooms.page(limit=1).count == 2
    assert hub.rooms.get("chat-2").name == ""
    hub.memories.add("hello", user="alice", room="chat-2")
    assert hub.rooms.delete("chat-2") == 1
    with pytest.raises(NotFound):
        hub.rooms.get("chat-2")


def test_a_users_facts_are_their_fact_memories(hub: MemoryHub) -> None:
    hub.memories.add(
        "User is allergic to peanuts.",
        user="alice",
        kind="fact",
        content_json={"category": "health"},
        confidence=0.9,
    )
    hub.memories.add(
        "User lives in Lisbon.", user="alice", kind="fact", content_json={"category": "location"}
    )
    hub.memories.add("Run a marathon", user="alice", kind="goal")
    hub.memories.add("I like tea", user="alice")
    facts = [m.content for m in hub.users.facts("alice", limit=1)]
    assert sorted(facts) == ["User is allergic to peanuts.", "User lives in Lisbon."]
    health = hub.users.facts("alice", category="health")
    assert [m.content for m in health] == ["User is allergic to peanuts."]
    mixed = hub.users.facts_page("alice", kind=["fact", "goal"])
    assert mixed.count == 3
    assert [m.content for m in hub.scoped(user="alice").users.facts(category="location")] == [
        "User lives in Lisbon."
    ]


def test_a_synopsis_is_read_edited_locked_and_refreshed(hub: MemoryHub) -> None:
    hub.memories.add(
        "User's name is Maria.", user="maria", kind="fact", content_json={"category": "identity"}
    )
    synopsis = hub.users.synopsis("maria")
    assert synopsis.user == "maria"
    assert synopsis.identity.freshness in ("fresh", "stale", "missing")
    edited = hub.users.update_synopsis(
        "maria", identity={"text": "Maria, a chef in Lisbon.", "locked": True}
    )
    assert edited.identity.text == "Maria, a chef in Lisbon." and edited.identity.locked
    refresh = hub.users.refresh_synopsis("maria")
    assert refresh.user == "maria" and refresh.locked == ["identity"]
    assert refresh.parts == ["context"]
    assert hub.users.synopsis("maria").identity.text == "Maria, a chef in Lisbon."


def test_an_export_imports_into_another_project(hub: MemoryHub, hub_for, outsider) -> None:
    hub.memories.add_batch(
        [{"content": "I adopted a cat called Miso", "role": "user"}, {"content": "Lovely!"}],
        user="alice",
        room="chat-1",
    )
    exported = hub.users.export("alice")
    assert exported["format"] == "memoryhub-export" and len(exported["memories"]) == 2
    room_export = hub.rooms.export("chat-1")
    assert {m["content"] for m in room_export["memories"]} == {
        "I adopted a cat called Miso",
        "Lovely!",
    }
    other = hub_for(outsider.raw_key)
    result = other.import_data(exported)
    assert (result.memories.created, result.memories.skipped) == (2, 0)
    assert (result.users.created, result.rooms.created) == (1, 1)
    assert other.import_data(exported).memories.skipped == 2  # twice: nothing more
    assert other.memories.count(user="alice") == 2
