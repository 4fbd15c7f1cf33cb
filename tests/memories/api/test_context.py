"""POST /api/v1/context/: sections, ranking, de-duplication, budget, degraded answers,
accounting and access rules, against the real stack (the real model where meaning
matters)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memories.api.context import ContextOutputSerializer
from memories.models import Memory
from memories.providers.embeddings import get_provider
from memories.providers.tokens import token_count
from memories.services import context as context_service
from memories.services.access import accesses_flush
from tests.conftest import embed_pending

URL = "/api/v1/context/"
START = timezone.now() - timedelta(days=30)


def write(tenant, *items):
    body = {"memories": [{"user": "maria", **item} for item in items]}
    response = tenant.client.post("/api/v1/memories/batch/", body, format="json")
    assert response.status_code == 201, response.json()
    return [r["memory"]["id"] for r in response.json()["results"]]


def turns(tenant, texts, room="chat", start=0):
    return write(tenant, *[
        {"room": room, "role": "user" if i % 2 == 0 else "assistant", "content": text,
         "created_at": (START + timedelta(hours=start + i)).isoformat()}
        for i, text in enumerate(texts)
    ])  # fmt: skip


def context(tenant, **body):
    response = tenant.client.post(URL, {"user": "maria", **body}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def section(body, name):
    return next(s for s in body["sections"] if s["name"] == name)


def test_a_context_holds_each_section_and_is_counted_exactly(owner):
    turns(owner, [f"Old turn {i} about gardening and tomatoes." for i in range(30)])
    turns(owner, ["Recent: I adopted a cat named Miso.", "What a lovely name!"], start=40)
    write(owner, {"kind": "fact", "content": "User lives in Porto.", "confidence": 0.9})
    embed_pending()
    body = context(owner, room="chat", query="what pet does she have?", max_tokens=600)
    assert body["total_tokens"] == token_count(body["prompt"]) <= 600
    assert "User lives in Porto." in body["prompt"]
    history = [i["text"] for i in section(body, "history")["items"]]
    assert any("Miso" in text for text in history)
    assert len(history) == 10  # the buffer window (max_size 10)
    for s in body["sections"]:
        assert s["tokens"] <= s["budget"]
        assert all(item["tokens"] == token_count(item["text"] + "\n") for item in s["items"])
    retrieved = section(body, "retrieved")["items"]
    assert retrieved and not {i["id"] for i in retrieved} & {
        i["id"] for i in section(body, "history")["items"]
    }
    # each stage is timed, and the retrieval's search step by step
    timings = body["timings_ms"]
    assert {"synopsis", "facts", "history", "retrieval", "ranking"} <= set(timings)
    assert {"retrieval.keyword", "retrieval.vector", "retrieval.rank"} <= set(timings)
    assert sum(timings[f"retrieval.{step}"] for step in ("keyword", "rank")) <= timings["retrieval"]


def test_the_response_is_what_its_documented_serializer_renders(owner):
    turns(owner, ["I adopted a cat named Miso.", "What a lovely name!"])
    write(owner, {"kind": "fact", "content": "User lives in Porto.", "confidence": 0.9})
    embed_pending()
    for explain in (False, True):
        body = context(owner, room="chat", query="the cat", max_tokens=300, explain=explain)
        assert ContextOutputSerializer(body).data == body
        assert any(s["items"] for s in body["sections"])


def test_facts_rank_by_similarity_and_confidence_as_computed_by_hand(owner):
    texts = {"User is allergic to peanuts.": 0.3, "User works at Acme Corp.": 0.95,
             "User likes hiking in the mountains.": 0.6}  # fmt: skip
    write(owner, *[{"kind": "fact", "content": t, "confidence": c} for t, c in texts.items()])
    embed_pending()
    query = "Can she eat peanut butter?"
    provider = get_provider()
    q = provider.embed([query])[0]
    vectors = provider.embed(list(texts))
    expected = {
        text: 0.6 * max(0.0, float(np.dot(q, v) / np.linalg.norm(q) / np.linalg.norm(v))) + 0.4 * c
        for (text, c), v in zip(texts.items(), vectors, strict=True)
    }
    body = context(owner, query=query, max_tokens=2000, explain=True)
    items = section(body, "facts")["items"]
    assert [i["text"][2:] for i in items] == sorted(expected, key=expected.get, reverse=True)
    for item in items:
        assert item["score"] == pytest.approx(expected[item["text"][2:]], abs=1e-3)
    # per call: confidence alone
    only_confidence = context(owner, query=query, similarity_weight=0, confidence_weight=1)
    assert [i["text"][2:] for i in section(only_confidence, "facts")["items"]] == sorted(
        texts, key=texts.get, reverse=True
    )


def test_the_same_memory_or_text_appears_once(owner):
    [turn] = turns(owner, ["I love jazz and play the saxophone."])
    write(
        owner, {"kind": "fact", "content": "I love jazz and play the saxophone.", "confidence": 0.8}
    )
    embed_pending()
    body = context(owner, room="chat", query="jazz saxophone", explain=True)
    texts = body["prompt"].count("I love jazz and play the saxophone.")
    assert texts == 1
    assert any(d["id"] == turn for d in body["duplicates"])


def test_messages_make_the_query_from_the_last_turns(owner):
    turns(owner, ["I adopted a cat named Miso.", "Lovely!"])
    embed_pending()
    messages = [
        {"role": "user", "content": "Tell me about my cat"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "lookup"}]},
        {"role": "tool", "content": "irrelevant tool output about tax returns"},
    ]
    body = context(owner, messages=messages)
    assert body["query"] == "Tell me about my cat"


def test_without_the_model_the_context_still_answers_and_says_so(owner, monkeypatch):
    turns(owner, ["I adopted a cat named Miso.", "Lovely!"])

    def broken(query, embedding):
        raise RuntimeError("model files missing")

    monkeypatch.setattr(context_service, "query_embedding_start", broken)
    body = context(owner, query="Miso the cat", max_tokens=500)
    assert any("embedding model unavailable" in note for note in body["notes"])
    assert "Miso" in body["prompt"]


def test_retrieved_memories_count_as_accesses(owner):
    [cat, _] = turns(owner, ["I adopted a cat named Miso.", "Lovely!"])
    embed_pending()
    body = context(owner, query="Miso the cat")  # no room: the window is the user's turns
    accesses_flush()
    retrieved = {i["id"] for i in section(body, "retrieved")["items"]}
    for memory in Memory.objects.filter(pk__in=retrieved):
        assert memory.access_count == 1


def test_the_full_history_and_the_savings(owner):
    texts = [f"Turn {i}: " + "a long sentence about many things " * 10 for i in range(40)]
    turns(owner, texts)
    body = context(owner, room="chat", query="things", max_tokens=300)
    assert body["full_history_tokens"] == sum(token_count(t) for t in texts)
    assert body["saved_tokens"] == body["full_history_tokens"] - body["total_tokens"]
    turns(owner, ["one more turn"], start=100)  # counted incrementally
    again = context(owner, room="chat", query="things", max_tokens=300)
    assert again["full_history_tokens"] == body["full_history_tokens"] + token_count(
        "one more turn"
    )


def test_retrieval_asks_for_what_fits_and_fills_the_budget_as_the_most_would(owner, monkeypatch):
    from memories.services.context import retrieved as sources

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
    from memories.services.context import retrieved as sources

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
    knowledge("To reset the router hold the red button for ten seconds.", page=4,
              page_end=4, heading=["Troubleshooting", "Reset"])  # fmt: skip
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


def test_a_deleted_turn_leaves_the_full_history_at_the_next_recount(owner, monkeypatch):
    from memories.services.context import history

    turns(owner, ["first turn here", "second turn there"])
    body = context(owner, room="chat", query="turn", max_tokens=300)
    assert body["full_history_tokens"] == token_count("first turn here") + token_count(
        "second turn there"
    )
    Memory.objects.filter(content="first turn here").delete()
    # between recounts only new messages are read: the total still holds the deleted one
    assert (
        context(owner, room="chat", query="turn", max_tokens=300)["full_history_tokens"]
        == (body["full_history_tokens"])
    )
    monkeypatch.setattr(history, "RECOUNT_SECONDS", 0)
    again = context(owner, room="chat", query="turn", max_tokens=300)
    assert again["full_history_tokens"] == token_count("second turn there")


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    max_tokens=st.integers(100, 1500),
    lengths=st.lists(st.integers(1, 120), min_size=1, max_size=25),
    history=st.floats(0, 0.7),
)
def test_the_budget_holds_through_the_api(owner, max_tokens, lengths, history):
    user = f"u{abs(hash((max_tokens, tuple(lengths), history)))}"
    items = [
        {"user": user, "room": user, "role": "user", "content": f"message {i} " + "word " * n}
        for i, n in enumerate(lengths)
    ]
    owner.client.post("/api/v1/memories/batch/", {"memories": items}, format="json")
    body = owner.client.post(URL, {
        "user": user, "room": user, "query": "word message", "max_tokens": max_tokens,
        "budgets": {"history": history, "retrieved": 1 - history},
    }, format="json").json()  # fmt: skip
    assert body["total_tokens"] == token_count(body["prompt"]) <= max_tokens


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "max_tokens": 99}, "max_tokens"),
        ({"query": "x", "max_tokens": 200_001}, "max_tokens"),
        ({"query": "x", "encoding": "o200k_base"}, "encoding"),
        ({}, "query"),
        ({"messages": [{"role": "user", "content": "hi"}, {"content": "no role"}]}, "messages"),
        ({"messages": "hello"}, "messages"),
        ({"query": "x", "budgets": {"history": 0.9, "retrieved": 0.5}}, "budgets"),
        ({"query": "x", "budgets": {"gossip": 0.1}}, "budgets"),
    ],
)
def test_bad_input_is_400_naming_the_field(owner, body, field):
    write(owner, {"content": "hello"})
    response = owner.client.post(URL, {"user": "maria", **body}, format="json")
    assert response.status_code == 400
    assert field in response.json(), response.json()
    if field == "encoding":
        assert "cl100k_base" in str(response.json()["encoding"])
    if body.get("messages") and isinstance(body["messages"], list):
        assert "messages[1].role" in response.json()["messages"]


def test_another_projects_user_or_room_is_404(owner, outsider):
    write(owner, {"room": "chat", "content": "hello"})
    assert (
        outsider.client.post(URL, {"user": "maria", "query": "x"}, format="json").status_code == 404
    )
    write(outsider, {"content": "their own maria"})
    response = outsider.client.post(
        URL, {"user": "maria", "room": "chat", "query": "x"}, format="json"
    )
    assert response.status_code == 404
    assert (
        owner.client.post(URL, {"user": "nobody", "query": "x"}, format="json").status_code == 404
    )


@pytest.mark.django_db(transaction=True)  # the synopsis cache is written after commit
def test_the_synopsis_leads_the_context(owner):
    from memories.models import EndUser
    from memories.services.revisions import Actor
    from memories.services.synopsis import synopsis_part_edit

    turns(owner, ["I adopted a cat named Miso.", "Lovely!"])
    maria = EndUser.objects.get(project=owner.project, external_id="maria")
    synopsis_part_edit(
        end_user=maria, part="identity", text="Maria, a jazz pianist from Porto.",
        actor=Actor.operator("ops"),
    )  # fmt: skip
    body = context(owner, room="chat", query="what instrument does she play?", max_tokens=400)
    [item] = section(body, "synopsis")["items"]
    assert item["text"] == "Maria, a jazz pianist from Porto."
    assert body["prompt"].startswith("## About the user\nMaria, a jazz pianist from Porto.")


def test_a_fact_less_relevant_than_the_memories_it_would_displace_stays_out(owner):
    turns(owner, [f"We talked about my cat Miso and her toys, day {i}." for i in range(20)])
    write(
        owner,
        {"kind": "fact", "content": "User works as a tax accountant.", "confidence": 1.0},
        {"kind": "fact", "content": "User has a cat named Miso.", "confidence": 0.6},
    )
    embed_pending()
    body = context(owner, query="Tell me about Miso the cat", max_tokens=300, explain=True)
    facts = section(body, "facts")
    assert [i["text"] for i in facts["items"]] == ["- User has a cat named Miso."]
    [(dropped)] = [d for d in facts["dropped"] if "accountant" in d["text"]]
    assert "less similar to the query" in dropped["why"]


def test_retrieved_memories_load_only_the_fields_they_are_rendered_from(owner, monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memories.services.context import retrieved as sources

    write(owner, *[
        {"room": "chat", "role": role, "content": text, "metadata": {"name": name},
         "created_at": (START + timedelta(hours=i)).isoformat()}
        for i, (role, name, text) in enumerate([
            ("user", "Maria", "My bike has a flat tyre again."),
            ("assistant", "Coach", "Patch kits fix a flat tyre in ten minutes."),
        ])
    ], {"kind": "knowledge", "content": "A tyre lever lifts the tyre off the rim.",
        "content_json": {"document": {"id": str(uuid.uuid4()), "title": "Bike book"}, "page": 2}},
    )  # fmt: skip
    owner.client.post("/api/v1/memories/", {
        "kind": "knowledge", "content": "Pump a road tyre to 6 bar.", "user": None,
        "content_json": {"document": {"id": str(uuid.uuid4()), "title": "Pumps"}, "page": 7},
    }, format="json")  # fmt: skip
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
