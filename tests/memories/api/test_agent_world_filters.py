"""The `agent` and `world` filters (ElizaOS agentId, worldId; a memory's world is its
room's world_id) on list, count, search (every mode and scan path) and context: only the
right memories, nothing for an agent or world the project does not have, and another
project's agent or world of the same name never counts."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.models import EmbeddingSpace, EndUser, Memory
from memories.providers.embeddings import get_provider
from memories.services.search import SearchFilters, memory_search
from memories.services.search.codes import ADMIT_SEARCHES, codes_loads_wait, owner_codes_get
from tests.conftest import embed_pending
from tests.memories.api.memory_calls import BATCH, MEMORIES
from tests.memories.api.search_calls import SEARCH, search, top

ROOMS = {"r-alpha": "w1", "r-beta": "w1", "r-gamma": "w2"}
# (agent, room, text) of alice's memories: r-alpha and r-beta are world w1, r-gamma w2
WRITTEN = [
    ("eliza", "r-alpha", "Whiskers the cat naps on the sofa"),
    ("eliza", "r-gamma", "Whiskers the cat likes tuna"),
    ("other", "r-beta", "Whiskers the cat chased a moth"),
    ("other", "r-gamma", "Whiskers the cat hides under the bed"),
    (None, None, "Whiskers the cat is fourteen years old"),
]
# the outsider's: the same agent, room and world names
OUTSIDER = [("eliza", "r-alpha", "Whiskers the cat belongs to the outsider")]

CASES = {
    "agent": ({"agent": "eliza"}, [0, 1]),
    "world": ({"world": "w1"}, [0, 2]),
    "other world": ({"world": "w2"}, [1, 3]),
    "agent and world": ({"agent": "eliza", "world": "w1"}, [0]),
    "agent and room": ({"agent": "other", "room": "r-gamma"}, [3]),
    "unknown agent": ({"agent": "nobody"}, []),
    "unknown world": ({"world": "nowhere"}, []),
    # an agent the outsider has and the owner does not
    "another project's agent": ({"agent": "ghost"}, []),
}
MODES = ["vector", "keyword", "hybrid", "auto"]


def texts(indexes):
    return {WRITTEN[n][2] for n in indexes}


def tenant_write(tenant, written):
    for room, world in ROOMS.items():
        response = tenant.client.post("/api/v1/rooms/", {"external_id": room, "world_id": world})
        assert response.status_code in (200, 201), response.json()
    items = [
        {"user": "alice", "agent": agent, "room": room, "content": text}
        for agent, room, text in written
    ]
    response = tenant.client.post(BATCH, {"memories": items})
    assert response.status_code == 201, response.json()
    return [result["memory"]["id"] for result in response.json()["results"]]


@pytest.fixture
def tenants(owner, outsider):
    """The owner's memories (WRITTEN) and the outsider's (OUTSIDER, and one of its own
    agent "ghost"), embedded; the owner's ids in WRITTEN's order."""
    ids = tenant_write(owner, WRITTEN)
    tenant_write(outsider, [*OUTSIDER, ("ghost", "r-beta", "Whiskers the cat of the ghost")])
    embed_pending()
    owner.ids = ids
    return owner, outsider


def listed(tenant, **params):
    response = tenant.client.get(MEMORIES, params)
    assert response.status_code == 200, response.json()
    return {memory["content"] for memory in response.json()["results"]}


def counted(tenant, **params):
    response = tenant.client.get(f"{MEMORIES}count/", params)
    assert response.status_code == 200, response.json()
    return response.json()["count"]


@pytest.mark.parametrize("params, expected", CASES.values(), ids=CASES.keys())
def test_list_and_count(tenants, params, expected):
    owner, _ = tenants
    assert listed(owner, **params) == texts(expected)
    assert counted(owner, **params) == len(expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("params, expected", CASES.values(), ids=CASES.keys())
def test_search_in_every_mode(tenants, mode, params, expected):
    owner, _ = tenants
    result = search(owner, query="Whiskers the cat", mode=mode, k=10, **params)
    assert set(top(result)) == texts(expected)


@pytest.mark.parametrize("mode", MODES)
def test_search_with_a_user_too(tenants, mode):
    owner, _ = tenants
    query = {"query": "Whiskers the cat", "mode": mode, "k": 10, "user": "alice"}
    assert set(top(search(owner, **query, agent="eliza", world="w2"))) == texts([1])
    assert top(search(owner, **{**query, "user": "bob"}, agent="eliza")) == []


def test_search_by_a_raw_vector(tenants):
    owner, _ = tenants
    vector = [float(x) for x in get_provider().embed(["Whiskers the cat"])[0]]
    result = search(owner, embedding=vector, mode="vector", agent="eliza", k=10)
    assert set(top(result)) == texts([0, 1])


# what each scan's statement starts with (exact.py, compact.py, hnsw.py)
SCANS = {
    "exact": "WITH candidates AS MATERIALIZED",
    "compact": "WITH windows AS MATERIALIZED",
    "hnsw": "WITH nearest AS MATERIALIZED",
}


@pytest.mark.parametrize(
    ("exact_scan_max_rows", "compact_scan_max_rows", "scans"),
    [
        (5_000, 200_000, ("exact", "exact")),
        (0, 200_000, ("compact", "hnsw")),
        (0, 0, ("hnsw",) * 2),
    ],
    ids=["exact-scan", "compact-scan", "hnsw-index"],
)
@pytest.mark.parametrize(
    "params, expected", [CASES["agent"], CASES["world"]], ids=["agent", "world"]
)
def test_every_vector_scan_applies_them(
    tenants, settings, exact_scan_max_rows, compact_scan_max_rows, scans, params, expected
):
    settings.RETRIEVAL = {
        **settings.RETRIEVAL,
        "EXACT_SCAN_MAX_ROWS": exact_scan_max_rows,
        "COMPACT_SCAN_MIN_ROWS": exact_scan_max_rows,
        "COMPACT_SCAN_MAX_ROWS": compact_scan_max_rows,
    }
    owner, _ = tenants
    # a user named: the compact scan when allowed; no user: the exact scan or the index
    for user, scan in zip(({"user": "alice"}, {}), scans, strict=True):
        with CaptureQueriesContext(connection) as captured:
            result = search(owner, query="Whiskers the cat", mode="vector", k=10, **user, **params)
        sent = [query["sql"].strip() for query in captured.captured_queries]
        assert any(sql.startswith(SCANS[scan]) for sql in sent), (scan, sent)
        assert set(top(result)) == texts(expected)


def test_a_room_moved_to_another_world_is_found_in_it_at_once(tenants):
    owner, _ = tenants
    assert owner.client.patch("/api/v1/rooms/r-beta/", {"world_id": "w2"}).status_code == 200
    assert listed(owner, world="w2") == texts([1, 2, 3])
    assert set(top(search(owner, query="Whiskers the cat", world="w1", k=10))) == texts([0])


def test_the_outsider_sees_only_its_own_under_the_same_names(tenants):
    _, outsider = tenants
    own = {text for _, _, text in OUTSIDER}
    assert listed(outsider, agent="eliza") == own
    assert listed(outsider, world="w1", agent="eliza") == own
    assert counted(outsider, agent="other") == 0
    for mode in MODES:
        assert set(top(search(outsider, query="Whiskers", mode=mode, agent="eliza"))) == own
        assert top(search(outsider, query="Whiskers", mode=mode, agent="other")) == []


def _context(tenant, **body):
    response = tenant.client.post(
        "/api/v1/context/", {"user": "alice", "query": "Whiskers the cat", **body}, format="json"
    )
    assert response.status_code == 200, response.json()
    [retrieved] = [s for s in response.json()["sections"] if s["name"] == "retrieved"]
    return {item["id"] for item in retrieved["items"]}


@pytest.mark.parametrize(
    "params, expected",
    [
        CASES[name]
        for name in ("agent", "world", "agent and world", "unknown agent", "unknown world")
    ],
    ids=["agent", "world", "agent and world", "unknown agent", "unknown world"],
)
def test_context_retrieves_only_them(tenants, params, expected):
    owner, _ = tenants
    assert _context(owner) == set(owner.ids)  # unfiltered: every one fits
    assert _context(owner, **params) == {owner.ids[n] for n in expected}


@pytest.mark.parametrize(
    "path, method",
    [
        (MEMORIES, "get"),
        (f"{MEMORIES}count/", "get"),
        (SEARCH, "post"),
        ("/api/v1/context/", "post"),
    ],
)
@pytest.mark.parametrize("field", ["agent", "world"])
def test_a_bad_agent_or_world_is_400_naming_it(owner, path, method, field):
    body = {"user": "alice", "query": "cat", field: "a\x07b"}
    response = getattr(owner.client, method)(
        path, body, **({"format": "json"} if method == "post" else {})
    )
    assert response.status_code == 400, response.content
    assert field in response.json()


def test_the_openapi_document_shows_them(owner):
    schema = owner.client.get("/api/schema/", {"format": "json"}).json()
    for path in (MEMORIES, f"{MEMORIES}count/"):
        names = {p["name"] for p in schema["paths"][path]["get"]["parameters"]}
        assert {"agent", "world"} <= names, path
    # the bulk delete does not take them: it would delete more than asked
    deleting = schema["paths"]["/api/v1/memories/"]["delete"]["parameters"]
    assert not {"agent", "world"} & {p["name"] for p in deleting}
    components = schema["components"]["schemas"]
    for request in ("SearchInputRequest", "ContextInputRequest"):
        assert {"agent", "world"} <= components[request]["properties"].keys(), request


@pytest.mark.django_db(transaction=True)
def test_the_codes_kept_in_the_process_are_filtered_too(owner, settings):
    """A user whose binary codes the process keeps (search/codes.py): the shortlist comes
    from them, the filters apply to it in the statement."""
    settings.SEARCH_NICE = 0  # the searches on this thread, whose queries are captured
    settings.RETRIEVAL = {
        **settings.RETRIEVAL,
        "COMPACT_SCAN_MIN_ROWS": 0,
        "EXACT_SCAN_MAX_ROWS": 0,
        "CODES_MIN_ROWS": 0,
    }
    tenant_write(owner, WRITTEN)
    embed_pending()
    alice = EndUser.objects.get(project=owner.project, external_id="alice")
    key = (EmbeddingSpace.objects.get().pk, owner.project.pk, alice.pk)
    size = Memory.objects.filter(end_user=alice).count()
    for _ in range(ADMIT_SEARCHES):
        owner_codes_get(key, size)
    codes_loads_wait()
    # (an unknown agent leaves an empty set: no scan to choose)
    for params, expected in (CASES["agent"], CASES["world"], CASES["agent and world"]):
        filters = SearchFilters(end_user_id=alice.pk, **params)
        with CaptureQueriesContext(connection) as captured:
            result = memory_search(
                project=owner.project, query="Whiskers the cat", mode="vector", filters=filters
            )
        assert any("WITH delta AS" in query["sql"] for query in captured.captured_queries)
        assert {hit.memory.content for hit in result.hits} == texts(expected)
