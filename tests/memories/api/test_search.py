"""Search: auto, vector, keyword and hybrid modes with the real local model, filters,
k and threshold, explain, raw embeddings, validation, tenants (the scan paths and auto's
neighbours: test_search_paths.py)."""

import pytest

from memories.api.search import search_payload
from memories.api.search_serializers import SearchOutputSerializer
from memories.models import EndUser, Memory
from memories.providers.embeddings import get_provider
from memories.services.importance import importance_recompute
from memories.services.search import SearchFilters, memory_search
from tests.conftest import embed_pending
from tests.memories.api.search_calls import (
    ALICE,
    SEARCH,
    corpus_make,
    search,
    search_settings,
    top,
)


@pytest.fixture
def corpus(owner):
    return corpus_make(owner)


@pytest.mark.parametrize(
    "query, expected",
    [
        ("which instrument am I practising?", "I am learning to play the violin"),
        ("what do I like to eat?", "My favourite food is spicy Thai green curry"),
        ("winter holiday in the mountains", "We went skiing in the Alps last March"),
        ("what is my job?", "I work as a nurse at the general hospital in Boston"),
    ],
)
def test_vector_mode_finds_a_paraphrase(corpus, query, expected):
    result = search(corpus, query=query, mode="vector", user="alice", k=3)
    assert result["mode"] == "vector"
    assert top(result)[0] == expected


def test_keyword_mode_finds_the_word(corpus):
    assert top(search(corpus, query="Whiskers", mode="keyword")) == ["My cat is called Whiskers"]
    assert top(search(corpus, query="nurses", mode="keyword"))[0].startswith("I work as a nurse")


def test_keyword_mode_has_or_semantics(corpus):
    # most words of a natural question appear in no memory: an AND query would match nothing
    result = search(corpus, query="Where exactly does my sister live these days?", mode="keyword")
    assert top(result)[0] == "My sister lives in Toronto with her two kids"


def test_keyword_mode_finds_nothing_for_unknown_words(corpus):
    assert search(corpus, query="xylophone quantum", mode="keyword")["results"] == []


@pytest.mark.parametrize(
    "query, expected",
    [
        ("Thai curry recipe", "My favourite food is spicy Thai green curry"),
        ("which instrument am I practising?", "I am learning to play the violin"),
        ("Toronto", "My sister lives in Toronto with her two kids"),
    ],
)
@pytest.mark.parametrize("mode", ["hybrid", "auto"])
def test_fused_modes(corpus, query, expected, mode):
    result = search(corpus, query=query, user="alice", mode=mode)
    assert result["mode"] == mode
    assert top(result)[0] == expected


def test_auto_is_the_default_mode(corpus):
    result = search(corpus, query="Toronto", user="alice", explain=True)
    assert result["mode"] == "auto"
    assert {"base", "neighbours", "fused", "keyword_norm"} <= result["results"][0]["explain"].keys()


def test_a_request_without_mode_uses_the_projects_default_mode(corpus):
    search_settings(corpus, default_mode="keyword")
    result = search(corpus, query="Whiskers", user="alice")
    assert result["mode"] == "keyword"
    # keyword mode returns only memories holding the word; auto would fill k with others
    assert top(result) == ["My cat is called Whiskers"]
    assert len(search(corpus, query="Whiskers", user="alice", mode="auto")["results"]) > 1
    # nothing to find: still the mode that would have been used
    assert search(corpus, query="Whiskers", user="nobody") == {
        "mode": "keyword",
        "results": [],
        "timings_ms": {},
    }
    response = corpus.client.post(SEARCH, {"embedding": [0.1] * 384})
    assert response.status_code == 400
    assert "query" in response.json()


def test_search_settings_of_one_project_change_its_ranking_only(owner, outsider):
    """Both projects hold the same memories; only the owner weighs BM25 alone. "cat" and
    "Alps" each match one memory; the cat's is the shorter, so BM25 prefers it, while
    the cosine signal prefers the Alps (the default ranking)."""
    for tenant in (owner, outsider):
        items = [{"user": "alice", "content": text} for text in ALICE]
        assert tenant.client.post("/api/v1/memories/batch/", {"memories": items}).status_code == 201
    embed_pending()
    query = {"query": "cat Alps", "user": "alice", "mode": "auto", "k": 3}
    default = top(search(owner, **query))
    assert default[0] == "We went skiing in the Alps last March"
    assert top(search(outsider, **query)) == default

    search_settings(owner, keyword_weight=1.0)
    assert top(search(owner, **query))[:2] == [
        "My cat is called Whiskers",
        "We went skiing in the Alps last March",
    ]
    assert top(search(outsider, **query)) == default


def test_hybrid_fuses_ranks_with_the_projects_rrf_k(corpus):
    search_settings(corpus, rrf_k=20)
    hit = search(corpus, query="Whiskers the cat", user="alice", mode="hybrid", explain=True)
    explain = hit["results"][0]["explain"]
    assert explain["vector_rank"] == 1 and explain["keyword_rank"] == 1
    assert explain["rrf"] == pytest.approx(2 / 21)
    assert hit["results"][0]["score"] == pytest.approx(1.0)  # first in both lists


def test_keyword_scores_use_the_projects_bm25_parameters(corpus):
    """Two matches of different lengths, equally rare words: b weighs the length."""
    query = {"query": "cat Toronto", "user": "alice", "mode": "keyword", "explain": True}

    def scores():
        hits = search(corpus, **query)["results"]
        return {hit["memory"]["content"]: hit["explain"]["keyword_score"] for hit in hits}

    default = scores()
    assert len(default) == 2
    assert (
        default["My cat is called Whiskers"]
        > default["My sister lives in Toronto with her two kids"]
    )  # the shorter memory
    search_settings(corpus, bm25_b=0.0)
    unweighted = scores()
    assert unweighted["My cat is called Whiskers"] == pytest.approx(
        unweighted["My sister lives in Toronto with her two kids"]
    )


def test_importance_weight_ranks_by_importance(corpus):
    nurse = Memory.objects.get(content__startswith="I work as a nurse")
    Memory.objects.filter(pk=nurse.pk).update(importance=1.0)
    Memory.objects.filter(project=corpus.project).exclude(pk=nurse.pk).update(importance=0.0)
    importance_recompute(project=corpus.project)  # search reads the importance score
    query = {"query": "Whiskers the cat", "user": "alice", "explain": True}
    assert top(search(corpus, **query))[0] == "My cat is called Whiskers"
    search_settings(corpus, importance_weight=1.0)
    result = search(corpus, **query)
    assert top(result)[0] == nurse.content
    assert result["results"][0]["explain"]["weights"] == {"recency": 0.0, "importance": 1.0}


def test_timings_of_each_step(corpus):
    timings = search(corpus, query="Toronto", user="alice", mode="auto")["timings_ms"]
    # (a small set's neighbouring turns come with the vector step: no step of their own)
    steps = {"count", "keyword", "vector", "embed_query", "embed_wait", "rank", "load", "total"}
    assert steps <= timings.keys()
    assert all(value >= 0 for value in timings.values())
    assert "keyword" not in search(corpus, query="Toronto", mode="vector")["timings_ms"]


class TestFilters:
    def test_user(self, corpus):
        assert top(search(corpus, query="what is the name of my pet?", mode="vector", k=1)) == [
            "My dog is called Rex"
        ]
        result = search(corpus, query="what is the name of my pet?", mode="vector", user="alice")
        assert top(result)[0] == "My cat is called Whiskers"
        assert all(hit["memory"]["user"] == "alice" for hit in result["results"])
        assert search(corpus, query="pet", user="nobody")["results"] == []

    def test_room(self, corpus):
        result = search(corpus, query="pet name", room="work")
        assert top(result) == ["My dog is called Rex"]

    def test_kind(self, corpus):
        corpus.client.post(
            "/api/v1/memories/", {"user": "alice", "kind": "fact", "content": "Alice owns a cat"}
        )
        embed_pending()
        result = search(corpus, query="cat", kind=["fact"], user="alice")
        assert top(result) == ["Alice owns a cat"]
        assert len(search(corpus, query="cat", kind=["message", "fact"])["results"]) > 1

    def test_metadata_containment(self, corpus):
        corpus.client.post(
            "/api/v1/memories/",
            {"user": "alice", "content": "The cat needs a vet visit", "metadata": {"tag": "todo"}},
        )
        embed_pending()
        result = search(corpus, query="cat", metadata={"tag": "todo"}, mode="vector")
        assert top(result) == ["The cat needs a vet visit"]
        assert search(corpus, query="cat", metadata={"tag": "done"})["results"] == []

    def test_start_and_end(self, corpus):
        for when, text in [
            ("2020-01-01T00:00:00Z", "old cat"),
            ("2030-01-01T00:00:00Z", "future cat"),
        ]:
            corpus.client.post("/api/v1/memories/", {"content": text, "created_at": when})
        embed_pending()
        before = search(corpus, query="cat", end="2021-01-01T00:00:00Z")
        assert top(before) == ["old cat"]
        after = search(corpus, query="cat", start="2029-01-01T00:00:00Z", mode="vector")
        assert top(after) == ["future cat"]

    def test_archived_memories_are_not_found(self, corpus):
        cat = Memory.objects.get(content="My cat is called Whiskers")
        corpus.client.patch(f"/api/v1/memories/{cat.pk}/", {"status": "archived"})
        assert "My cat is called Whiskers" not in top(search(corpus, query="Whiskers the cat"))


def test_k_is_respected(corpus):
    assert len(search(corpus, query="my life", mode="vector", k=2)["results"]) == 2
    assert len(search(corpus, query="my life", k=3)["results"]) == 3
    assert len(search(corpus, query="my life", mode="vector", k=50)["results"]) == 7


def test_threshold_drops_dissimilar_memories(corpus):
    query = "which instrument am I practising?"
    everything = search(corpus, query=query, mode="vector", k=10)["results"]
    assert len(everything) == 7
    result = search(corpus, query=query, mode="vector", k=10, threshold=0.5)
    assert top(result) == ["I am learning to play the violin"]
    assert all(hit["similarity"] >= 0.5 for hit in result["results"])


def test_explain_returns_each_signal(corpus):
    result = search(corpus, query="Whiskers the cat", user="alice", explain=True)
    hit = result["results"][0]
    assert hit["memory"]["content"] == "My cat is called Whiskers"
    explain = hit["explain"]
    for name in ["vector_rank", "vector_similarity", "keyword_rank", "keyword_score", "rrf"]:
        assert name in explain
    assert explain["vector_rank"] == 1 and explain["keyword_rank"] == 1
    assert explain["rrf"] == pytest.approx(2 / 61)
    assert "explain" not in search(corpus, query="cat")["results"][0]


def test_similarity_is_between_0_and_1_and_scores_are_ordered(corpus):
    for mode in ["vector", "hybrid"]:
        hits = search(corpus, query="xylophone quantum zebra", mode=mode, k=10)["results"]
        assert hits
        assert all(0.0 <= hit["similarity"] <= 1.0 for hit in hits)
        scores = [hit["score"] for hit in hits]
        assert scores == sorted(scores, reverse=True)


def test_raw_embedding_query(corpus):
    vector = get_provider().embed(["what is the name of my pet?"])[0].tolist()
    result = search(corpus, embedding=vector, mode="vector", user="alice", k=1)
    assert top(result) == ["My cat is called Whiskers"]
    assert result["results"][0]["similarity"] > 0.5
    # hybrid with only a vector: the vector signal alone
    assert top(search(corpus, embedding=vector, user="alice", k=1)) == ["My cat is called Whiskers"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"embedding": [0.1] * 10, "mode": "vector"}, "embedding"),
        ({"embedding": [], "mode": "vector"}, "embedding"),
        ({"embedding": ["a"] * 384, "mode": "vector"}, "embedding"),
        ({"query": "cat", "k": 0}, "k"),
        ({"query": "cat", "k": 201}, "k"),
        ({"query": "cat", "k": "many"}, "k"),
        ({}, "query"),
        ({"query": "   "}, "query"),
        ({"mode": "keyword", "embedding": [0.1] * 384}, "query"),
        ({"query": "cat", "mode": "psychic"}, "mode"),
        ({"query": "cat", "threshold": 1.5}, "threshold"),
        ({"query": "cat", "metadata": ["tag"]}, "metadata"),
        ({"query": "cat", "metadata": {"tag": "\u0000"}}, "metadata"),
        ({"query": "cat", "kind": ["dream"]}, "kind"),
        ({"query": "cat", "start": "2024-02-01T00:00:00Z", "end": "2024-01-01T00:00:00Z"}, "end"),
    ],
)
def test_bad_input_is_400_naming_the_field(owner, body, field):
    response = owner.client.post(SEARCH, body)
    assert response.status_code == 400
    assert field in response.json(), response.json()


@pytest.mark.parametrize(
    "query",
    [
        "the and of",  # stop words only: no lexeme at all
        "'; DROP TABLE memories_memory; --",
        "C++ & Java | !(x) <-> :* 'quoted'",
        "well-known e-mail",
        "🙂 " * 500,
    ],
)
def test_any_query_text_is_safe(corpus, query):
    for mode in ["keyword", "hybrid"]:
        response = corpus.client.post(SEARCH, {"query": query, "mode": mode})
        assert response.status_code == 200, response.content
    assert Memory.objects.filter(project=corpus.project).count() == len(ALICE) + 1


def test_a_zero_vector_query_does_not_break_search(corpus):
    response = corpus.client.post(SEARCH, {"embedding": [0.0] * 384, "mode": "vector"})
    assert response.status_code == 200
    assert all(0.0 <= hit["similarity"] <= 1.0 for hit in response.json()["results"])


def test_max_k_follows_the_setting(owner, settings):
    settings.MEMORYHUB = {**settings.MEMORYHUB, "MAX_SEARCH_K": 5}
    response = owner.client.post(SEARCH, {"query": "cat", "k": 6})
    assert response.status_code == 400
    assert "5" in response.json()["k"][0]
    assert owner.client.post(SEARCH, {"query": "cat", "k": 5}).status_code == 200


def test_memories_not_yet_embedded_are_found_by_keyword_in_hybrid_mode(corpus):
    corpus.client.post("/api/v1/memories/", {"user": "alice", "content": "Bought a new kayak"})
    assert Memory.objects.get(content="Bought a new kayak").embedding_status == "pending"
    result = search(corpus, query="kayak", user="alice", explain=True)
    [hit] = [h for h in result["results"] if h["memory"]["content"] == "Bought a new kayak"]
    assert hit["similarity"] is None
    assert hit["explain"]["vector_rank"] is None
    assert hit["explain"]["keyword_rank"] == 1


class TestAcrossTenants:
    def test_outsider_never_finds_the_owners_memories(self, corpus, outsider):
        outsider.client.post("/api/v1/memories/", {"user": "alice", "content": "I have a hamster"})
        embed_pending()
        owner_ids = set(Memory.objects.filter(project=corpus.project).values_list("pk", flat=True))
        vector = get_provider().embed(["My cat is called Whiskers"])[0].tolist()
        for body in [
            {"query": "My cat is called Whiskers", "k": 50},
            {"query": "Whiskers", "mode": "keyword", "k": 50},
            {"query": "cat", "mode": "vector", "k": 50},
            {"embedding": vector, "mode": "vector", "k": 50},
            {"query": "cat", "user": "alice", "k": 50},
            {"query": "pet", "room": "home", "k": 50},
        ]:
            hits = search(outsider, **body)["results"]
            assert not {hit["memory"]["id"] for hit in hits} & {str(i) for i in owner_ids}
        assert top(search(outsider, query="pet", mode="vector")) == ["I have a hamster"]

    def test_read_only_key_searches_its_own_project(self, corpus):
        assert top(search_read_only(corpus, query="Whiskers", mode="keyword")) == [
            "My cat is called Whiskers"
        ]


def search_read_only(tenant, **body):
    response = tenant.read_client.post(SEARCH, body)
    assert response.status_code == 200
    return response.json()


def test_a_user_deleted_and_written_again_is_searched_at_once(corpus):
    """The user's row id a web process keeps for its searches (LOOKUP_CACHE_SECONDS)
    is forgotten when the user is deleted: the new alice's memory is found."""
    assert top(search(corpus, query="violin", mode="keyword", user="alice"))
    assert corpus.client.delete("/api/v1/users/alice/").status_code == 200
    assert search(corpus, query="violin", mode="keyword", user="alice")["results"] == []
    written = corpus.client.post("/api/v1/memories/", {"user": "alice", "content": "Cello now"})
    assert written.status_code == 201
    assert top(search(corpus, query="cello", mode="keyword", user="alice")) == ["Cello now"]


def test_the_response_is_what_its_documented_serializer_renders(corpus):
    alice = EndUser.objects.get(project=corpus.project, external_id="alice")
    for explain in (False, True):
        result = memory_search(
            project=corpus.project,
            query="a pet cat",
            filters=SearchFilters(end_user_id=alice.pk),
            k=3,
            explain=explain,
        )
        rendered = SearchOutputSerializer(result, context={"explain": explain}).data
        assert search_payload(result, explain) == rendered
        assert len(rendered["results"]) == 3 and ("explain" in rendered["results"][0]) == explain
