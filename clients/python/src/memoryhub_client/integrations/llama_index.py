"""LlamaIndex's ``Memory`` with MemoryHub as its long-term memory: a memory block.

``MemoryHubMemoryBlock(hub=None, *, user=None, room=None, max_tokens=None, ...)`` is a
``llama_index.core.memory.BaseMemoryBlock[str]`` (llama-index-core 0.14): put it in
``Memory.from_defaults(session_id=..., memory_blocks=[MemoryHubMemoryBlock(...)])``.

* Writing (``_aput``): the messages ``Memory`` flushes out of its short-term queue
  (when the chat history passes ``token_limit x chat_history_token_ratio``) become
  turns of a MemoryHub room, in one batch request per 500, in their order: kind
  ``message``, the hub's role (user; assistant for assistant/chatbot/model;
  system for system/developer; tool for tool/function), the message's text (a tool
  call without text as ``name(arguments)``; a message with neither is skipped), and
  ``metadata["llama_index_session"]`` the Memory's session id. The hub embeds them,
  summarizes the room past its buffer window and derives facts, with its workers.
* Reading (``_aget``): the hub's context (synopsis, facts, working notes, the room's
  recent window and summary, older memories retrieved by meaning) for the latest user
  message as the query, as the ``prompt`` text ``Memory`` puts in its
  ``<memory><memoryhub>`` section, within ``max_tokens`` tokens (the block's field,
  or ``memory.get(max_tokens=...)``, 100-200,000; None: the project's default). A
  user or room the hub has not seen yet gives the user's context without the room, or
  "" (a new conversation is no failure).
* Truncation (``atruncate``): when ``Memory`` is over its ``token_limit`` it asks the
  hub again for a smaller budget, so the sections are re-fitted rather than cut;
  ``priority`` defaults to 1 for that (0 would never be truncated).

``room`` defaults to the Memory's ``session_id`` (one LlamaIndex session, one hub room)
and ``user`` to the client's default user. A hub room is a conversation of possibly
several participants: its recent turns are in the context of every user in it, while
facts, the synopsis and retrieved memories are the user's own; give each user's
sessions their own ids (LlamaIndex's default, a UUID, is). The hub scopes every call
to the key's project, and a read-only key's write is the client's ``PermissionDenied`` (raised from
``memory.put``: ``Memory`` has already archived the flushed messages in its own
store by then, so they are not lost from the chat store, only from the hub).

``hub`` is a ``MemoryHub`` (default: one from MEMORYHUB_URL / MEMORYHUB_API_KEY),
whose calls run in a worker thread, or an ``AsyncMemoryHub``, awaited: use it only with
the async methods (``aget``, ``aput``) in one event loop, since ``Memory``'s sync methods
run each call in an event loop of their own and the async client's connections belong
to one loop.

Why LlamaIndex rather than CrewAI (the issue asked for one of them): llama-index-core
is a library with a few light dependencies (pydantic, sqlalchemy, tiktoken, which the
hub already has, and nltk, unused here), and its ``Memory`` has a documented slot for
long-term memory (memory blocks) that a hub fills naturally. CrewAI pulls chromadb,
litellm and a pinned onnxruntime, which would fight the hub's own pins in one
environment, and its storage interface is tied to its own RAG stack.
llama-index-core ships the tiktoken file its default tokenizer needs (nothing is
downloaded).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory import BaseMemoryBlock

from memoryhub_client.client import AsyncMemoryHub, MemoryHub
from memoryhub_client.models import Context
from memoryhub_client.partial_context import context_or_partial

__all__ = ["MemoryHubMemoryBlock", "turn_fields"]

SESSION = "llama_index_session"  # metadata key: the Memory's session id
CHUNK = 500  # turns per batch request (the hub takes up to 1,000)
MIN_TOKENS, MAX_TOKENS = 100, 200_000  # the context endpoint's bounds of max_tokens
ROLES = {
    "user": "user",
    "assistant": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}


def _text(message: ChatMessage) -> str:
    """The message's text; a tool call without text as ``name(arguments)``."""
    text = (message.content or "").strip()
    if text:
        return text
    calls = [block for block in message.blocks if isinstance(block, ToolCallBlock)]
    return "\n".join(f"{call.tool_name}({call.tool_kwargs})" for call in calls)


def turn_fields(message: ChatMessage, session_id: str | None) -> dict[str, Any] | None:
    """The hub memory (``add``'s fields) for one flushed message; None when the message
    has no text to keep (an image alone, an empty message)."""
    text = _text(message)
    if not text:
        return None
    role = message.role.value if hasattr(message.role, "value") else str(message.role)
    metadata = {SESSION: session_id} if session_id else {}
    return {"content": text, "kind": "message", "role": ROLES.get(role), "metadata": metadata}


def latest_user_text(messages: Sequence[ChatMessage] | None) -> str | None:
    """The text of the last user message (the query of the context), None if none."""
    for message in reversed(messages or []):
        if message.role == "user" and _text(message):
            return _text(message)
    return None


class MemoryHubMemoryBlock(BaseMemoryBlock[str]):
    """MemoryHub as a long-term memory block of LlamaIndex's ``Memory``: flushed
    messages become turns of a hub room; ``aget`` returns the hub's context."""

    name: str = Field(default="memoryhub", description="The block's name in the prompt.")
    description: str | None = Field(
        default="What MemoryHub knows about the user and the older conversation.",
        description="A description of the memory block.",
    )
    priority: int = Field(default=1, description="Truncation order (0: never truncated).")
    hub: MemoryHub | AsyncMemoryHub = Field(
        default_factory=MemoryHub, exclude=True, description="The MemoryHub client."
    )
    user: str | None = Field(default=None, description="The end user (None: the client's).")
    room: str | None = Field(default=None, description="The room (None: the session id).")
    max_tokens: int | None = Field(
        default=None,
        ge=MIN_TOKENS,
        le=MAX_TOKENS,
        description="The context's token budget (None: the project's default).",
    )
    budgets: dict[str, float] | None = Field(
        default=None, description="Per-section shares of the budget (synopsis, facts...)."
    )
    # the last context's request, for atruncate to ask again with a smaller budget
    _last: tuple[str | None, str | None, int] | None = PrivateAttr(default=None)

    async def _call(self, method: Callable[..., Any], /, **kwargs: Any) -> Any:
        """One client call: awaited (async client) or run in a thread (sync client)."""
        if isinstance(self.hub, AsyncMemoryHub):
            return await cast(Awaitable[Any], method(**kwargs))
        return await asyncio.to_thread(method, **kwargs)

    def _room(self, session_id: str | None) -> str | None:
        return self.room or session_id

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Append ``messages`` to the room as turns, in order (one request per 500)."""
        session_id = next(
            (m.additional_kwargs.get("session_id") for m in messages if m.additional_kwargs),
            None,
        )
        room = self._room(session_id)
        if room is None:
            raise ValueError("a MemoryHubMemoryBlock needs a room or a Memory's session_id")
        turns = [fields for m in messages if (fields := turn_fields(m, session_id)) is not None]
        for start in range(0, len(turns), CHUNK):
            await self._call(
                self.hub.memories.add_batch,
                memories=turns[start : start + CHUNK],
                user=self.user or self.hub.user,
                room=room,
            )

    async def _context(self, query: str | None, room: str | None, max_tokens: int | None) -> str:
        """The hub's prompt text; a room (then a user) it has not seen yet gives less
        (context_or_partial)."""
        hub = self.hub.scoped(user=self.user or self.hub.user)  # no default room

        async def ask(**arguments: Any) -> Context:
            return cast(Context, await self._call(hub.context, **arguments))

        context, where = await context_or_partial(
            ask, room=room, query=query, max_tokens=max_tokens, budgets=self.budgets
        )
        if context is None:
            self._last = None
            return ""
        self._last = (query, where, context.total_tokens)
        return context.prompt.strip()

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """The hub's context for the latest user message (``memory.get(input)``'s, else
        the history's) within ``max_tokens`` (a keyword, else the block's field)."""
        query = latest_user_text(messages)
        max_tokens = block_kwargs.get("max_tokens") or self.max_tokens
        room = self._room(block_kwargs.get("session_id"))
        return await self._context(query, room, max_tokens)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """The same context asked for again with ``tokens_to_truncate`` fewer tokens
        (the hub re-fits its sections); None when that leaves under the hub's minimum."""
        if self._last is None:
            return None
        query, room, total = self._last
        budget = total - tokens_to_truncate
        if budget < MIN_TOKENS:
            return None
        return await self._context(query, room, budget) or None
