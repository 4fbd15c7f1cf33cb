"""Auto mode's neighbour fusion: short turns are raised by their neighbours, a turn
larger than search.neighbour_max_bytes is ranked on its own text."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import memories.services.search as search
from memories.services.search import SearchFilters, memory_search
from memories.services.search.fusion import neighbour_fusion
from memories.services.search.query_embedding import query_embedding_start
from memories.services.search.signal import VectorRequest
from memories.services.search.vector import vector_signal_get
from tests.conftest import embed_pending

SHORT, LONG, OTHER = "short", "long", "other"


def parts_of(**bases):
    return {memory_id: {"base": base} for memory_id, base in bases.items()}


def test_only_short_turns_receive_the_neighbours_bonus():
    adjacent = {SHORT: {LONG}, LONG: {SHORT, OTHER}, OTHER: {LONG}}
    parts = parts_of(short=0.2, long=0.9, other=0.4)
    lengths = {SHORT: 40, LONG: 3000, OTHER: 1000}
    neighbour_fusion(adjacent, parts, beta=0.5, lengths=lengths, max_bytes=1000)
    assert parts[SHORT]["neighbours"] == pytest.approx(0.45)
    assert parts[SHORT]["fused"] == pytest.approx((0.2 + 0.45) / 2)
    assert parts[OTHER]["neighbours"] == pytest.approx(0.45)  # at the cap: still short
    assert parts[LONG]["neighbours"] == 0.0
    assert parts[LONG]["fused"] == pytest.approx(0.9 / 2)
    assert parts[LONG]["bytes"] == 3000.0


def test_no_cap_raises_every_turn_and_unknown_lengths_count_as_short():
    adjacent = {SHORT: {LONG}, LONG: {SHORT}}
    parts = parts_of(short=0.2, long=0.9)
    neighbour_fusion(adjacent, parts, beta=0.5, lengths={LONG: 3000}, max_bytes=0)
    assert parts[LONG]["neighbours"] == pytest.approx(0.1)
    parts = parts_of(short=0.2, long=0.9)
    neighbour_fusion(adjacent, parts, beta=0.5, lengths={LONG: 3000}, max_bytes=1000)
    assert parts[SHORT]["neighbours"] == pytest.approx(0.45)
    assert "bytes" not in parts[SHORT]


LONG_ANSWER = " ".join(
    f"Step {n}: compare the kayak's hull, paddle length and the price of a spray deck."
    for n in range(1, 20)
)  # about 1,500 characters


@pytest.fixture
def exchange(owner):
    """A short request about kayaks, a long answer, then a short follow-up."""
    turns = [
        ("user", "I want to buy my first sea kayak this summer"),
        ("assistant", LONG_ANSWER),
        ("user", "Thanks, I will visit the shop on Saturday"),
    ]
    items = [
        {
            "user": "dana",
            "room": "d1",
            "role": role,
            "content": text,
            "created_at": f"2024-05-01T10:00:{second:02d}Z",
        }
        for second, (role, text) in enumerate(turns)
    ]
    response = owner.client.post("/api/v1/memories/batch/", {"memories": items})
    assert response.status_code == 201
    embed_pending()
    return owner


def explained(tenant, query):
    result = memory_search(
        project=tenant.project,
        query=query,
        mode="auto",
        k=10,
        explain=True,
        filters=SearchFilters(end_user_id=tenant.project.end_users.get(external_id="dana").pk),
    )
    return {hit.memory.content: hit.explain for hit in result.hits}


def test_a_long_turn_is_not_raised_by_its_neighbours(exchange):
    by_text = explained(exchange, "buying a sea kayak")
    assert len(LONG_ANSWER) > 1000
    assert by_text[LONG_ANSWER]["neighbours"] == 0
    assert by_text[LONG_ANSWER]["bytes"] == len(LONG_ANSWER.encode())
    assert by_text[LONG_ANSWER]["fused"] == pytest.approx(by_text[LONG_ANSWER]["base"] / 1.6)
    short = by_text["Thanks, I will visit the shop on Saturday"]
    assert short["neighbours"] > 0


def test_the_cap_is_the_projects(exchange):
    exchange.project.settings = {"search": {"neighbour_max_bytes": 0}}
    exchange.project.save()
    by_text = explained(exchange, "buying a sea kayak")
    assert by_text[LONG_ANSWER]["neighbours"] > 0
    assert "bytes" not in by_text[LONG_ANSWER]  # no cap: lengths are not read


@pytest.fixture
def trips(owner):
    """Twelve turns about kayak trips in one room of dana's."""
    items = [
        {
            "user": "dana",
            "room": "d2",
            "role": "user",
            "content": f"kayak trip {n}: we paddled {n + 3} miles along the coast",
            "created_at": f"2024-05-02T10:00:{n:02d}Z",
        }
        for n in range(12)
    ]
    response = owner.client.post("/api/v1/memories/batch/", {"memories": items})
    assert response.status_code == 201
    embed_pending()
    return owner, SearchFilters(end_user_id=owner.project.end_users.get(external_id="dana").pk)


def test_the_keyword_candidates_neighbours_are_looked_up_for_the_first_only(
    trips, settings, monkeypatch
):
    """RETRIEVAL_LINKED_BEYOND_K: the first k + N keyword candidates are linked to their
    neighbouring turns, not all of them (-1: all). With the vector step after the
    keyword step, their links come in its statement."""
    tenant, filters = trips
    asked: list[list] = []
    vector_step = search.vector_signal_get

    def spy(request):
        asked.append(list(request.link_ids))
        signal = vector_step(request)
        assert set(request.link_ids) <= set(signal.links)  # each one's links came
        return signal

    monkeypatch.setattr(search, "vector_signal_get", spy)
    for beyond, linked in ((1, 3), (-1, 8)):  # k 2: 8 candidates of the 12 turns
        settings.RETRIEVAL = {**settings.RETRIEVAL, "LINKED_BEYOND_K": beyond}
        asked.clear()
        result = memory_search(
            project=tenant.project, query="kayak trip miles", mode="auto", k=2, filters=filters
        )
        assert len(result.hits) == 2
        assert len(asked[0]) == linked, beyond


def test_a_small_sets_auto_search_reads_the_words_and_the_neighbours_with_other_statements(
    trips,
):
    """The query's words come with the filtered set's count, the keyword candidates'
    neighbouring turns with the vector step's exact scan: four statements in all (count,
    keyword, vector, the winners), and what they found is what separate ones found."""
    tenant, filters = trips
    memory_search(project=tenant.project, query="kayak", mode="auto", k=3, filters=filters)
    with CaptureQueriesContext(connection) as captured:
        result = memory_search(
            project=tenant.project, query="kayak trip miles", mode="auto", k=3, filters=filters
        )
    statements = [" ".join(query["sql"].split()) for query in captured.captured_queries]
    # (ANALYZE's lexeme statistics are read once per ANALYZE: none has run here)
    statements = [sql for sql in statements if "FROM pg_stats" not in sql]
    assert len(statements) == 4, statements
    assert "count(*)" in statements[0] and "tsvector_to_array" in statements[0]
    assert "unnest(ARRAY[" in statements[2] or "unnest('{" in statements[2]  # the link ids
    assert len(result.hits) == 3
    assert all(hit.explain == {} for hit in result.hits)


@pytest.mark.parametrize("link_limit, linked", [(3, 3), (None, 8)])
def test_the_vector_candidates_neighbours_are_looked_up_for_the_first_only(
    trips, link_limit, linked
):
    tenant, filters = trips
    started = query_embedding_start("a long paddle on the coast", None, project=tenant.project)
    request = VectorRequest(
        project=tenant.project,
        space=started.space,
        query=started.wait({}),
        filters=filters,
        limit=8,
        size=12,
        linked=set(),
        distance_ids=[],
        link_limit=link_limit,
    )
    signal = vector_signal_get(request)
    assert len(signal.nearest) == 8
    assert len(signal.links) == linked
    assert set(signal.links) == {memory_id for memory_id, _ in signal.nearest[:linked]}
