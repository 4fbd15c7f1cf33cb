"""``MemoryHub`` (sync) and ``AsyncMemoryHub``: the same methods, one blocking, one
coroutines. Both send the calls of ``memoryhub_client.endpoints`` with the rules of
``sending`` (retries, Idempotency-Key, errors); only their send loops differ.

The API key lives only in the HTTP client's headers (httpx hides it in reprs): no
attribute, repr, log line or exception of this package holds it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from typing import Any, TypeVar

import httpx

from memoryhub_client import groups, groups_async
from memoryhub_client.endpoints import project
from memoryhub_client.endpoints.base import Call
from memoryhub_client.errors import ConfigurationError
from memoryhub_client.methods import async_method, sync_method
from memoryhub_client.sending import USER_AGENT, Attempts, RetryPolicy, request_build

__all__ = ["AsyncMemoryHub", "MemoryHub"]

T = TypeVar("T")
H = TypeVar("H", bound="_Base")
URL_VARIABLE = "MEMORYHUB_URL"
KEY_VARIABLE = "MEMORYHUB_API_KEY"


def hub_url(url: str | None) -> str:
    """The hub's base URL (``http://host:8000``; a trailing ``/api/v1/`` is dropped),
    from the argument or MEMORYHUB_URL."""
    value = (url or os.environ.get(URL_VARIABLE, "")).strip()
    if not value:
        raise ConfigurationError(
            f"no hub URL: pass url=... or set {URL_VARIABLE} (e.g. http://127.0.0.1:8000)"
        )
    if not value.startswith(("http://", "https://")):
        raise ConfigurationError(f"the hub URL must start with http:// or https://: {value!r}")
    value = value.rstrip("/")
    return value[: -len("/api/v1")] if value.endswith("/api/v1") else value


def api_key_of(api_key: str | None) -> str:
    """The project API key, from the argument or MEMORYHUB_API_KEY (never echoed)."""
    value = (api_key or os.environ.get(KEY_VARIABLE, "")).strip()
    if not value:
        raise ConfigurationError(
            f"no API key: pass api_key=... or set {KEY_VARIABLE} (`make run` prints one)"
        )
    return value


class _Base:
    """What both clients share: the URL, defaults, retry policy and HTTP settings."""

    def __init__(
        self,
        url: str | None,
        *,
        timeout: float,
        retries: int,
        backoff: float,
        max_retry_wait: float,
        user: str | None,
        room: str | None,
    ) -> None:
        self.url = hub_url(url)
        self.user = user
        self.room = room
        self.timeout = timeout
        self._policy = RetryPolicy(retries=retries, backoff=backoff, max_wait=max_retry_wait)

    def _http_options(self, api_key: str | None) -> dict[str, Any]:
        """The HTTP client's settings; the key goes into its headers and nowhere else."""
        return {
            "base_url": self.url,
            "headers": {
                "Authorization": f"Bearer {api_key_of(api_key)}",
                "Accept": "application/json",
                "User-Agent": USER_AGENT,
            },
            "timeout": httpx.Timeout(self.timeout),
        }

    def _defaults(self) -> Mapping[str, str | None]:
        return {"user": self.user, "room": self.room}

    def _groups(self) -> None:
        """Make the method groups (``hub.memories``...), bound to this client."""

    def scoped(self: H, *, user: str | None = None, room: str | None = None) -> H:
        """A client with other default user and room, on the same connections (closing
        either closes both)."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.user, other.room = user, room
        other._groups()
        return other

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r}, user={self.user!r}, room={self.room!r})"


class MemoryHub(_Base):
    """The sync client. ``url``/``api_key`` default to MEMORYHUB_URL/MEMORYHUB_API_KEY;
    ``user``/``room`` are the defaults of calls about one user's or room's memories;
    ``timeout`` bounds each attempt (s); ``retries`` more attempts on 429/503 (after
    ``Retry-After``, if at most ``max_retry_wait``), 502/504 and connection errors;
    ``transport`` is an httpx transport (e.g. ``httpx.WSGITransport(app)`` in-process).
    """

    search = sync_method(project.search)
    context = sync_method(project.context_build)
    import_data = sync_method(project.import_data, scoped=False)

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_retry_wait: float = 30.0,
        user: str | None = None,
        room: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            url,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_retry_wait=max_retry_wait,
            user=user,
            room=room,
        )
        self._http = httpx.Client(transport=transport, **self._http_options(api_key))
        self._groups()

    def _groups(self) -> None:
        self.memories = groups.Memories(self)
        self.users = groups.Users(self)
        self.rooms = groups.Rooms(self)
        self.buffer = groups.Buffer(self)
        self.working = groups.Working(self)
        self.documents = groups.Documents(self)
        self.prune = groups.Prune(self)
        self.settings = groups.ProjectSettings(self)
        self.embedding = groups.Embedding(self)
        self.llm = groups.Llm(self)

    def _send(self, call: Call[T]) -> T:
        """Send ``call`` with its retries; its answer, or its error."""
        attempts = Attempts(call, self._policy)
        while True:
            response: httpx.Response | None = None
            error: httpx.TransportError | None = None
            try:
                response = self._http.send(
                    request_build(self._http, call, attempts.idempotency_key)
                )
            except httpx.TransportError as failure:
                error = failure
            wait = attempts.next_wait(response, error)
            if wait is None and response is not None:
                return attempts.result(response)
            time.sleep(wait or 0.0)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryHub:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncMemoryHub(_Base):
    """The async client: ``MemoryHub``'s methods as coroutines (lists are async
    iterators); ``transport`` is an ``httpx.AsyncBaseTransport`` (e.g.
    ``httpx.ASGITransport(app)``)."""

    search = async_method(project.search)
    context = async_method(project.context_build)
    import_data = async_method(project.import_data, scoped=False)

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_retry_wait: float = 30.0,
        user: str | None = None,
        room: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            url,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_retry_wait=max_retry_wait,
            user=user,
            room=room,
        )
        self._http = httpx.AsyncClient(transport=transport, **self._http_options(api_key))
        self._groups()

    def _groups(self) -> None:
        self.memories = groups_async.AsyncMemories(self)
        self.users = groups_async.AsyncUsers(self)
        self.rooms = groups_async.AsyncRooms(self)
        self.buffer = groups_async.AsyncBuffer(self)
        self.working = groups_async.AsyncWorking(self)
        self.documents = groups_async.AsyncDocuments(self)
        self.prune = groups_async.AsyncPrune(self)
        self.settings = groups_async.AsyncProjectSettings(self)
        self.embedding = groups_async.AsyncEmbedding(self)
        self.llm = groups_async.AsyncLlm(self)

    async def _send(self, call: Call[T]) -> T:
        """Send ``call`` with its retries; its answer, or its error."""
        attempts = Attempts(call, self._policy)
        while True:
            response: httpx.Response | None = None
            error: httpx.TransportError | None = None
            try:
                request = request_build(self._http, call, attempts.idempotency_key)
                response = await self._http.send(request)
            except httpx.TransportError as failure:
                error = failure
            wait = attempts.next_wait(response, error)
            if wait is None and response is not None:
                return attempts.result(response)
            await asyncio.sleep(wait or 0.0)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryHub:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
