"""MemoryHub as an MCP server: one tool set (remember, recall, get_context, forget,
list_facts, add_document) and two resources (a user's synopsis and facts), defined
once over ``AsyncMemoryHub`` and served two ways:

* stdio: ``memoryhub-mcp`` (or ``python -m memoryhub_client.mcp_server``) talks to a
  hub by URL and key, from MEMORYHUB_URL / MEMORYHUB_API_KEY, with the default user and
  room from MEMORYHUB_USER / MEMORYHUB_ROOM. An MCP host (Claude Desktop, an IDE)
  starts it as a subprocess.
* streamable HTTP inside the hub (``memoryhub.mcp``, at ``/mcp/``): the same server,
  whose every tool call goes through the hub's own API with the caller's key.

How a tool gets its client is the ``HubOpener`` given to ``server_build``: stdio shares
one client; the hub opens one per request with the caller's bearer token. A refusal of
the hub (403 read-only key, 404, 400, 429) is a tool error the model reads, never a
crash of the server.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from memoryhub_client.client import AsyncMemoryHub
from memoryhub_client.errors import ConfigurationError, MemoryHubError, NotFound
from memoryhub_client.mcp_results import (
    context_view,
    created_view,
    document_view,
    error_message,
    facts_text,
    facts_view,
    search_view,
    synopsis_text,
)
from memoryhub_client.partial_context import context_or_partial

__all__ = ["HubOpener", "INSTRUCTIONS", "main", "server_build", "stdio_server"]

T = TypeVar("T")
HubOpener = Callable[[Context], AbstractAsyncContextManager[AsyncMemoryHub]]
"""How a tool call gets the client it calls the hub with (its request's ``Context``)."""

EMPTY_CONTEXT: dict[str, Any] = {"prompt": "", "total_tokens": 0, "sections": []}
NOTHING_YET = "Nothing is remembered about this user yet."
NO_TURNS_YET = "This room has no turns yet; the user's other memories are in."

INSTRUCTIONS = (
    "MemoryHub is this agent's long-term memory: conversation turns, facts about users, "
    "documents. Call get_context before answering a user to get what is known about them "
    "(synopsis, facts, recent turns, relevant memories) as ready prompt text; call recall "
    "to look something specific up; call remember to keep a turn or a durable fact. "
    "user and room default to the server's configured ones when left out."
)

User = Annotated[
    str | None,
    Field(description="The end user's id (your own external id). Default: the server's user."),
]
Room = Annotated[
    str | None,
    Field(description="The conversation/room id. Default: the server's room."),
]
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


async def _ask(opener: HubOpener, ctx: Context, action: Callable[..., Awaitable[T]]) -> T:
    """Run ``action(hub)`` with the request's client; the hub's refusal is a ToolError."""
    try:
        async with opener(ctx) as hub:
            return await action(hub)
    except (MemoryHubError, ValueError) as error:
        raise ToolError(error_message(error)) from error


async def _context(
    hub: AsyncMemoryHub, query: str, max_tokens: int, *, user: str | None, room: str | None
) -> dict[str, Any]:
    """The context, or what there is of it for a user or room not written to yet
    (context_or_partial): a new conversation's first call is no failure."""
    asked = room or hub.room
    context, where = await context_or_partial(
        hub.scoped(user=user or hub.user).context, room=asked, query=query, max_tokens=max_tokens
    )
    if context is None:
        return {**EMPTY_CONTEXT, "max_tokens": max_tokens, "note": NOTHING_YET}
    if where != asked:
        return {**context_view(context), "note": NO_TURNS_YET}
    return context_view(context)


async def _read(
    opener: HubOpener, ctx: Context, uri: str, action: Callable[..., Awaitable[T]]
) -> T:
    """As ``_ask`` for a resource: 404 is ResourceNotFoundError, other refusals ResourceError."""
    try:
        async with opener(ctx) as hub:
            return await action(hub)
    except NotFound as error:
        raise ResourceNotFoundError(f"{uri}: no such user in this project") from error
    except (MemoryHubError, ValueError) as error:
        raise ResourceError(f"{uri}: {error_message(error)}") from error


def _add_memory_tools(server: MCPServer[Any], opener: HubOpener) -> None:
    @server.tool(annotations=WRITE)
    async def remember(
        content: Annotated[str, Field(description="The text to keep, as it should be recalled.")],
        ctx: Context,
        kind: Annotated[
            Literal["message", "fact"],
            Field(
                description="message: a conversation turn (give role and room); fact: a "
                "durable statement about the user (e.g. 'Alice is allergic to peanuts')."
            ),
        ] = "message",
        role: Annotated[
            Literal["user", "assistant", "system", "tool"] | None,
            Field(description="Who said it, for a message."),
        ] = None,
        user: User = None,
        room: Room = None,
    ) -> dict[str, Any]:
        """Store a conversation turn or a fact in long-term memory. Call it after a turn
        worth keeping, or when the user states something durable about themselves
        (preferences, relationships, plans). Returns the memory's id (forget takes it);
        it is found by recall at once by its words, by its meaning a moment later."""
        return created_view(
            await _ask(
                opener,
                ctx,
                lambda hub: hub.memories.add(content, kind=kind, role=role, user=user, room=room),
            )
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    async def forget(
        memory_id: Annotated[str, Field(description="The id recall or remember returned.")],
        ctx: Context,
    ) -> dict[str, Any]:
        """Delete one memory for good, by its id: when the user asks to forget something
        or a stored memory is wrong. Returns {"id", "deleted": true}; an id this project
        does not have is an error."""
        await _ask(opener, ctx, lambda hub: hub.memories.delete(memory_id))
        return {"id": memory_id, "deleted": True}


def _add_document_tool(server: MCPServer[Any], opener: HubOpener) -> None:
    @server.tool(annotations=WRITE)
    async def add_document(
        text: Annotated[str, Field(description="The document's full text (Markdown or plain).")],
        source: Annotated[
            str, Field(description="Its name, e.g. 'handbook.md' (.md reads as Markdown).")
        ],
        ctx: Context,
        title: Annotated[str | None, Field(description="A title; default: from the text.")] = None,
    ) -> dict[str, Any]:
        """Add a document to the project's knowledge (shared by every user): the hub
        splits it into chunks and embeds them in the background, after which recall
        finds its passages (kind 'knowledge'). Returns the document's id and status
        ('queued' or 'processing' at first, 'done' when searchable)."""
        return document_view(
            await _ask(
                opener,
                ctx,
                lambda hub: hub.documents.upload_text(text, source=source, title=title),
            )
        )


def _add_search_tools(server: MCPServer[Any], opener: HubOpener) -> None:
    @server.tool(annotations=READ)
    async def recall(
        query: Annotated[str, Field(description="What to look for, in plain words.")],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50, description="How many memories at most.")] = 8,
        mode: Annotated[
            Literal["auto", "vector", "keyword", "hybrid"],
            Field(description="auto (default) picks; keyword matches words only."),
        ] = "auto",
        user: User = None,
        room: Room = None,
    ) -> dict[str, Any]:
        """Search long-term memory for something specific (a name, a date, what was said
        about a topic): the best-matching turns, facts and document passages of the
        user (and room, if given), best first, each with its id, text and score. For a
        ready prompt about the user, call get_context instead."""
        return search_view(
            await _ask(
                opener,
                ctx,
                lambda hub: hub.search(query, k=k, mode=mode, user=user, room=room),
            )
        )

    @server.tool(annotations=READ)
    async def get_context(
        query: Annotated[str, Field(description="The user's latest message or the topic.")],
        ctx: Context,
        max_tokens: Annotated[
            int, Field(ge=100, le=100_000, description="The token budget of the prompt.")
        ] = 2000,
        user: User = None,
        room: Room = None,
    ) -> dict[str, Any]:
        """Before answering the user: everything relevant the hub knows, as prompt text
        within max_tokens (who the user is, their facts, working notes, the room's recent
        history, memories relevant to the query). Use 'prompt' as is. A user or room the
        hub has nothing of yet gives an empty or partial context with a note, not an
        error."""
        return await _ask(
            opener, ctx, lambda hub: _context(hub, query, max_tokens, user=user, room=room)
        )


def _add_facts_tool(server: MCPServer[Any], opener: HubOpener) -> None:
    @server.tool(annotations=READ)
    async def list_facts(
        ctx: Context,
        user: User = None,
        limit: Annotated[int, Field(ge=1, le=200, description="How many at most.")] = 50,
    ) -> dict[str, Any]:
        """The durable facts known about a user (preferences, health, relationships,
        plans), newest first, each with its id. Use it to review or correct what is
        remembered; for answering a question, get_context or recall rank by relevance."""

        async def facts(hub: AsyncMemoryHub) -> dict[str, Any]:
            page = await hub.users.facts_page(user, limit=limit)
            return facts_view(user or hub.user or "", page.results)

        return await _ask(opener, ctx, facts)


def _add_resources(server: MCPServer[Any], opener: HubOpener) -> None:
    @server.resource(
        "memoryhub://users/{user}/synopsis", name="user_synopsis", mime_type="text/plain"
    )
    async def synopsis(user: str, ctx: Context) -> str:
        """Who the user is and what they are about lately, as the hub keeps it written."""
        uri = f"memoryhub://users/{user}/synopsis"
        return synopsis_text(await _read(opener, ctx, uri, lambda hub: hub.users.synopsis(user)))

    @server.resource("memoryhub://users/{user}/facts", name="user_facts", mime_type="text/plain")
    async def facts(user: str, ctx: Context) -> str:
        """The facts known about the user, one a line, newest first."""
        uri = f"memoryhub://users/{user}/facts"
        page = await _read(opener, ctx, uri, lambda hub: hub.users.facts_page(user, limit=200))
        return facts_text(user, page.results)


def server_build(
    opener: HubOpener,
    *,
    lifespan: Callable[[MCPServer[Any]], AbstractAsyncContextManager[Any]] | None = None,
) -> MCPServer[Any]:
    """The MCP server of MemoryHub; each tool call gets its client from ``opener``."""
    server: MCPServer[Any] = MCPServer(
        name="memoryhub",
        title="MemoryHub",
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level="WARNING",
    )
    _add_memory_tools(server, opener)
    _add_document_tool(server, opener)
    _add_search_tools(server, opener)
    _add_facts_tool(server, opener)
    _add_resources(server, opener)
    return server


def stdio_server(hub: AsyncMemoryHub) -> MCPServer[Any]:
    """The server over one shared client (closed when the server stops)."""

    @asynccontextmanager
    async def shared(_ctx: Context) -> AsyncIterator[AsyncMemoryHub]:
        yield hub

    @asynccontextmanager
    async def lifespan(_server: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            await hub.aclose()

    return server_build(shared, lifespan=lifespan)


def main() -> None:
    """``memoryhub-mcp``: serve MCP on stdin/stdout for a hub given by MEMORYHUB_URL and
    MEMORYHUB_API_KEY (default user and room: MEMORYHUB_USER, MEMORYHUB_ROOM)."""
    try:
        hub = AsyncMemoryHub(
            user=os.environ.get("MEMORYHUB_USER") or None,
            room=os.environ.get("MEMORYHUB_ROOM") or None,
        )
    except ConfigurationError as error:
        print(f"memoryhub-mcp: {error.detail}", file=sys.stderr)
        raise SystemExit(2) from error
    stdio_server(hub).run("stdio")


if __name__ == "__main__":
    main()
