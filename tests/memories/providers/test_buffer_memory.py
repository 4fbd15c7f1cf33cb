"""memories/providers/buffer_memory.py: the standalone BufferMemory (no database needed)."""

import asyncio
import json
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memories.providers.buffer_memory import BufferMemory, BufferSearch
from tests.memories.providers.buffer_models import DIMENSION, WordsModel, buffer


def test_sixty_adds_into_five_by_ten_keep_the_newest_fifty_in_order():
    memory = buffer(max_size=5, buffer_multiplier=10, model=WordsModel())
    for n in range(60):
        memory.add(f"message {n}", id=f"m{n}")

    assert memory.capacity == memory.buffer_size == 50
    assert len(memory) == 50
    assert [item.id for item in memory.items()] == [f"m{n}" for n in range(10, 60)]
    assert [item.content for item in memory.recent()] == [f"message {n}" for n in range(55, 60)]
    found = memory.search("message 3", limit=50)
    assert {hit["id"] for hit in found} == {f"m{n}" for n in range(10, 60)}


def test_without_a_model_search_returns_the_newest_first():
    memory = buffer(max_size=3, buffer_multiplier=2)
    for n in range(8):
        memory.add(f"turn {n}", role="user")

    found = memory.search_detailed("what was said about turn 2?", limit=4)

    assert found.method == "recency"
    assert found.reason == "no embedding model"
    assert [hit.item.content for hit in found.hits] == ["turn 7", "turn 6", "turn 5", "turn 4"]
    assert [hit.semantic for hit in found.hits] == [None] * 4
    assert [hit.score for hit in found.hits] == [1.0, 0.8, 0.6, 0.4]
    assert [hit["content"] for hit in memory.search(None, limit=2)] == ["turn 7", "turn 6"]


def test_an_empty_query_is_answered_by_recency_even_with_a_model():
    memory = buffer(model=WordsModel())
    memory.add("old news")
    memory.add("new news")

    found = memory.search_detailed("  ")

    assert (found.method, found.reason) == ("recency", "no query")
    assert [hit.item.content for hit in found.hits] == ["new news", "old news"]


@pytest.mark.parametrize("query", ["pizza with extra cheese", None])
def test_metadata_filters_never_return_another_users_items(query):
    memory = buffer(max_size=10, buffer_multiplier=10, model=WordsModel())
    for n in range(3):
        memory.add(f"a likes gardening {n}", {"user": "a"})
    for n in range(30):  # newer, and closer to the query: b's items would win unfiltered
        memory.add(f"pizza with extra cheese {n}", {"user": "b"})

    found = memory.search_detailed(query, limit=10, filter_metadata={"user": "a"})
    assert found.method == ("semantic" if query else "recency")
    assert [hit.item.content for hit in found.hits] == [
        "a likes gardening 2",
        "a likes gardening 1",
        "a likes gardening 0",
    ]
    short = memory.search(query, limit=2, filter_metadata={"user": "a"})
    assert [hit["metadata"]["user"] for hit in short] == ["a", "a"]
    assert memory.search(query, filter_metadata={"user": "c"}) == []
    assert memory.search(query, filter_metadata={"user": "a", "role": "user"}) == []


def test_filters_compare_values_exactly():
    memory = buffer()
    memory.add("flagged", {"pinned": True, "n": 1})
    memory.add("counted", {"pinned": 1, "n": 1.0})

    assert [hit["content"] for hit in memory.search(filter_metadata={"pinned": True})] == [
        "flagged"
    ]
    assert [hit["content"] for hit in memory.search(filter_metadata={"pinned": 1})] == ["counted"]
    assert len(memory.search(filter_metadata={"n": 1})) == 2
    assert memory.search(filter_metadata={"missing": None}) == []


def test_a_filter_applies_before_the_limit():
    memory = buffer(max_size=20, buffer_multiplier=5, model=WordsModel())
    for n in range(5):
        memory.add(f"quiet evening walk {n}", {"user": "a"})
    for n in range(50):
        memory.add(f"loud evening party {n}", {"user": "b"})

    found = memory.search("loud evening party", limit=4, filter_metadata={"user": "a"})

    assert len(found) == 4
    assert {hit["metadata"]["user"] for hit in found} == {"a"}


def test_json_round_trip_keeps_items_order_vectors_and_settings():
    model = WordsModel(fail_on="unembeddable")
    memory = BufferMemory(
        max_size=4, buffer_multiplier=3, model=model, vector_dimension=DIMENSION, recency_bias=0.2
    )
    for n in range(14):
        memory.add(f"note {n}", {"topic": ["x", n]}, role="assistant", id=f"n{n}")
    memory.add("unembeddable note", id="plain")

    copy = BufferMemory.from_json(memory.to_json(), model=model)

    assert (copy.max_size, copy.buffer_multiplier, copy.vector_dimension, copy.recency_bias) == (
        4,
        3,
        DIMENSION,
        0.2,
    )
    assert copy.model is model
    originals, copies = memory.items(), copy.items()
    assert [item.id for item in copies] == [item.id for item in originals]
    assert [f"n{n}" for n in range(3, 14)] + ["plain"] == [item.id for item in copies]
    for original, restored in zip(originals, copies, strict=True):
        assert (restored.content, restored.metadata, restored.role, restored.timestamp) == (
            original.content,
            original.metadata,
            original.role,
            original.timestamp,
        )
        if original.vector is None:
            assert restored.vector is None
        else:
            assert restored.vector.dtype == np.float32
            assert np.array_equal(restored.vector, original.vector)
    assert copies[-1].vector is None
    assert copy.search("note 9", limit=5) == memory.search("note 9", limit=5)
    assert json.loads(copy.to_json()) == json.loads(memory.to_json())


def test_from_json_refuses_what_to_json_did_not_write():
    with pytest.raises(ValueError, match="not a serialized BufferMemory"):
        BufferMemory.from_json('{"items": []}')
    with pytest.raises(ValueError, match="not a serialized BufferMemory"):
        BufferMemory.from_json("not json")
    with pytest.raises(ValueError, match="max_size"):
        BufferMemory.from_json('{"settings": {"max_size": 0}, "items": []}')


def test_concurrent_adds_and_searches_from_eight_threads_lose_nothing():
    memory = buffer(max_size=100, buffer_multiplier=16, model=WordsModel())
    errors: list[BaseException] = []
    adding_done = threading.Event()
    start = threading.Barrier(10)

    def add(thread: int) -> None:
        try:
            start.wait()
            for n in range(200):
                memory.add(f"thread {thread} item {n}", {"thread": thread}, id=f"{thread}-{n}")
        except BaseException as error:
            errors.append(error)

    def search(thread: int) -> None:
        try:
            start.wait()
            while not adding_done.is_set():
                memory.search(f"thread {thread} item", limit=5)
                memory.search(limit=5, filter_metadata={"thread": thread})
        except BaseException as error:
            errors.append(error)

    adders = [threading.Thread(target=add, args=(n,)) for n in range(8)]
    searchers = [threading.Thread(target=search, args=(n,)) for n in range(2)]
    for thread in adders + searchers:
        thread.start()
    for thread in adders:
        thread.join()
    adding_done.set()
    for thread in searchers:
        thread.join()

    assert errors == []
    ids = [item.id for item in memory.items()]
    assert len(ids) == 1600
    assert set(ids) == {f"{thread}-{n}" for thread in range(8) for n in range(200)}
    for thread in range(8):  # each thread's items stay in the order it added them
        own = [i for i in ids if i.startswith(f"{thread}-")]
        assert own == [f"{thread}-{n}" for n in range(200)]
    found = memory.search("thread 3 item 150", limit=20, recency_bias=0)
    assert "3-150" in [hit["id"] for hit in found]


def test_timestamps_roles_and_metadata():
    memory = buffer()
    given = {"source": "chat"}
    iso = memory.add("a", given, role="user", timestamp="2024-05-01T12:00:00Z")
    from_metadata = memory.add("b", {"timestamp": 1700000000, "role": "assistant"})
    naive = memory.add("c", timestamp=datetime(2024, 5, 1, 12, 0))
    aware = memory.add("d", timestamp=datetime(2024, 5, 1, 12, 0, tzinfo=UTC))
    numeric_text = memory.add("e", timestamp="1700000000.5")

    assert iso.timestamp == naive.timestamp == aware.timestamp == 1714564800.0
    assert iso.metadata == {"source": "chat", "role": "user", "timestamp": 1714564800.0}
    assert given == {"source": "chat"}  # the caller's dict is copied, not changed
    assert (from_metadata.role, from_metadata.timestamp) == ("assistant", 1700000000.0)
    assert numeric_text.timestamp == 1700000000.5
    assert memory.search(filter_metadata={"role": "user"})[0]["content"] == "a"
    assert memory.search(limit=1)[0].keys() == {
        "id",
        "content",
        "metadata",
        "role",
        "timestamp",
        "score",
        "semantic",
        "recency",
    }


def test_an_existing_id_is_replaced_and_remove_drops_an_item():
    memory = buffer(model=WordsModel())
    memory.add("first draft", id="m1")
    memory.add("other", id="m2")
    memory.add("second draft", id="m1")

    assert [(item.id, item.content) for item in memory.items()] == [
        ("m2", "other"),
        ("m1", "second draft"),
    ]
    assert [hit["content"] for hit in memory.search("draft", recency_bias=0)][0] == "second draft"
    assert memory.remove("m2") is True
    assert memory.remove("m2") is False
    assert [hit["id"] for hit in memory.search("other")] == ["m1"]
    memory.clear()
    assert len(memory) == 0
    assert memory.search("draft") == []


def test_recent_returns_the_window_oldest_first():
    memory = buffer(max_size=3, buffer_multiplier=4)
    assert memory.recent() == []
    for n in range(10):
        memory.add(str(n))

    assert [item.content for item in memory.recent()] == ["7", "8", "9"]
    assert [item.content for item in memory.recent(5)] == ["5", "6", "7", "8", "9"]
    assert [item.content for item in memory.recent(50)] == [str(n) for n in range(10)]
    assert memory.recent(0) == []


def test_async_variants():
    memory = buffer(model=WordsModel())

    async def scenario() -> tuple[list[dict], BufferSearch]:
        await memory.aadd("the train leaves at noon", {"user": "a"}, role="user")
        await memory.aadd_many([{"content": "lunch was soup"}, {"content": "rainy weather"}])
        plain = await memory.asearch("train at noon", limit=1, recency_bias=0)
        detailed = await memory.asearch_detailed("soup", filter_metadata={"user": "a"})
        return plain, detailed

    plain, detailed = asyncio.run(scenario())

    assert plain[0]["content"] == "the train leaves at noon"
    assert [hit.item.content for hit in detailed.hits] == ["the train leaves at noon"]
    assert len(memory) == 3


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"max_size": 0}, "max_size"),
        ({"buffer_multiplier": 0}, "buffer_multiplier"),
        ({"vector_dimension": 0}, "vector_dimension"),
        ({"recency_bias": 1.5}, "recency_bias"),
        ({"recency_bias": -0.1}, "recency_bias"),
        ({"max_size": 2.5}, "max_size"),
    ],
)
def test_bad_settings_raise(settings, named):
    with pytest.raises(ValueError, match=named):
        BufferMemory(**settings)


def test_bad_arguments_raise():
    memory = BufferMemory(vector_dimension=3)
    memory.add("x", vector=[1, 0, 0])

    for call, named in [
        (lambda: memory.search("x", limit=0), "limit"),
        (lambda: memory.search("x", recency_bias=2), "recency_bias"),
        (lambda: memory.search(query_vector=[1, 0]), "query_vector"),
        (lambda: memory.search(query_vector=[0, 0, 0]), "query_vector"),
        (lambda: memory.add("y", vector=[1, 0]), "vector"),
        (lambda: memory.add("y", vector=[float("nan"), 0, 1]), "vector"),
        (lambda: memory.add("y", vector=["a", "b", "c"]), "vector"),
        (lambda: memory.add("y", timestamp="tuesday"), "timestamp"),
        (lambda: memory.add("y", timestamp=float("inf")), "timestamp"),
        (lambda: memory.add(42), "content"),
        (lambda: memory.add("y", id=""), "id"),
        (lambda: memory.recent(-1), "n must"),
    ]:
        with pytest.raises(ValueError, match=named):
            call()
    assert len(memory) == 1


def test_the_module_imports_without_django():
    root = Path(__file__).resolve().parents[3]  # the checkout
    script = (
        "import sys, memories.providers.buffer_memory; "
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework')]; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", script], cwd=root, check=True)


def test_the_score_is_cosine_and_recency_from_the_newest_not_muxis_literal_text():
    """MUXI's text writes semantic as 1/(1+L2) and recency as 1 - idx/len; read with idx
    from the oldest, that ranks the oldest message first. The buffer keeps cosine
    similarity and recency 1 for the newest (issue 42 agreed it is the intent)."""
    memory = buffer(max_size=2, buffer_multiplier=2, model=WordsModel())
    for text in ("alpha beta", "gamma delta", "alpha beta", "omega sigma"):
        memory.add(text)
    found = memory.search("alpha beta", limit=4, recency_bias=0.0)
    semantic = {hit["content"]: round(hit["semantic"], 6) for hit in found}
    assert semantic["alpha beta"] == 1.0
    assert semantic["omega sigma"] == 0.0  # orthogonal: 1/(1+L2) would say 0.41
    by_recency = memory.search("alpha beta", limit=4, recency_bias=1.0)
    assert [hit["content"] for hit in by_recency] == [
        "omega sigma",
        "alpha beta",
        "gamma delta",
        "alpha beta",
    ]
    assert [hit["recency"] for hit in by_recency] == [1.0, 2 / 3, 1 / 3, 0.0]
