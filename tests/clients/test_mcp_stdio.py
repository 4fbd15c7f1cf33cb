"""The stdio MCP server (``memoryhub-mcp``, here ``python -m memoryhub_client.mcp_server``)
as an MCP host runs it: a subprocess configured by MEMORYHUB_URL / MEMORYHUB_API_KEY /
MEMORYHUB_USER / MEMORYHUB_ROOM, driven through the SDK's stdio client against a live
hub."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from memoryhub_client import MemoryHub

from tests.clients.conftest import run
from tests.clients.mcp_sessions import (
    TOOLS,
    data_of,
    error_of,
    resource_text,
    stdio_session,
    tool,
)
from tests.conftest import Tenant

pytestmark = pytest.mark.django_db(transaction=True)


def test_tools_over_stdio_with_default_user_and_room(live_server: Any, owner: Tenant) -> None:
    async def scenario() -> None:
        defaults = {"MEMORYHUB_USER": "alice", "MEMORYHUB_ROOM": "chat-1"}
        async with stdio_session(live_server.url, owner.raw_key, **defaults) as session:
            assert {item.name for item in (await session.list_tools()).tools} == TOOLS
            templates = (await session.list_resource_templates()).resource_templates
            assert {item.uri_template for item in templates} == {
                "memoryhub://users/{user}/synopsis",
                "memoryhub://users/{user}/facts",
            }
            turn = data_of(
                await tool(session, "remember", content="I adopted a cat called Miso", role="user")
            )
            assert (turn["user"], turn["room"], turn["role"]) == ("alice", "chat-1", "user")
            fact = data_of(
                await tool(session, "remember", content="Alice has a cat named Miso", kind="fact")
            )
            found = data_of(await tool(session, "recall", query="Miso", mode="keyword", k=5))
            assert {hit["id"] for hit in found["results"]} == {turn["id"], fact["id"]}
            context = data_of(await tool(session, "get_context", query="what pet?", max_tokens=600))
            assert "Miso" in context["prompt"]
            facts = data_of(await tool(session, "list_facts"))
            assert [item["id"] for item in facts["facts"]] == [fact["id"]]
            text = await resource_text(session, "memoryhub://users/alice/facts")
            assert text == "- Alice has a cat named Miso"
            assert data_of(await tool(session, "forget", memory_id=turn["id"]))["deleted"]
            assert "not found (404)" in error_of(
                await tool(session, "forget", memory_id=turn["id"])
            )

    run(scenario())
    with MemoryHub(live_server.url, owner.raw_key) as hub:
        assert [m.kind for m in hub.memories.list(user="alice")] == ["fact"]


def test_read_only_key_over_stdio(live_server: Any, owner: Tenant) -> None:
    async def scenario() -> None:
        async with stdio_session(live_server.url, owner.raw_read_key) as session:
            refused = error_of(await tool(session, "remember", content="x", user="alice"))
            assert "read-only" in refused
            document = error_of(await tool(session, "add_document", text="# A\n\nb", source="a.md"))
            assert "read-only" in document
            assert data_of(await tool(session, "recall", query="x", user="alice"))["count"] == 0

    run(scenario())


def test_wrong_key_is_a_tool_error_not_a_crash(live_server: Any, owner: Tenant) -> None:
    async def scenario() -> None:
        async with stdio_session(live_server.url, "mh_wrong") as session:
            refused = error_of(await tool(session, "recall", query="x", user="alice"))
            assert "refused the API key (401)" in refused
            assert (await session.list_tools()).tools  # the server still answers

    run(scenario())


def test_missing_configuration_exits_with_a_message() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memoryhub_client.mcp_server"],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "MEMORYHUB_URL" in done.stderr
