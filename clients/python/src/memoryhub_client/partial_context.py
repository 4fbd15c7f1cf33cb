"""The context of a conversation that may be new: the hub answers 404 for a user or
room nothing was written to yet (as for any unknown object), which an agent's first
call before its first write meets. Shared by the MCP tool and the LlamaIndex block."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from memoryhub_client.errors import NotFound
from memoryhub_client.models import Context

__all__ = ["context_or_partial"]


async def context_or_partial(
    ask: Callable[..., Awaitable[Context]], *, room: str | None, **arguments: Any
) -> tuple[Context | None, str | None]:
    """``ask(room=room, **arguments)`` (a client's ``context``, whose default room is
    None: ``hub.scoped(user=...)``); for a room the hub has nothing of yet, the user's
    context without a room; None for a user it has nothing of. With the room it is
    for."""
    for where in [room, None] if room else [None]:
        try:
            return await ask(room=where, **arguments), where
        except NotFound:
            continue
    return None, None
