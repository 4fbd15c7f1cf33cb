"""MemoryHub's Python client.

    from memoryhub_client import MemoryHub

    hub = MemoryHub()  # MEMORYHUB_URL, MEMORYHUB_API_KEY
    hub.memories.add("I adopted a cat called Miso", user="alice", room="chat-1", role="user")
    hits = hub.search("what pet does she have?", user="alice").results

``AsyncMemoryHub`` has the same methods as coroutines. ``memoryhub_client.xaibo`` is
the Xaibo memory protocol over the hub, ``memoryhub_client.buffer`` a MUXI-style
buffer memory backed by a room.
"""

from __future__ import annotations

from memoryhub_client.client import AsyncMemoryHub, MemoryHub
from memoryhub_client.errors import (
    AuthenticationError,
    BadRequest,
    ConfigurationError,
    Conflict,
    ConnectionFailed,
    DocumentFailed,
    MemoryHubError,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServerError,
    Timeout,
    Unavailable,
    WaitTimeout,
)
from memoryhub_client.models import (
    BufferHit,
    BufferSearchResult,
    BufferWindow,
    Chunk,
    Context,
    ContextItem,
    ContextSection,
    Document,
    EmbeddingChoice,
    EmbeddingState,
    EmbeddingSwitch,
    ImportResult,
    Memory,
    MemoryCreated,
    MemoryRevision,
    Page,
    PruneRun,
    Room,
    SearchHit,
    SearchResult,
    Settings,
    Synopsis,
    User,
    WorkingItem,
    WorkingList,
    WorkingSearchResult,
)
from memoryhub_client.pages import AsyncPager, Pager

__version__ = "0.1.0"

__all__ = [
    "AsyncMemoryHub",
    "AsyncPager",
    "AuthenticationError",
    "BadRequest",
    "BufferHit",
    "BufferSearchResult",
    "BufferWindow",
    "Chunk",
    "ConfigurationError",
    "Conflict",
    "ConnectionFailed",
    "Context",
    "ContextItem",
    "ContextSection",
    "Document",
    "DocumentFailed",
    "EmbeddingChoice",
    "EmbeddingState",
    "EmbeddingSwitch",
    "ImportResult",
    "Memory",
    "MemoryCreated",
    "MemoryHub",
    "MemoryHubError",
    "MemoryRevision",
    "NotFound",
    "Page",
    "Pager",
    "PermissionDenied",
    "PruneRun",
    "RateLimited",
    "Room",
    "SearchHit",
    "SearchResult",
    "ServerError",
    "Settings",
    "Synopsis",
    "Timeout",
    "Unavailable",
    "User",
    "WaitTimeout",
    "WorkingItem",
    "WorkingList",
    "WorkingSearchResult",
]
