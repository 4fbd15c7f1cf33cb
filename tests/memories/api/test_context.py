"""POST /api/v1/context/: sections, ranking, de-duplication, budget, degraded answers,
accounting and access rules, against the real stack (the real model where meaning
matters). The retrieved section's own tests: test_context_retrieval.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memories.api.context import ContextOutputSerializer
from memories.models import EndUser, Memory
from memories.providers.embeddings import get_provider
from memories.providers.tokens import token_count
from memories.services import context as context_service
from memories.services.access import accesses_flush
from memories.services.context import history as history_part
from memories.services.revisions import Actor
from memories.services.synopsis import synopsis_part_edit
from tests.conftest import embed_pending
from tests.memories.api.context_calls import URL, context, section, turns, write


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
    texts = {
        "User is allergic to peanuts.": 0.3,
        "User works at Acme Corp.": 0.95,
        "User likes hiking in the mountains.": 0.6,
    }
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


def test_messages_make_the_query_from_the_last_three_user_turns(owner):
    write(owner, {"kind": "fact", "content": "User codes in Python."})
    messages = [
        {"role": "user", "content": "I'm working on a Python project"},
        {"role": "assistant", "content": "What kind of project?"},
        {"role": "user", "content": "It uses FastAPI and SQLAlchemy"},
        {"role": "assistant", "content": "A solid stack."},
        {"role": "user", "content": "How do I write tests?"},
    ]
    body = context(owner, messages=messages)
    assert body["query"].split("\n") == [m["content"] for m in messages]


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


def test_a_deleted_turn_leaves_the_full_history_at_the_next_recount(owner, monkeypatch):
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
    monkeypatch.setattr(history_part, "RECOUNT_SECONDS", 0)
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
    body = owner.client.post(
        URL,
        {
            "user": user,
            "room": user,
            "query": "word message",
            "max_tokens": max_tokens,
            "budgets": {"history": history, "retrieved": 1 - history},
        },
        format="json",
    ).json()
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
    turns(owner, ["I adopted a cat named Miso.", "Lovely!"])
    maria = EndUser.objects.get(project=owner.project, external_id="maria")
    synopsis_part_edit(
        end_user=maria,
        part="identity",
        text="Maria, a jazz pianist from Porto.",
        actor=Actor.operator("ops"),
    )
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
