"""A memory written with its own vector (`embedding` on a create or a batch item): stored
as given, `done` at once without a worker, found by vector search; a bad vector is a 400
naming the field that writes nothing; retries, `unique` and a model switch."""

import json

import numpy as np
import pytest

from memories.models import Embedding, EndUser, Memory, MemoryRevision
from memories.providers.embeddings import get_provider
from memories.services import stored
from memories.services.embedding import embedding_enqueue
from memories.services.embedding_spaces import default_space
from memories.services.embedding_switch import embedding_switch_run, embedding_switch_start
from memories.services.projects import api_keys_forget
from memories.services.revisions import Actor
from tests.conftest import embed_pending
from tests.memories.api.memory_calls import BATCH, MEMORIES, batch
from tests.memories.api.search_calls import search, top
from tests.memories.embedding_server import EmbeddingServer

DIMENSION = 384
CAT = "I adopted a grey cat called Whiskers"


def model_vector(text):
    """The configured model's vector of ``text`` (what a client with the same model sends)."""
    return [float(x) for x in get_provider().embed([text])[0]]


def stored_vectors(memory_id):
    rows = Embedding.objects.filter(memory__public_id=memory_id).order_by("window")
    return [(row.space_id, row.window, np.asarray(row.vector, dtype=np.float32)) for row in rows]


def row_counts():
    return [model.objects.count() for model in (Memory, Embedding, EndUser, MemoryRevision)]


def test_a_memory_with_its_own_vector_is_done_at_once_and_no_worker_is_asked(
    owner, django_capture_on_commit_callbacks
):
    given = model_vector("Paris is the capital of France")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = owner.client.post(
            MEMORIES, {"user": "alice", "content": CAT, "embedding": given}
        )
    assert response.status_code == 201, response.json()
    memory = response.json()["memory"]
    assert memory["embedding_status"] == "done"
    assert embedding_enqueue not in callbacks
    [(space_id, window, vector)] = stored_vectors(memory["id"])
    assert (space_id, window) == (default_space().pk, 0)
    np.testing.assert_array_equal(vector, np.asarray(given, dtype=np.float32))
    assert Memory.objects.get(public_id=memory["id"]).embedded_at is not None
    # the response is a memory as any create returns, without the vector
    plain = owner.client.post(MEMORIES, {"user": "alice", "content": "I like tea"}).json()
    assert memory.keys() == plain["memory"].keys()
    assert "embedding" not in memory


def test_the_vector_search_finds_it_by_its_own_vector_not_its_text(owner):
    """The text is about a cat, the vector about Paris: a search for the French capital
    finds it first, before a memory about Paris embedded by the worker from its text."""
    owner.client.post(
        MEMORIES,
        {"user": "alice", "content": CAT, "embedding": model_vector("Paris, capital of France")},
    )
    paris = "We spent a long weekend in Paris in May"
    owner.client.post(MEMORIES, {"user": "alice", "content": paris})
    assert embed_pending() == 1  # the one without a vector: the worker's
    result = search(owner, query="the capital city of France", mode="vector", user="alice", k=2)
    assert top(result) == [CAT, paris]
    assert result["results"][0]["similarity"] > 0.8
    assert top(search(owner, query="Whiskers", mode="keyword")) == [CAT]  # its text too


def test_a_batch_stores_the_vectors_given_and_queues_work_only_for_the_others(
    owner, django_capture_on_commit_callbacks
):
    items = [
        {"user": "alice", "content": CAT, "embedding": model_vector(CAT)},
        {"user": "alice", "content": "We flew to Lisbon in May", "embedding": None},
        {"user": "bob", "content": "My dog is called Rex", "embedding": model_vector("dog Rex")},
    ]
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = batch(owner, items)
    assert response.status_code == 201, response.json()
    statuses = [r["memory"]["embedding_status"] for r in response.json()["results"]]
    assert statuses == ["done", "pending", "done"]
    assert [c for c in callbacks if c is embedding_enqueue] == [embedding_enqueue]
    assert embed_pending() == 1
    assert Embedding.objects.count() == 3

    every_one_given = [
        {
            "user": "alice",
            "content": "Whiskers sleeps on the piano",
            "embedding": items[0]["embedding"],
        },
        {"user": "bob", "content": "Rex chews my shoes", "embedding": items[2]["embedding"]},
    ]
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert batch(owner, every_one_given).status_code == 201
    assert embedding_enqueue not in callbacks


def _vector_text(first):
    """A JSON vector of DIMENSION numbers whose first one is written ``first``."""
    return "[" + ", ".join([first] + ["0.5"] * (DIMENSION - 1)) + "]"


BAD_VECTORS = {
    "one number short": "[" + ", ".join(["0.5"] * (DIMENSION - 1)) + "]",
    "one number more": "[" + ", ".join(["0.5"] * (DIMENSION + 1)) + "]",
    "another model's 768": "[" + ", ".join(["0.5"] * 768) + "]",
    "empty": "[]",
    "NaN as text": _vector_text('"NaN"'),
    "Infinity as text": _vector_text('"Infinity"'),
    "inf (a double's overflow)": _vector_text("1e400"),
    "-inf": _vector_text("-1e400"),
    "beyond float32": _vector_text("3.5e38"),
    "a word": _vector_text('"abc"'),
    "a number as text": _vector_text('"0.5"'),
    "a boolean": _vector_text("true"),
    "null in it": _vector_text("null"),
    "a list in it": _vector_text("[0.5]"),
    "all zeros": "[" + ", ".join(["0"] * DIMENSION) + "]",
    "not a list": '"0.5, 0.5"',
    "an object": '{"0": 0.5}',
    "a number": "0.5",
}


@pytest.mark.parametrize("vector", BAD_VECTORS.values(), ids=BAD_VECTORS.keys())
def test_a_bad_vector_is_400_naming_the_field_and_writes_nothing(owner, vector):
    before = row_counts()
    body = f'{{"user": "alice", "room": "r1", "content": "hi", "embedding": {vector}}}'
    response = owner.client.post(MEMORIES, body, content_type="application/json")
    assert response.status_code == 400, response.json()
    assert list(response.json()) == ["embedding"], response.json()
    assert row_counts() == before


def test_the_dimension_is_named_in_the_error(owner):
    response = owner.client.post(
        MEMORIES, {"content": "hi", "embedding": [0.5] * 10}, format="json"
    )
    assert response.json() == {
        "embedding": ["Expected 384 numbers (the project's embedding space's dimension), got 10."]
    }


def test_a_batch_with_one_bad_vector_names_the_item_and_writes_nothing(owner):
    before = row_counts()
    items = [
        {"user": "alice", "content": "fine", "embedding": model_vector("fine")},
        {"user": "alice", "content": "fine too"},
        {"user": "alice", "content": "bad", "embedding": [0.5] * (DIMENSION - 1)},
        {"user": "bob", "content": "fine again", "embedding": model_vector("again")},
    ]
    response = batch(owner, items)
    assert response.status_code == 400
    assert list(response.json()["memories"]) == ["2"]
    assert list(response.json()["memories"]["2"]) == ["embedding"]
    assert row_counts() == before
    body = json.dumps({"memories": [items[0], {**items[1], "embedding": [float("inf")] * 2}]})
    response = owner.client.post(
        BATCH, body.replace("Infinity", "1e400"), content_type="application/json"
    )
    assert response.status_code == 400
    assert list(response.json()["memories"]["1"]) == ["embedding"]
    assert row_counts() == before


def test_a_retry_with_the_same_idempotency_key_stores_one_memory_and_one_vector(
    owner, django_capture_on_commit_callbacks
):
    body = {"user": "alice", "content": CAT, "embedding": model_vector(CAT)}
    headers = {"HTTP_IDEMPOTENCY_KEY": "cat-1"}
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        first = owner.client.post(MEMORIES, body, **headers)
        again = owner.client.post(MEMORIES, body, **headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert first.json()["memory"]["embedding_status"] == "done"
    assert (Memory.objects.count(), Embedding.objects.count()) == (1, 1)
    assert embedding_enqueue not in callbacks


@pytest.mark.parametrize("retry_by", ["id", "unique"])
def test_a_retried_write_keeps_the_vector_it_was_stored_with(owner, retry_by):
    """The same client id, or a `unique` text already stored: the stored memory is
    returned (created False) and a different vector sent with the retry is ignored."""
    key = {"id": "7b0c1f0e-1d3c-4d0e-9a51-0c5e1b7d2f11"} if retry_by == "id" else {"unique": True}
    first = model_vector(CAT)
    body = {"user": "alice", "content": CAT, **key}
    response = owner.client.post(MEMORIES, {**body, "embedding": first})
    assert response.status_code == 201
    memory_id = response.json()["memory"]["id"]

    retried = owner.client.post(MEMORIES, {**body, "embedding": model_vector("Paris")})
    assert retried.status_code == 200
    assert retried.json()["created"] is False
    assert retried.json()["memory"]["id"] == memory_id
    assert retried.json()["memory"]["embedding_status"] == "done"
    [(_, _, vector)] = stored_vectors(memory_id)
    np.testing.assert_array_equal(vector, np.asarray(first, dtype=np.float32))
    # a repeat inside one batch too: one memory, the first item's vector
    items = [{**body, "content": "Rex", "embedding": first}, {**body, "content": "Rex"}]
    items[1]["embedding"] = model_vector("Paris")
    if retry_by == "id":
        items = [{**item, "id": "5d2f6a4e-8b1c-4c3e-a7f0-2e9b8c1d4a55"} for item in items]
    results = batch(owner, items).json()["results"]
    assert [r["created"] for r in results] == [True, False]
    assert Memory.objects.count() == 2 and Embedding.objects.count() == 2


def test_the_openapi_document_shows_the_field(owner):
    schema = owner.client.get("/api/schema/", {"format": "json"}).json()
    field = schema["components"]["schemas"]["MemoryInputRequest"]["properties"]["embedding"]
    assert field["type"] == "array"
    assert field["items"]["type"] == "number"
    assert "embedding_status done" in field["description"]
    assert "embedding" not in schema["components"]["schemas"]["MemoryInputRequest"]["required"]


def test_another_projects_write_of_the_same_text_is_embedded_by_its_model(owner, outsider):
    """A vector one project sent is its own: another project's memory of the same text
    gets the model's vector, not that one."""
    owner.client.post(MEMORIES, {"content": CAT, "embedding": model_vector("Paris, France")})
    response = outsider.client.post(MEMORIES, {"content": CAT})
    assert embed_pending() == 1
    [(_, _, vector)] = stored_vectors(response.json()["memory"]["id"])
    np.testing.assert_allclose(vector, model_vector(CAT), atol=1e-5)


@pytest.fixture(scope="module")
def endpoint_server():
    server = EmbeddingServer(dimension=32).start()
    yield server
    server.stop()


@pytest.fixture
def endpoint(settings, endpoint_server):
    """The "openai" model choice (32 numbers), served by the tests' embeddings endpoint."""
    endpoint_server.texts.clear()
    settings.EMBEDDING = {
        **settings.EMBEDDING,
        "API_URL": endpoint_server.base_url,
        "API_MODEL": "stub-embedder",
        "API_DIMENSION": 32,
    }
    return endpoint_server


def dimensions(memory_id):
    rows = Embedding.objects.filter(memory__public_id=memory_id).select_related("space")
    return sorted(row.space.dimension for row in rows)


@pytest.mark.django_db(transaction=True)
def test_during_a_model_switch_the_job_embeds_it_into_the_new_model(owner, endpoint, monkeypatch):
    """Accepted during a switch with the dimension the project serves from; the switch's
    job computes the new model's vector from the text and the flip waits for it; after
    the flip the project's new dimension is the one checked."""
    enqueued = []
    monkeypatch.setattr(stored, "embedding_enqueue", lambda: enqueued.append(1))
    actor = Actor.system("test")
    switch = embedding_switch_start(project=owner.project, model="openai", actor=actor, queue=False)
    response = owner.client.post(MEMORIES, {"content": CAT, "embedding": model_vector(CAT)})
    assert response.status_code == 201, response.json()
    memory_id = response.json()["memory"]["id"]
    assert response.json()["memory"]["embedding_status"] == "done"
    assert (dimensions(memory_id), enqueued) == ([384], [])
    refused = owner.client.post(MEMORIES, {"content": "x", "embedding": [0.5] * 32})
    assert list(refused.json()) == ["embedding"]

    assert embedding_switch_run(switch_id=switch.pk, max_seconds=None) == "completed"
    assert dimensions(memory_id) == [32, 384]
    assert endpoint.texts == [CAT]  # embedded by the job from its text

    api_keys_forget()  # the next request reads the project's new row
    refused = owner.client.post(MEMORIES, {"content": "x", "embedding": model_vector("x")})
    assert list(refused.json()) == ["embedding"]
    after = owner.client.post(MEMORIES, {"content": "Rex", "embedding": [0.5] * 32}).json()
    assert after["memory"]["embedding_status"] == "done"
    assert dimensions(after["memory"]["id"]) == [32]
    assert enqueued == [] and endpoint.texts == [CAT]
