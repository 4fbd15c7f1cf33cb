"""Search's paths: auto's neighbouring turns, the exact, compact and index scans giving
the same ranking, a user with few memories among many still getting k, and how many
candidates each signal is asked for."""

import numpy as np
import pytest
from django.db import connection

from memories.models import Embedding, EndUser, Memory
from memories.services.embedding import embedding_space_get
from memories.services.search import candidate_limit
from tests.conftest import embed_pending, vector_search_plans
from tests.memories.api.search_calls import search, search_settings, top

CHAT = [
    ("assistant", "How are you today?"),
    ("user", "Guess what I finally bought last weekend?"),
    ("user", "A red vintage Vespa scooter"),
    ("assistant", "That sounds like a lot of fun"),
    ("user", "My brother works at the airport"),
    ("assistant", "Does he like it there?"),
]


@pytest.fixture
def chat(owner):
    """A conversation in which the answer to a question sits one turn after its match."""
    items = [
        {
            "user": "carol",
            "room": "c1",
            "role": role,
            "content": text,
            "created_at": f"2024-05-01T10:00:{second:02d}Z",
        }
        for second, (role, text) in enumerate(CHAT)
    ]
    items.append({"user": "carol", "room": "c2", "content": "What did I buy? Groceries, as always"})
    response = owner.client.post("/api/v1/memories/batch/", {"memories": items})
    assert response.status_code == 201
    embed_pending()
    return owner


def test_auto_raises_the_turn_next_to_a_match(chat):
    """'What did you buy last weekend?' matches the question turn; the answer follows it."""
    query = "what did carol buy last weekend"
    auto = top(search(chat, query=query, user="carol", mode="auto", k=3))
    assert "A red vintage Vespa scooter" in auto
    assert auto.index("A red vintage Vespa scooter") < 3
    explained = search(chat, query=query, user="carol", mode="auto", k=10, explain=True)
    by_text = {hit["memory"]["content"]: hit["explain"] for hit in explained["results"]}
    assert by_text["A red vintage Vespa scooter"]["neighbours"] > 0
    # the other room's turn gets nothing from this room's turns
    assert by_text["What did I buy? Groceries, as always"]["neighbours"] == 0


def test_auto_neighbour_weight_is_the_projects(chat):
    query = {"query": "what did carol buy last weekend", "user": "carol", "mode": "auto"}
    search_settings(chat, neighbour_weight=0.0)
    explained = search(chat, **query, k=10, explain=True)
    by_text = {hit["memory"]["content"]: hit["explain"] for hit in explained["results"]}
    assert by_text["A red vintage Vespa scooter"]["neighbours"] == 0
    assert (
        by_text["A red vintage Vespa scooter"]["fused"]
        == by_text["A red vintage Vespa scooter"]["base"]
    )


@pytest.mark.parametrize("mode", ["auto", "hybrid", "vector"])
@pytest.mark.parametrize("user", ["carol", None])
def test_index_path_ranks_like_the_exact_path(chat, settings, mode, user):
    """A small filtered set is scanned exactly (vector, neighbours and distances in one
    query); a large one goes through the index and separate queries. On a set the
    index returns whole, both must give the same hits, scores and similarities."""
    # k 3 and one candidate per k: keyword hits and neighbours outside the vector top 3
    # need their distances looked up
    settings.RETRIEVAL = {**settings.RETRIEVAL, "CANDIDATE_MULTIPLIER": 1}
    query = {"query": "what did carol buy last weekend", "mode": mode, "k": 3, "explain": True}
    if user:
        query["user"] = user

    def ranking():
        return [
            (
                hit["memory"]["content"],
                round(hit["score"], 6),
                hit["similarity"] and round(hit["similarity"], 6),
                hit["explain"].get("neighbours"),
            )
            for hit in search(chat, **query)["results"]
        ]

    exact = ranking()
    settings.RETRIEVAL = {
        **settings.RETRIEVAL,
        "EXACT_SCAN_MAX_ROWS": 0,
        "COMPACT_SCAN_MIN_ROWS": 0,
    }
    assert ranking() == exact  # the compact scan when a user is named, else the index
    settings.RETRIEVAL = {**settings.RETRIEVAL, "COMPACT_SCAN_MAX_ROWS": 0}
    assert ranking() == exact  # the index
    assert len(exact) == 3
    if mode != "vector":
        assert all(similarity for _, _, similarity, _ in exact)
    if mode == "auto":
        assert any(neighbours for *_, neighbours in exact)


def test_auto_neighbours_respect_the_filters(chat):
    result = search(
        chat,
        query="what did carol buy last weekend",
        user="carol",
        mode="auto",
        k=10,
        end="2024-05-01T10:00:02Z",
    )
    assert "A red vintage Vespa scooter" not in top(result)
    assert top(result)[0] == "Guess what I finally bought last weekend?"


def _unit(vector):
    return vector / np.linalg.norm(vector)


def _crowd_and_few(project, space):
    """400 memories of "crowd" near a random query, 5 of "few" anywhere: the query."""
    rng = np.random.default_rng(7)
    query = _unit(rng.normal(size=space.dimension))
    crowd = EndUser.objects.create(project=project, external_id="crowd")
    few = EndUser.objects.create(project=project, external_id="few")
    memories, vectors = [], []
    for n in range(405):
        memories.append(
            Memory(
                project=project,
                end_user=crowd if n < 400 else few,
                content=f"memory {n}",
                content_hash=f"{n:064d}",
                embedding_status="done",
            )
        )
        noise = _unit(rng.normal(size=space.dimension))
        vectors.append(_unit(query + 0.5 * noise) if n < 400 else noise)
    Memory.objects.bulk_create(memories)
    Embedding.objects.bulk_create(
        Embedding(memory=m, space=space, vector=v) for m, v in zip(memories, vectors, strict=True)
    )
    return query


@pytest.mark.parametrize(
    ("exact_scan_max_rows", "compact_scan_max_rows"),
    [(5_000, 200_000), (0, 200_000), (0, 0)],
    ids=["exact-scan", "compact-scan", "hnsw-iterative"],
)
def test_a_user_with_few_memories_among_many_still_gets_k(
    owner, settings, exact_scan_max_rows, compact_scan_max_rows
):
    """The crowd's 400 memories are all nearer the query than the few user's 5: a filtered
    HNSW scan that stopped at ef_search rows would return none of them."""
    settings.RETRIEVAL = {
        **settings.RETRIEVAL,
        "EXACT_SCAN_MAX_ROWS": exact_scan_max_rows,
        "COMPACT_SCAN_MIN_ROWS": exact_scan_max_rows,
        "COMPACT_SCAN_MAX_ROWS": compact_scan_max_rows,
    }
    hnsw = compact_scan_max_rows == 0
    space = embedding_space_get()
    query = _crowd_and_few(owner.project, space)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
        cursor.execute("ANALYZE memories_embedding")
        if hnsw:
            # on a table this small the planner would rather sort: make it walk the graph
            cursor.execute("SET LOCAL enable_sort = off")

    result, [plan] = vector_search_plans(
        lambda: search(owner, embedding=query.tolist(), mode="vector", user="few", k=5)
    )
    # the path under test is the one taken
    assert (space.index_name in plan) is hnsw, plan
    assert ("embedding_owner_bits" in plan) is (exact_scan_max_rows == 0 and not hnsw), plan
    assert sorted(top(result)) == [f"memory {n}" for n in range(400, 405)]
    assert (
        len(search(owner, embedding=query.tolist(), mode="vector", user="crowd", k=7)["results"])
        == 7
    )


@pytest.mark.parametrize(
    ("mode", "k", "threshold", "limit"),
    [
        ("auto", 10, None, 40),
        ("auto", 40, None, 160),
        ("auto", 100, None, 220),
        ("hybrid", 200, None, 320),
        ("vector", 100, None, 100),
        ("vector", 10, 0.5, 40),
    ],
)
def test_the_candidates_per_signal_grow_by_one_past_the_multiplied_results(
    settings, mode, k, threshold, limit
):
    settings.RETRIEVAL = {
        **settings.RETRIEVAL,
        "CANDIDATE_MULTIPLIER": 4,
        "CANDIDATE_MULTIPLIED_K": 40,
    }
    assert candidate_limit(mode=mode, k=k, threshold=threshold) == limit
