"""MCP sessions for the tests, opened with the SDK's own client: over streamable HTTP
against the live hub's ``/mcp/`` and over stdio against ``python -m
memoryhub_client.mcp_server`` pointed at the live hub; and readers of tool results."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent, TextResourceContents


@asynccontextmanager
async def http_session(
    hub_url: str, key: str, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized session with the hub's ``/mcp/``, authenticated by ``key``."""
    client = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}", **(headers or {})}, timeout=60.0
    )
    async with (
        client,
        streamable_http_client(f"{hub_url}/mcp/", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def stdio_parameters(hub_url: str, key: str, **env: str) -> StdioServerParameters:
    """``memoryhub-mcp`` as an MCP host starts it, run from this venv's Python."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memoryhub_client.mcp_server"],
        env={"MEMORYHUB_URL": hub_url, "MEMORYHUB_API_KEY": key, **env},
    )


@asynccontextmanager
async def stdio_session(hub_url: str, key: str, **env: str) -> AsyncIterator[ClientSession]:
    """An initialized session with a stdio server process talking to the hub."""
    async with (
        stdio_client(stdio_parameters(hub_url, key, **env)) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def data_of(result: CallToolResult) -> dict[str, Any]:
    """A successful tool call's structured answer (its error text fails the test)."""
    assert not result.is_error, text_of(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def error_of(result: CallToolResult) -> str:
    """A failed tool call's message (a success fails the test)."""
    assert result.is_error, result.structured_content
    return text_of(result)


async def resource_text(session: ClientSession, uri: str) -> str:
    contents = (await session.read_resource(uri)).contents
    return "\n".join(item.text for item in contents if isinstance(item, TextResourceContents))


async def tool(session: ClientSession, name: str, **arguments: Any) -> CallToolResult:
    return await session.call_tool(name, arguments)


TOOLS = {"remember", "recall", "get_context", "forget", "list_facts", "add_document"}
