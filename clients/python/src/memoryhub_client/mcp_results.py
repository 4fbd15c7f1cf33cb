"""What the MCP tools hand back: the client's results made small JSON objects an LLM
reads at a glance (ids, text, scores; no bookkeeping fields), and the client's errors
made one sentence that says what went wrong and what to do about it.

Pure functions over ``memoryhub_client`` results: no MCP, no I/O (``mcp_server`` uses
them for stdio and for the hub's own ``/mcp/`` endpoint alike).
"""

from __future__ import annotations

from typing import Any

from memoryhub_client.errors import (
    AuthenticationError,
    BadRequest,
    ConnectionFailed,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServerError,
)
from memoryhub_client.models import Context, Document, Memory, MemoryCreated, SearchResult, Synopsis

__all__ = [
    "context_view",
    "created_view",
    "document_view",
    "error_message",
    "facts_text",
    "facts_view",
    "memory_view",
    "search_view",
    "synopsis_text",
]


def memory_view(memory: Memory) -> dict[str, Any]:
    """One memory as a tool shows it: where it belongs, what it says, when."""
    view: dict[str, Any] = {
        "id": memory.id,
        "kind": memory.kind,
        "content": memory.content,
        "user": memory.user,
        "room": memory.room,
        "created_at": memory.created_at.isoformat() if memory.created_at else None,
    }
    if memory.role:
        view["role"] = memory.role
    if memory.confidence is not None:
        view["confidence"] = memory.confidence
    return view


def created_view(created: MemoryCreated) -> dict[str, Any]:
    """``remember``'s answer: the new memory's id (``created`` False: it was already kept)."""
    return {"created": created.created, **memory_view(created.memory)}


def search_view(found: SearchResult) -> dict[str, Any]:
    """``recall``'s answer: the hits best first, each with its score and, where the hub
    compared meanings, a similarity in 0..1."""
    results = []
    for hit in found.results:
        item = memory_view(hit.memory)
        item["score"] = round(hit.score, 4)
        if hit.similarity is not None:
            item["similarity"] = round(hit.similarity, 4)
        results.append(item)
    return {"mode": found.mode, "count": len(results), "results": results}


def context_view(context: Context) -> dict[str, Any]:
    """``get_context``'s answer: the prompt text to use as is, and its size in tokens."""
    return {
        "prompt": context.prompt,
        "total_tokens": context.total_tokens,
        "max_tokens": context.max_tokens,
        "sections": [section.name for section in context.sections],
    }


def facts_view(user: str, facts: list[Memory]) -> dict[str, Any]:
    """``list_facts``'s answer: what the hub knows about ``user``, newest first."""
    return {"user": user, "count": len(facts), "facts": [memory_view(fact) for fact in facts]}


def document_view(document: Document) -> dict[str, Any]:
    """``add_document``'s answer: the document's id and where its ingestion stands."""
    return {
        "id": document.id,
        "source": document.source,
        "title": document.title,
        "status": document.status,
        "duplicate": document.duplicate,
    }


def facts_text(user: str, facts: list[Memory]) -> str:
    """The facts resource: one fact a line."""
    if not facts:
        return f"No facts known about {user} yet."
    return "\n".join(f"- {fact.content}" for fact in facts)


def synopsis_text(synopsis: Synopsis) -> str:
    """The synopsis resource: who the user is, then what they are about lately."""
    parts = [
        f"Identity: {synopsis.identity.text.strip() or '(not written yet)'}",
        f"Context: {synopsis.context.text.strip() or '(not written yet)'}",
    ]
    return "\n\n".join(parts)


def _fields_text(fields: dict[str, Any]) -> str:
    def flat(value: Any) -> str:
        return "; ".join(map(str, value)) if isinstance(value, list) else str(value)

    return ", ".join(f"{name}: {flat(value)}" for name, value in fields.items())


def error_message(error: Exception) -> str:
    """One sentence for the model: what the hub refused and what to do (never a key).
    The SDK names the tool before it ("Error executing tool remember: ...")."""
    if isinstance(error, PermissionDenied):
        return (
            f"not allowed: the hub refused with 403 ({error.detail}). This API key is "
            "read-only: it can recall, get_context and list_facts, but remember, forget "
            "and add_document need a read-write key."
        )
    if isinstance(error, NotFound):
        return f"not found (404): {error.detail}. Nothing with that id in this project."
    if isinstance(error, BadRequest):
        fields = _fields_text(error.fields)
        return f"the hub refused the arguments ({error.status}): {fields or error.detail}"
    if isinstance(error, AuthenticationError):
        return f"the hub refused the API key (401): {error.detail}"
    if isinstance(error, RateLimited):
        wait = f" Retry in {error.retry_after:.0f} s." if error.retry_after else ""
        return f"rate limited (429): too many calls for this key.{wait}"
    if isinstance(error, ServerError):
        return f"the hub failed ({error.status}): {error.detail}. Try again later."
    if isinstance(error, ConnectionFailed):
        return f"the hub could not be reached: {error.detail}"
    return str(error)  # another MemoryHubError, or a ValueError: no user given, no default
