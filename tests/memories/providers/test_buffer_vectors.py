"""BufferMemory's vectors (memories/providers/buffer_vectors.py, through the buffer):
semantic ranking by the formula, unit float32 vectors, items without one scored by
recency, a failing or wrong model, batches."""

import numpy as np
import pytest

from memories.providers.buffer_memory import BufferMemory
from tests.memories.providers.buffer_models import DIMENSION, DownModel, WordsModel, buffer


def test_semantic_search_puts_the_matching_item_first():
    memory = buffer(model=WordsModel())
    memory.add("the cat sat on the mat")
    memory.add("stock market prices fell sharply today")
    memory.add("python is a programming language")

    found = memory.search_detailed("where did the cat sit? on the mat", limit=3)

    assert (found.method, found.reason, found.unembedded) == ("semantic", None, 0)
    assert found.hits[0].item.content == "the cat sat on the mat"
    assert found.hits[0].semantic > 0.5
    assert found.hits[0].recency == 0.0


@pytest.mark.parametrize(
    ("bias", "order", "scores"),
    [
        (0.0, ["x", "xy", "y"], [1.0, 0.5**0.5, 0.0]),
        (1.0, ["xy", "y", "x"], [1.0, 0.5, 0.0]),
        (0.3, ["xy", "x", "y"], [0.7 * 0.5**0.5 + 0.3, 0.7, 0.15]),
    ],
)
def test_scores_follow_the_formula(bias, order, scores):
    memory = BufferMemory(vector_dimension=2, recency_bias=bias)
    memory.add("x", vector=[3.0, 0.0], id="x")  # recency 0.0, semantic 1
    memory.add("y", vector=[0.0, 1.0], id="y")  # recency 0.5, semantic 0
    memory.add("xy", vector=[1.0, 1.0], id="xy")  # recency 1.0, semantic 1/sqrt(2)

    found = memory.search_detailed(query_vector=[2.0, 0.0])

    assert [hit.item.id for hit in found.hits] == order
    assert [hit.score for hit in found.hits] == pytest.approx(scores, abs=1e-6)
    assert [hit.recency for hit in found.hits] == [
        {"x": 0.0, "y": 0.5, "xy": 1.0}[name] for name in order
    ]
    # the per-search bias overrides the buffer's
    other = 1.0 if bias != 1.0 else 0.0
    overridden = memory.search(query_vector=[1.0, 0.0], recency_bias=other)
    assert overridden[0]["id"] == ("xy" if other == 1.0 else "x")


def test_vectors_are_stored_as_unit_float32():
    memory = BufferMemory(vector_dimension=3)
    item = memory.add("v", vector=np.array([3.0, 0.0, 4.0]))

    assert item.vector.dtype == np.float32
    assert item.vector.tolist() == pytest.approx([0.6, 0.0, 0.8])
    with pytest.raises(ValueError):
        item.vector[0] = 1.0  # read-only: the buffer's index holds the same numbers


def test_items_without_a_vector_are_scored_by_recency_and_counted():
    memory = buffer(model=WordsModel(fail_on="secret"))
    memory.add("red apples and green apples", {"user": "a"})
    memory.add("a secret about apples", {"user": "a"})  # the model fails: stored unembedded
    memory.add("blue sky", {"user": "b"})
    memory.model = None
    memory.add("apples again, unembedded", {"user": "b"})  # no model: stored unembedded
    memory.model = WordsModel()

    found = memory.search_detailed("apples", limit=4)

    assert found.method == "semantic"
    assert found.unembedded == 2
    by_content = {hit.item.content: hit for hit in found.hits}
    secret = by_content["a secret about apples"]
    assert secret.item.vector is None
    assert secret.semantic is None
    assert secret.score == secret.recency == pytest.approx(1 / 3)
    assert by_content["apples again, unembedded"].score == 1.0
    assert by_content["red apples and green apples"].semantic > 0.5
    assert memory.search_detailed("apples", filter_metadata={"user": "a"}).unembedded == 1


def test_a_failing_model_falls_back_to_recency_with_the_reason():
    memory = buffer(model=DownModel())
    first = memory.add("first")  # never raises for the model
    memory.add("second")

    found = memory.search_detailed("first")

    assert first.vector is None
    assert found.method == "recency"
    assert found.reason == "model failed: embedding service down"
    assert [hit.item.content for hit in found.hits] == ["second", "first"]
    assert found.unembedded == 2


def test_a_model_returning_the_wrong_dimension_counts_as_failing():
    memory = BufferMemory(vector_dimension=8, model=WordsModel())  # the model gives 64 numbers
    assert memory.add("hello").vector is None
    found = memory.search_detailed("hello")
    assert found.method == "recency"
    assert found.reason.startswith("model failed: the model's vector must have 8 numbers")


def test_add_many_embeds_missing_vectors_in_one_batch():
    model = WordsModel()
    memory = buffer(max_size=2, buffer_multiplier=2, model=model)

    added = memory.add_many(
        [
            {"content": "one", "id": "1"},
            {"content": "two", "vector": [1.0] + [0.0] * (DIMENSION - 1), "role": "user"},
            {"content": "three", "metadata": {"k": "v"}},
            {"content": "four"},
            {"content": "five"},
        ]
    )

    assert model.batches == [["one", "three", "four", "five"]]
    assert model.single == []
    assert all(item.vector is not None for item in added)
    assert [item.content for item in memory.items()] == ["two", "three", "four", "five"]
    assert added[1].role == "user"


def test_add_many_checks_every_item_before_adding_any():
    memory = buffer()
    with pytest.raises(ValueError, match=r"items\[1\].*unknown: colour"):
        memory.add_many([{"content": "ok"}, {"content": "bad", "colour": "red"}])
    with pytest.raises(ValueError, match="timestamp"):
        memory.add_many([{"content": "ok"}, {"content": "bad", "timestamp": "yesterday"}])
    assert len(memory) == 0


def test_a_failing_batch_stores_the_items_without_vectors():
    memory = buffer(model=WordsModel(fail_on="boom"))
    added = memory.add_many([{"content": "fine"}, {"content": "boom"}])
    assert [item.vector for item in added] == [None, None]
    assert len(memory) == 2
