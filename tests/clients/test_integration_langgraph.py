"""LangGraph's ``BaseStore`` over a live hub, through the methods LangGraph documents
and calls (put/get/search/delete/list_namespaces and their a-variants) and through a
compiled graph whose node gets the store injected."""

from __future__ import annotations

import time
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError
from memoryhub_client import AsyncMemoryHub, MemoryHub, PermissionDenied
from memoryhub_client.integrations.langgraph import MemoryHubStore, user_from_namespace

from tests.clients.conftest import run
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

ALICE = ("users", "alice", "memories")
BOB = ("users", "bob", "memories")


def store_for(live_server: Any, key: str, **options: Any) -> MemoryHubStore:
    """A store on its own clients of the live hub (close it after use)."""
    return MemoryHubStore(
        hub=MemoryHub(live_server.url, key, retries=1, backoff=0.01),
        async_hub=AsyncMemoryHub(live_server.url, key, retries=1, backoff=0.01),
        **options,
    )


def embedded(hub: MemoryHub) -> bool:
    return all(m.embedding_status == "done" for m in hub.memories.list(room="langgraph-store"))


@pytest.mark.worker
def test_put_get_search_delete(live_server, owner, hub, celery_worker_process) -> None:
    store = store_for(
        live_server, owner.raw_key, index={"fields": ["text"]}, user=user_from_namespace(1)
    )
    store.put(ALICE, "pet", {"text": "Alice adopted a cat called Miso", "topic": "pets"})
    store.put(ALICE, "trip", {"text": "Alice flies to Tokyo in March", "topic": "travel"})
    store.put(BOB, "pet", {"text": "Bob walks his dog Rex every morning", "topic": "pets"})
    store.put(ALICE, "pet", {"text": "Alice adopted two cats, Miso and Tofu", "topic": "pets"})

    item = store.get(ALICE, "pet")
    assert item is not None and item.namespace == ALICE and item.key == "pet"
    assert item.value == {"text": "Alice adopted two cats, Miso and Tofu", "topic": "pets"}
    assert item.updated_at >= item.created_at
    assert store.get(ALICE, "nothing") is None and store.get(BOB, "trip") is None
    # one memory per (namespace, key): the second put of ("alice", "pet") updated it
    assert hub.memories.count(room="langgraph-store") == 3
    stored = hub.memories.get(store.memory_id(ALICE, "pet"))
    assert (stored.user, stored.kind, stored.content) == (
        "alice",
        "knowledge",
        "Alice adopted two cats, Miso and Tofu",
    )
    wait_until(lambda: embedded(hub), timeout=90)

    found = store.search(("users", "alice"), query="which pets does she have?", limit=2)
    assert [hit.key for hit in found] == ["pet", "trip"]
    assert all(0.0 <= hit.score <= 1.0 for hit in found) and found[0].score > found[1].score
    everyone = store.search(("users",), query="a pet animal", filter={"topic": "pets"})
    assert {(hit.namespace, hit.key) for hit in everyone} == {(ALICE, "pet"), (BOB, "pet")}
    listed = store.search(("users",), limit=2)
    assert [hit.score for hit in listed] == [None, None] and len(listed) == 2
    assert len(store.search(("users",), offset=2)) == 1
    assert [hit.key for hit in store.search(BOB)] == ["pet"]

    store.delete(ALICE, "trip")
    store.delete(ALICE, "trip")  # deleting what is gone is no error
    assert store.get(ALICE, "trip") is None
    assert [hit.key for hit in store.search(ALICE)] == ["pet"]
    store.close()


def test_namespaces_and_isolation(live_server, owner, outsider, hub) -> None:
    store = store_for(live_server, owner.raw_key)
    for namespace in [ALICE, BOB, ("users", "alice", "notes"), ("docs", "v1"), ("docs",)]:
        store.put(namespace, "k", {"n": 1})
    assert store.list_namespaces() == sorted(
        [ALICE, BOB, ("users", "alice", "notes"), ("docs", "v1"), ("docs",)]
    )
    assert store.list_namespaces(prefix=("users", "alice")) == [ALICE, ("users", "alice", "notes")]
    assert store.list_namespaces(prefix=("users", "*", "memories")) == [ALICE, BOB]
    assert store.list_namespaces(suffix=("v1",)) == [("docs", "v1")]
    assert store.list_namespaces(max_depth=2) == [
        ("docs",),
        ("docs", "v1"),
        ("users", "alice"),
        ("users", "bob"),
    ]
    assert store.list_namespaces(limit=2, offset=1) == [("docs", "v1"), ALICE]

    # another namespace, another store's room, another project: nothing of these
    assert store.search(("users", "carol")) == [] and store.get(("users",), "k") is None
    other_room = store_for(live_server, owner.raw_key, room="other-store")
    assert other_room.get(ALICE, "k") is None and other_room.list_namespaces() == []
    outside = store_for(live_server, outsider.raw_key)
    assert outside.get(ALICE, "k") is None and outside.search(("users",)) == []
    assert outside.list_namespaces() == []
    # the project's items (no user) unless the store names one
    assert hub.memories.get(store.memory_id(ALICE, "k")).user is None
    for each in (store, other_room, outside):
        each.close()


def test_ttl_expires_and_refreshes(live_server, owner, hub) -> None:
    store = store_for(live_server, owner.raw_key, ttl={"default_ttl": 10.0})
    store.put(ALICE, "short", {"n": 1}, ttl=0.01)  # 0.6 s
    store.put(ALICE, "kept", {"n": 2})  # the default, 10 minutes
    store.put(ALICE, "forever", {"n": 3}, ttl=None)
    memory_id = store.memory_id(ALICE, "kept")
    before = hub.memories.get(memory_id).metadata["langgraph"]["expires_at"]
    assert before == pytest.approx(time.time() + 600, abs=30)
    assert (
        hub.memories.get(store.memory_id(ALICE, "forever")).metadata["langgraph"]["expires_at"]
        is None
    )
    time.sleep(1.0)

    assert store.get(ALICE, "short") is None
    assert {hit.key for hit in store.search(ALICE)} == {"kept", "forever"}
    assert hub.memories.count(room="langgraph-store") == 2  # deleted when met
    assert hub.memories.get(memory_id).metadata["langgraph"]["expires_at"] > before  # refreshed
    unrefreshed = hub.memories.get(memory_id).metadata["langgraph"]["expires_at"]
    assert store.get(ALICE, "kept", refresh_ttl=False) is not None
    assert hub.memories.get(memory_id).metadata["langgraph"]["expires_at"] == unrefreshed
    store.close()


def test_read_only_key_and_bad_input(live_server, owner, hub) -> None:
    reader = store_for(live_server, owner.raw_read_key)
    with pytest.raises(PermissionDenied):
        reader.put(ALICE, "k", {"n": 1})
    assert hub.memories.count(room="langgraph-store") == 0
    assert reader.get(ALICE, "k") is None  # reading is allowed
    writer = store_for(live_server, owner.raw_key)
    with pytest.raises(InvalidNamespaceError):
        writer.put(("users", "a.b"), "k", {"n": 1})
    with pytest.raises(InvalidNamespaceError):
        writer.put((), "k", {"n": 1})
    writer.put(ALICE, "k", {"n": 1})
    with pytest.raises(ValueError, match="operator"):
        writer.search(ALICE, filter={"n": {"$in": [1]}})
    for each in (reader, writer):
        each.close()


def test_async_methods(live_server, owner) -> None:
    async def scenario() -> tuple[Any, ...]:
        store = store_for(live_server, owner.raw_key, index={"fields": ["text"]})
        try:
            await store.aput(ALICE, "a", {"text": "likes green tea", "n": 1})
            await store.aput(ALICE, "b", {"text": "plays chess on Sundays", "n": 5})
            got = await store.aget(ALICE, "a")
            over = await store.asearch(ALICE, filter={"n": {"$gt": 2}})
            spaces = await store.alist_namespaces(prefix=("users",))
            await store.adelete(ALICE, "a")
            return got, over, spaces, await store.aget(ALICE, "a")
        finally:
            await store.aclose()

    got, over, spaces, gone = run(scenario())
    assert got.value == {"text": "likes green tea", "n": 1}
    assert [hit.key for hit in over] == ["b"]
    assert spaces == [ALICE] and gone is None


class State(TypedDict):
    user: str
    said: str
    remembered: list[str]


def remember_and_recall(state: State, *, store: BaseStore) -> dict[str, Any]:
    namespace = ("users", state["user"], "memories")
    store.put(namespace, str(len(store.search(namespace)) + 1), {"text": state["said"]})
    return {"remembered": [item.value["text"] for item in store.search(namespace)]}


def test_a_compiled_graph_uses_the_store(live_server, owner, hub) -> None:
    builder = StateGraph(State)
    builder.add_node("remember", remember_and_recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    store = store_for(live_server, owner.raw_key, user=user_from_namespace(1))
    graph = builder.compile(store=store)

    graph.invoke({"user": "alice", "said": "I adopted a cat", "remembered": []})
    out = graph.invoke({"user": "alice", "said": "I live in Porto", "remembered": []})
    other = graph.invoke({"user": "bob", "said": "I play the cello", "remembered": []})

    assert sorted(out["remembered"]) == ["I adopted a cat", "I live in Porto"]
    assert other["remembered"] == ["I play the cello"]
    assert hub.memories.count(user="alice") == 2  # filed under the user the namespace names
    store.close()
