"""Lists as lazy iterators over the hub's keyset pages (``{count, next_cursor,
results}``): the next page is fetched only when the items of the last are used up."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Generic, TypeVar

from memoryhub_client.models.base import Page

__all__ = ["AsyncPager", "Pager"]

T = TypeVar("T")


class Pager(Generic[T]):
    """Every item of a list, page after page (``for memory in hub.memories.list()``);
    ``pages()`` gives the pages themselves, ``first_page()`` only the first (its
    ``count`` is the total over all pages)."""

    def __init__(self, fetch: Callable[[str | None], Page[T]], cursor: str | None = None):
        self._fetch = fetch
        self._cursor = cursor

    def pages(self) -> Iterator[Page[T]]:
        cursor = self._cursor
        while True:
            page = self._fetch(cursor)
            yield page
            if not page.next_cursor or not page.results:
                return
            cursor = page.next_cursor

    def __iter__(self) -> Iterator[T]:
        for page in self.pages():
            yield from page.results

    def first_page(self) -> Page[T]:
        return self._fetch(self._cursor)


class AsyncPager(Generic[T]):
    """``Pager`` for the async client: ``async for memory in hub.memories.list()``."""

    def __init__(
        self, fetch: Callable[[str | None], Awaitable[Page[T]]], cursor: str | None = None
    ):
        self._fetch = fetch
        self._cursor = cursor

    async def pages(self) -> AsyncIterator[Page[T]]:
        cursor = self._cursor
        while True:
            page = await self._fetch(cursor)
            yield page
            if not page.next_cursor or not page.results:
                return
            cursor = page.next_cursor

    async def __aiter__(self) -> AsyncIterator[T]:
        async for page in self.pages():
            for item in page.results:
                yield item

    async def first_page(self) -> Page[T]:
        return await self._fetch(self._cursor)

    async def collect(self) -> list[T]:
        """Every item in one list (all pages fetched)."""
        return [item async for item in self]
