"""MCP over streamable HTTP at the hub's ``/mcp/``, through the SDK's own client against
a live hub: the tools and resources, and that the endpoint widens nothing (no key or a
wrong one is a 401, a read-only key cannot remember, another project's memory is not
found, each key sees its own project)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from memoryhub_client import MemoryHub

from tests.clients.conftest import run
from tests.clients.mcp_sessions import (
    TOOLS,
    data_of,
    error_of,
    http_session,
    resource_text,
    tool,
)
from tests.conftest import Tenant

pytestmark = pytest.mark.django_db(transaction=True)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


async def facts_then_forget(session: Any, fact_id: str) -> None:
    """Alice's one fact through list_facts and the resources, then forgotten."""
    facts = data_of(await tool(session, "list_facts", user="alice"))
    assert [item["content"] for item in facts["facts"]] == ["Alice is allergic to peanuts"]
    assert "- Alice is allergic to peanuts" in await resource_text(
        session, "memoryhub://users/alice/facts"
    )
    synopsis = await resource_text(session, "memoryhub://users/alice/synopsis")
    assert synopsis.startswith("Identity:")
    assert data_of(await tool(session, "forget", memory_id=fact_id))["deleted"]
    again = error_of(await tool(session, "forget", memory_id=fact_id))
    assert "not found (404)" in again


def test_tools_remember_recall_context_facts_forget(live_server: Any, owner: Tenant) -> None:
    async def scenario() -> None:
        async with http_session(live_server.url, owner.raw_key) as session:
            listed = {item.name for item in (await session.list_tools()).tools}
            assert listed == TOOLS
            turn = data_of(
                await tool(
                    session,
                    "remember",
                    content="My sister Ana moved to Lisbon last spring",
                    role="user",
                    user="alice",
                    room="chat-1",
                )
            )
            assert turn["created"] and turn["kind"] == "message" and turn["room"] == "chat-1"
            fact = data_of(
                await tool(
                    session,
                    "remember",
                    content="Alice is allergic to peanuts",
                    kind="fact",
                    user="alice",
                )
            )
            found = data_of(
                await tool(session, "recall", query="Lisbon", mode="keyword", user="alice")
            )
            assert [hit["id"] for hit in found["results"]] == [turn["id"]]
            context = data_of(
                await tool(
                    session,
                    "get_context",
                    query="where does Ana live?",
                    user="alice",
                    room="chat-1",
                    max_tokens=800,
                )
            )
            assert "Lisbon" in context["prompt"] and context["total_tokens"] <= 800
            await facts_then_forget(session, fact["id"])

    run(scenario())
    with MemoryHub(live_server.url, owner.raw_key) as hub:
        assert [m.content for m in hub.memories.list(user="alice")] == [
            "My sister Ana moved to Lisbon last spring"
        ]


def test_defaults_from_headers_and_bad_arguments(live_server: Any, owner: Tenant) -> None:
    headers = {"X-MemoryHub-User": "bob", "X-MemoryHub-Room": "desk"}

    async def scenario() -> None:
        async with http_session(live_server.url, owner.raw_key, headers) as session:
            kept = data_of(
                await tool(session, "remember", content="Bob drinks oat milk", role="user")
            )
            assert (kept["user"], kept["room"]) == ("bob", "desk")
            facts = data_of(await tool(session, "list_facts"))
            assert facts["user"] == "bob"
            refused = error_of(await tool(session, "remember", content="", role="user"))
            assert "content" in refused
        async with http_session(live_server.url, owner.raw_key) as session:
            missing = error_of(await tool(session, "list_facts"))
            assert "user is required" in missing

    run(scenario())


def test_a_new_user_or_room_gets_what_there_is_with_a_note(live_server: Any, owner: Tenant) -> None:
    async def scenario() -> None:
        async with http_session(live_server.url, owner.raw_key) as session:
            ask = {"query": "where does Ana live?", "max_tokens": 500}
            new = data_of(await tool(session, "get_context", user="carol", room="first", **ask))
            assert (new["prompt"], new["note"]) == (
                "",
                "Nothing is remembered about this user yet.",
            )
            await tool(
                session,
                "remember",
                content="Ana lives in Lisbon",
                role="user",
                user="carol",
                room="first",
            )
            later = data_of(await tool(session, "get_context", user="carol", room="second", **ask))
            assert "Lisbon" in later["prompt"] and "no turns yet" in later["note"]

    run(scenario())


def test_read_only_key_recalls_but_cannot_remember(live_server: Any, owner: Tenant) -> None:
    async def scenario() -> None:
        async with http_session(live_server.url, owner.raw_read_key) as session:
            refused = error_of(
                await tool(session, "remember", content="Carol likes tea", user="carol")
            )
            assert "read-only" in refused and "403" in refused
            assert data_of(await tool(session, "recall", query="tea", user="carol"))["count"] == 0
            assert "read-only" in error_of(await tool(session, "forget", memory_id="m_x"))

    run(scenario())


def test_no_key_or_wrong_key_is_401(live_server: Any, owner: Tenant) -> None:
    url = f"{live_server.url}/mcp/"
    for headers in ({}, {"Authorization": "Bearer mh_not_a_key"}, {"Authorization": "Basic x"}):
        answer = httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
        assert answer.status_code == 401, answer.text
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    good = {**MCP_HEADERS, "Authorization": f"Bearer {owner.raw_key}"}
    answer = httpx.post(url, json=INITIALIZE, headers=good)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["serverInfo"]["name"] == "memoryhub"


def test_another_projects_memory_is_not_found(
    live_server: Any, owner: Tenant, outsider: Tenant
) -> None:
    async def scenario() -> None:
        async with http_session(live_server.url, owner.raw_key) as session:
            kept = data_of(
                await tool(session, "remember", content="Dana's PIN hint is her dog", user="dana")
            )
        async with http_session(live_server.url, outsider.raw_key) as session:
            assert "not found (404)" in error_of(
                await tool(session, "forget", memory_id=kept["id"])
            )
            found = data_of(await tool(session, "recall", query="PIN", mode="keyword", user="dana"))
            assert found["count"] == 0
            facts = await session.read_resource("memoryhub://users/dana/facts")
            assert "No facts" in text_of_contents(facts)
            with pytest.raises(MCPError, match="no such user"):
                await session.read_resource("memoryhub://users/dana/synopsis")
        async with http_session(live_server.url, owner.raw_key) as session:
            found = data_of(await tool(session, "recall", query="PIN", mode="keyword", user="dana"))
            assert [hit["id"] for hit in found["results"]] == [kept["id"]]

    run(scenario())


def text_of_contents(result: Any) -> str:
    return "\n".join(getattr(item, "text", "") for item in result.contents)


@pytest.mark.worker
def test_add_document_and_recall_by_meaning(
    live_server: Any, owner: Tenant, celery_worker_process: Any
) -> None:
    manual = (
        "# Aurora 3000\n\n"
        "Descale the Aurora 3000 coffee machine every three months with citric acid.\n"
    )

    async def add() -> dict[str, Any]:
        async with http_session(live_server.url, owner.raw_key) as session:
            return data_of(await tool(session, "add_document", text=manual, source="aurora.md"))

    document = run(add())
    assert document["source"] == "aurora.md" and not document["duplicate"]
    with MemoryHub(live_server.url, owner.raw_key) as hub:
        assert hub.documents.wait_until_done(document["id"], timeout=120).status == "done"

    async def recall() -> dict[str, Any]:
        async with http_session(live_server.url, owner.raw_key) as session:
            return data_of(
                await tool(
                    session,
                    "recall",
                    query="how often should the espresso maker be cleaned of limescale?",
                    mode="vector",
                )
            )

    found = run(recall())
    assert found["results"] and "citric acid" in found["results"][0]["content"]
    assert 0.0 < found["results"][0]["similarity"] <= 1.0


def test_rate_and_body_limits_apply(live_server: Any, owner: Tenant, settings: Any) -> None:
    with MemoryHub(live_server.url, owner.raw_key) as hub:
        hub.settings.update({"limits": {"reads_per_minute": 6, "writes_per_minute": 2}})

    async def scenario() -> None:
        # the PATCH was a write; each MCP request is a read (initialize, its
        # notification, the SDK's tools/list, each call), remember a write as well
        async with http_session(live_server.url, owner.raw_key) as session:
            data_of(await tool(session, "remember", content="first", user="fay"))
            refused = error_of(await tool(session, "remember", content="second", user="fay"))
            assert "rate limited (429)" in refused

    run(scenario())
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {owner.raw_key}"}
    statuses = [
        httpx.post(f"{live_server.url}/mcp/", json=INITIALIZE, headers=headers) for _ in range(3)
    ]
    assert statuses[-1].status_code == 429 and int(statuses[-1].headers["Retry-After"]) >= 1

    settings.MEMORYHUB = {**settings.MEMORYHUB, "MAX_BODY_BYTES": 2_000}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"content": "x" * 3_000, "user": "fay"}},
    }
    answer = httpx.post(f"{live_server.url}/mcp/", json=call, headers=headers)
    assert answer.status_code == 413
