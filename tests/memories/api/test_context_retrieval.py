"""POST /api/v1/context/: the retrieved section: how many memories it asks search for,
reading on in the same ranking, documents with their citations, the fields it loads."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.services.context import retrieved as sources
from tests.conftest import embed_pending
from tests.memories.api.context_calls import START, context, section, turns, write


def test_retrieval_asks_for_what_fits_and_fills_the_budget_as_the_most_would(owner, monkeypatch):
    words = [
        "garden",
        "tomato",
        "basil",
        "soil",
        "compost",
        "seedling",
        "harvest",
        "trellis",
        "watering",
        "mulch",
    ]
    texts = [
        f"Turn {i}: the {words[i % 10]} " + " ".join(words[: 1 + i % 7]) * (1 + i % 4)
        for i in range(240)
    ]
    turns(owner, texts, room=None)
    embed_pending()
    asked: list[int] = []
    search = sources.memory_search
    monkeypatch.setattr(
        sources, "memory_search", lambda **kw: asked.append(kw["k"]) or search(**kw)
    )
    sources._result_tokens.clear()
    first = context(owner, query="garden tomato harvest", max_tokens=1500)
    adaptive = context(owner, query="garden tomato harvest", max_tokens=1500)
    monkeypatch.setattr(sources, "retrieved_k", lambda **kw: sources.RETRIEVED_K_MAX)
    most = context(owner, query="garden tomato harvest", max_tokens=1500)
    # the second context knows how long this user's lines are: it asks for fewer
    assert asked[-2] < asked[0] <= sources.RETRIEVED_K_MAX
    for body in (first, adaptive):
        assert body["total_tokens"] >= 0.97 * most["total_tokens"]
        assert len(section(body, "retrieved")["items"]) >= 0.9 * len(
            section(most, "retrieved")["items"]
        )


def test_results_too_short_for_the_room_read_on_in_the_same_ranking(owner, monkeypatch):
    turns(owner, [f"Turn {i}: we watered the tomato seedlings in the garden" for i in range(150)])
    embed_pending()
    asked: list[int] = []
    search = sources.memory_search
    monkeypatch.setattr(
        sources, "memory_search", lambda **kw: asked.append(kw["k"]) or search(**kw)
    )
    monkeypatch.setattr(sources, "retrieved_k", lambda **kw: 20)  # a guess far too low
    short = context(owner, query="tomato seedlings garden", max_tokens=1500)
    monkeypatch.setattr(sources, "retrieved_k", lambda **kw: sources.RETRIEVED_K_MAX)
    most = context(owner, query="tomato seedlings garden", max_tokens=1500)
    # one search; the 20 hits' lines left room, so the next of its ranking were loaded
    assert asked == [20, sources.RETRIEVED_K_MAX]
    assert "retrieval.more" in short["timings_ms"]
    assert len(section(short, "retrieved")["items"]) > 20
    assert short["total_tokens"] >= 0.97 * most["total_tokens"]


def test_the_projects_documents_are_retrieved_with_their_citation_and_nobody_elses(owner):
    def knowledge(text, user=None, **cited):
        item = {
            "kind": "knowledge",
            "content": text,
            "content_json": {
                "document": {"id": str(uuid.uuid4()), "title": "Router manual"},
                **cited,
            },
        }
        response = owner.client.post("/api/v1/memories/", {**item, "user": user}, format="json")
        assert response.status_code == 201, response.json()

    turns(owner, ["I bought a new router last week.", "Nice, which one?"])
    knowledge(
        "To reset the router hold the red button for ten seconds.",
        page=4,
        page_end=4,
        heading=["Troubleshooting", "Reset"],
    )
    knowledge("The router's reset pin code for Joao is 4711.", user="joao", page=9)
    embed_pending()
    body = context(owner, query="how do I reset my router?", max_tokens=800)
    retrieved = section(body, "retrieved")["items"]
    cited = [i for i in retrieved if i["kind"] == "knowledge"]
    assert [i["text"] for i in cited] == [
        "[Router manual, p. 4, Troubleshooting > Reset]: To reset the router hold the red "
        "button for ten seconds."
    ]
    assert "4711" not in body["prompt"]  # another user's document


def _bike_memories(owner):
    """Two turns of Maria's with names in their metadata, a chunk of her document and
    one of a document of the project's."""
    write(
        owner,
        *[
            {
                "room": "chat",
                "role": role,
                "content": text,
                "metadata": {"name": name},
                "created_at": (START + timedelta(hours=i)).isoformat(),
            }
            for i, (role, name, text) in enumerate(
                [
                    ("user", "Maria", "My bike has a flat tyre again."),
                    ("assistant", "Coach", "Patch kits fix a flat tyre in ten minutes."),
                ]
            )
        ],
        {
            "kind": "knowledge",
            "content": "A tyre lever lifts the tyre off the rim.",
            "content_json": {
                "document": {"id": str(uuid.uuid4()), "title": "Bike book"},
                "page": 2,
            },
        },
    )
    owner.client.post(
        "/api/v1/memories/",
        {
            "kind": "knowledge",
            "content": "Pump a road tyre to 6 bar.",
            "user": None,
            "content_json": {"document": {"id": str(uuid.uuid4()), "title": "Pumps"}, "page": 7},
        },
        format="json",
    )


def test_retrieved_memories_load_only_the_fields_they_are_rendered_from(owner, monkeypatch):
    _bike_memories(owner)
    embed_pending()

    def counted():
        with CaptureQueriesContext(connection) as queries:
            body = context(owner, query="how do I fix a flat tyre?", max_tokens=800)
        return body, len(queries.captured_queries)

    counted()  # the first context of a user counts its history and keeps the count
    lean, lean_queries = counted()
    monkeypatch.setattr(sources, "TURN_FIELDS", None)  # every field loaded
    whole, whole_queries = counted()
    # a field read but not loaded would cost a query per memory, and the text is the same
    assert lean_queries == whole_queries
    assert lean["prompt"] == whole["prompt"]
    texts = [i["text"] for i in section(lean, "retrieved")["items"]]
    assert "[Bike book, p. 2]: A tyre lever lifts the tyre off the rim." in texts
    assert "[Pumps, p. 7]: Pump a road tyre to 6 bar." in texts
    assert "Coach (assistant): Patch kits fix a flat tyre in ten minutes." in texts


def test_a_project_chunk_less_similar_than_the_users_memories_takes_no_budget(owner):
    turns(owner, ["I bought a new router last week.", "My router keeps dropping the wifi."])
    for text, title in [
        ("To reset the router hold the red button for ten seconds.", "Router manual"),
        ("Sourdough needs a starter fed with flour and water every day.", "Baking book"),
    ]:
        shared = {"kind": "knowledge", "content": text, "user": None}
        shared["content_json"] = {"document": {"id": str(uuid.uuid4()), "title": title}}
        assert owner.client.post("/api/v1/memories/", shared, format="json").status_code == 201
    embed_pending()
    body = context(owner, query="how do I reset my router?", max_tokens=800, explain=True)
    retrieved = section(body, "retrieved")
    assert any("red button" in item["text"] for item in retrieved["items"])
    assert "Sourdough" not in body["prompt"]
    dropped = [d for d in retrieved["dropped"] if "Sourdough" in d["text"]]
    assert len(dropped) == 1 and "less similar to the query" in dropped[0]["why"]
