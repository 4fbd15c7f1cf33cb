"""Client methods made from the endpoint functions, once for the sync client and once
for the async one: each method has its endpoint's signature and docstring, fills in
the client's default ``user`` and ``room`` where the endpoint takes one and the caller
gave none, and sends the call.

A class that holds these methods provides ``_send(call)`` (the answer, or an awaitable
of it) and ``_defaults()`` (the default user and room).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from time import monotonic
from typing import Any, Concatenate, ParamSpec, TypeVar

from memoryhub_client.endpoints.base import Call
from memoryhub_client.errors import DocumentFailed, WaitTimeout
from memoryhub_client.models import Document, Page
from memoryhub_client.pages import AsyncPager, Pager

__all__ = ["ProgressWatch", "async_method", "async_pager", "sync_method", "sync_pager"]

P = ParamSpec("P")
T = TypeVar("T")
Builder = Callable[..., Call[Any]]
Fill = Callable[[Mapping[str, str | None], tuple[Any, ...], dict[str, Any]], Call[Any]]

SCOPE = ("user", "room")


def _filler(builder: Builder, scoped: bool) -> Fill:
    """Build the call, the client's default user/room standing in for a missing one."""
    signature = inspect.signature(builder)
    names = [name for name in SCOPE if scoped and name in signature.parameters]

    def build(
        defaults: Mapping[str, str | None], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Call[Any]:
        if not names:
            return builder(*args, **kwargs)
        bound = signature.bind_partial(*args, **kwargs)
        for name in names:
            if bound.arguments.get(name) is None and defaults.get(name) is not None:
                bound.arguments[name] = defaults[name]
        return builder(*bound.args, **bound.kwargs)

    return build


def _returned(annotation: Any, pager: str) -> Any:
    """What the method returns, from the endpoint's ``Call[X]``: X, or ``Pager[Y]`` for
    a list's ``Call[Page[Y]]`` (annotations are strings here: postponed evaluation)."""
    text = str(annotation)
    if not (text.startswith("Call[") and text.endswith("]")):
        return annotation
    inner = text[len("Call[") : -1]
    if pager and inner.startswith("Page["):
        return f"{pager}[{inner[len('Page[') :]}"
    return inner


def _dressed(method: Any, builder: Builder, *, pager: str = "") -> Any:
    """``method`` with the endpoint's name, docstring and signature (plus ``self``), so
    that help(), IDEs and inspect show what the endpoint takes and what comes back."""
    signature = inspect.signature(builder)
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = signature.replace(
        parameters=[self_parameter, *signature.parameters.values()],
        return_annotation=_returned(signature.return_annotation, pager),
    )
    method.__doc__ = builder.__doc__
    method.__name__ = builder.__name__
    method.__qualname__ = builder.__qualname__
    return method


def sync_method(
    builder: Callable[P, Call[T]], *, scoped: bool = True
) -> Callable[Concatenate[Any, P], T]:
    """A method that sends ``builder``'s call and returns its answer."""
    fill = _filler(builder, scoped)

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = self._send(fill(self._defaults(), args, dict(kwargs)))
        return result

    return _dressed(method, builder)  # type: ignore[no-any-return]


def async_method(
    builder: Callable[P, Call[T]], *, scoped: bool = True
) -> Callable[Concatenate[Any, P], Awaitable[T]]:
    """A coroutine method that sends ``builder``'s call and returns its answer."""
    fill = _filler(builder, scoped)

    async def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = await self._send(fill(self._defaults(), args, dict(kwargs)))
        return result

    return _dressed(method, builder)  # type: ignore[no-any-return]


def sync_pager(
    builder: Callable[P, Call[Page[T]]], *, scoped: bool = True
) -> Callable[Concatenate[Any, P], Pager[T]]:
    """A method returning a lazy iterator over every page of ``builder``'s list
    (``limit`` is the page size, ``cursor`` where to start)."""
    fill = _filler(builder, scoped)

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> Pager[T]:
        defaults, given = self._defaults(), dict(kwargs)
        start = given.pop("cursor", None)
        assert start is None or isinstance(start, str), "cursor must be a string"

        def fetch(cursor: str | None) -> Page[T]:
            page: Page[T] = self._send(fill(defaults, args, {**given, "cursor": cursor}))
            return page

        return Pager(fetch, start)

    return _dressed(method, builder, pager="Pager")  # type: ignore[no-any-return]


def async_pager(
    builder: Callable[P, Call[Page[T]]], *, scoped: bool = True
) -> Callable[Concatenate[Any, P], AsyncPager[T]]:
    """``sync_pager`` for the async client (``async for``)."""
    fill = _filler(builder, scoped)

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> AsyncPager[T]:
        defaults, given = self._defaults(), dict(kwargs)
        start = given.pop("cursor", None)
        assert start is None or isinstance(start, str), "cursor must be a string"

        def fetch(cursor: str | None) -> Awaitable[Page[T]]:
            page: Awaitable[Page[T]] = self._send(fill(defaults, args, {**given, "cursor": cursor}))
            return page

        return AsyncPager(fetch, start)

    return _dressed(method, builder, pager="AsyncPager")  # type: ignore[no-any-return]


class ProgressWatch:
    """The rules of waiting for a document's ingestion, for both clients' loops: call
    ``seen(document)`` after each poll; it returns how long to sleep before the next,
    or None once the document is done; raises DocumentFailed or WaitTimeout."""

    def __init__(
        self,
        *,
        timeout: float,
        interval: float,
        on_progress: Callable[[Document], Any] | None,
    ) -> None:
        self.deadline = monotonic() + timeout
        self.timeout = timeout
        self.interval = interval
        self.on_progress = on_progress
        self._last: tuple[str, int, int] | None = None

    def seen(self, document: Document) -> float | None:
        state = (document.status, document.progress.done, document.progress.total)
        if self.on_progress is not None and state != self._last:
            self.on_progress(document)  # only when something moved
        self._last = state
        if document.status == "done":
            return None
        if document.status == "failed":
            raise DocumentFailed(document)
        left = self.deadline - monotonic()
        if left <= 0:
            raise WaitTimeout(
                f"document {document.id} still {document.status} after {self.timeout:g} s",
                document,
            )
        return min(self.interval, left)
