"""Hostile text through every path of the memories API (issue 45, "Bad input"): the runs
of tests/hostile_texts.py (10,000 characters of one character or phrase, their mix,
distinct words) and a 1 MB line, as a memory, a batch, an import, a search query, a
context query or conversation and working memory. Each gets its normal answer (201/200,
or 400 for a text that is blank or over a limit) within REQUEST_SECONDS; nothing is lost
(stored as sent, embedded), and mining it for facts takes well under the task's limit."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from memories.api.fields import hub_limit
from memories.models import Memory
from memories.services import embedding_spaces, working_store
from memories.services.context.query import QUERY_MAX_CHARS
from memories.services.embedding import embedding_run
from synopsis.services.facts import message_facts_extract
from tests.hostile_texts import megabyte_line, texts
from tests.memories.conftest import CountingProvider

REQUEST_SECONDS = 10.0  # an answer on a busy 2-core machine; a backtracking pattern takes minutes
MINING_SECONDS = 5.0  # one message through the fact extractor (its task's limit is a minute)
SEARCH_QUERY_MAX = 4_000  # search's query limit (memories/api/search_serializers.py)
TEXTS = texts()
WORDS = [text for text in TEXTS.values() if text.strip()]  # what a memory may hold
# the reads take the runs as they are ("I have ..." adds nothing a query parser sees)
QUERIES = {name: text for name, text in TEXTS.items() if not name.startswith("I have ")}


def timed(tenant: Any, method: str, path: str, body: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    response = getattr(tenant.client, method)(path, body, format="json")
    return response, time.perf_counter() - started


def expect(tenant: Any, path: str, bodies: dict[str, tuple[Any, int]]) -> dict[str, Any]:
    """POST each body and check its status and its time; the responses by name."""
    responses, wrong = {}, []
    for name, (body, status) in bodies.items():
        response, seconds = timed(tenant, "post", path, body)
        if response.status_code != status or seconds > REQUEST_SECONDS:
            wrong.append(f"{name}: {response.status_code} in {seconds:.1f} s (expected {status})")
        responses[name] = response
    assert not wrong, f"{path}:\n" + "\n".join(wrong)
    return responses


def status_of(text: str) -> int:
    return 201 if text.strip() else 400  # a blank text is refused, any other stored


@pytest.fixture
def alice(owner):
    """A user with a conversation, for the searches and contexts to read."""
    body = {"user": "alice", "room": "chat", "content": "I have a cat called Tom."}
    assert owner.client.post("/api/v1/memories/", body).status_code == 201
    return owner


def test_each_hostile_text_is_stored_as_sent(owner):
    bodies = {
        name: ({"user": "alice", "room": "chat", "role": "user", "content": text}, status_of(text))
        for name, text in TEXTS.items()
    }
    # PostgreSQL's to_tsvector reads a run of "<!--" in n² (1 s at 20,000 characters):
    # the longest content holding one is still written in seconds
    comments = {"user": "alice", "content": "<!--" * (hub_limit("MAX_CONTENT_CHARS") // 4)}
    bodies["comment openings at the content limit"] = (comments, 201)
    responses = expect(owner, "/api/v1/memories/", bodies)
    for name, response in responses.items():
        if response.status_code == 201:
            stored = Memory.objects.get(public_id=response.json()["memory"]["id"])
            assert stored.content == bodies[name][0]["content"], name


def test_a_batch_and_an_import_of_hostile_texts_store_them_all(owner):
    items = [{"user": "alice", "room": "chat", "role": "user", "content": t} for t in WORDS]
    expect(owner, "/api/v1/memories/batch/", {"batch": ({"memories": items}, 201)})
    document = {
        "format": "memoryhub-export",
        "version": 1,
        "users": [{"external_id": "carol"}],
        "rooms": [],
        "agents": [],
        "memories": [{"id": str(uuid.uuid4()), "user": "carol", "content": t} for t in WORDS],
    }
    expect(owner, "/api/v1/import/", {"import": (document, 201)})
    for user in ("alice", "carol"):
        stored = Memory.objects.filter(project=owner.project, end_user__external_id=user)
        assert sorted(stored.values_list("content", flat=True)) == sorted(WORDS), user


def test_hostile_messages_are_embedded_and_mined_in_time(owner, provider):
    items = [{"user": "alice", "room": "chat", "role": "user", "content": t} for t in WORDS]
    expect(owner, "/api/v1/memories/batch/", {"batch": ({"memories": items}, 201)})
    while embedding_run():
        pass
    messages = Memory.objects.filter(project=owner.project, kind=Memory.Kind.MESSAGE)
    assert {m.embedding_status for m in messages} == {Memory.EmbeddingStatus.DONE}
    slow = {}
    for message in messages:
        started = time.perf_counter()
        message_facts_extract(message=message)
        if (seconds := time.perf_counter() - started) > MINING_SECONDS:
            slow[message.content[:30]] = round(seconds, 1)
    assert not slow, f"mined for longer than {MINING_SECONDS} s: {slow}"


def test_a_hostile_search_query_gets_its_answer(alice):
    bodies = {}
    for name, text in QUERIES.items():
        query = text[:SEARCH_QUERY_MAX]
        bodies[name] = ({"query": query, "user": "alice"}, 200 if query.strip() else 400)
    bodies["a query over the limit"] = ({"query": TEXTS["mixed"]}, 400)
    expect(alice, "/api/v1/search/", bodies)


def test_a_hostile_context_query_or_conversation_gets_its_context(alice):
    bodies = {}
    for name, text in QUERIES.items():
        status = 200 if text.strip() else 400
        bodies[f"query: {name}"] = ({"user": "alice", "query": text}, status)
        messages = [{"role": "user", "content": text}] * 3
        bodies[f"messages: {name}"] = ({"user": "alice", "messages": messages}, 200)
    for name, text in (("a 1 MB line", megabyte_line()), ("1 MB of '<!--'", "<!--" * 2**18)):
        turns = [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": text}]
        bodies[f"messages: {name}"] = ({"user": "alice", "messages": turns}, 200)
    responses = expect(alice, "/api/v1/context/", bodies)
    # the query made of a long conversation is its last words, as long as a query may be
    query = responses["messages: a 1 MB line"].json()["query"]
    assert len(query) <= QUERY_MAX_CHARS and megabyte_line().endswith(query)


@pytest.fixture
def working(owner, monkeypatch, redis_client):
    """Working memory with the hashing embedder, the rooms' keys cleared."""
    for key in redis_client.scan_iter(match=f"{working_store.KEY_PREFIX}:*"):
        redis_client.delete(key)
    provider = CountingProvider(model="working-hostile-test", dimension=32)
    monkeypatch.setattr(embedding_spaces, "get_provider", lambda: provider)
    return owner


def test_hostile_working_memory_is_kept_and_searched(working):
    notes = {name: ({"content": text}, status_of(text)) for name, text in TEXTS.items()}
    expect(working, "/api/v1/rooms/r1/working/", notes)
    queries = {
        name: ({"query": text}, 200 if text.strip() else 400) for name, text in QUERIES.items()
    }
    expect(working, "/api/v1/rooms/r1/working/search/", queries)
