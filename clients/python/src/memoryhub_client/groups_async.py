"""The async client's method groups: the sync client's (groups.py), each method a
coroutine. Lists return an ``AsyncPager`` (``async for``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from memoryhub_client.endpoints import documents as documents_
from memoryhub_client.endpoints import memories as memories_
from memoryhub_client.endpoints import people, project
from memoryhub_client.endpoints import rooms as rooms_
from memoryhub_client.endpoints.base import Call
from memoryhub_client.methods import ProgressWatch, async_method, async_pager
from memoryhub_client.models import Document

__all__ = [
    "AsyncGroup",
    "AsyncBuffer",
    "AsyncDocuments",
    "AsyncEmbedding",
    "AsyncLlm",
    "AsyncMemories",
    "AsyncPrune",
    "AsyncProjectSettings",
    "AsyncRooms",
    "AsyncUsers",
    "AsyncWorking",
]

T = TypeVar("T")


class AsyncGroup:
    """Methods sent through the async client that holds them."""

    def __init__(self, hub: Any) -> None:
        self._hub = hub

    def _send(self, call: Call[T]) -> Awaitable[T]:
        result: Awaitable[T] = self._hub._send(call)
        return result

    def _defaults(self) -> Mapping[str, str | None]:
        defaults: Mapping[str, str | None] = self._hub._defaults()
        return defaults


class AsyncMemories(AsyncGroup):
    """Memories of every kind: store, list, count, get, update, delete, revisions."""

    add = async_method(memories_.memory_add)
    add_batch = async_method(memories_.memory_add_batch)
    list = async_pager(memories_.memories_page)
    page = async_method(memories_.memories_page)
    count = async_method(memories_.memories_count)
    get = async_method(memories_.memory_get)
    update = async_method(memories_.memory_update)
    delete = async_method(memories_.memory_delete)
    delete_where = async_method(memories_.memories_delete_where)
    revisions = async_pager(memories_.memory_revisions_page)
    revisions_page = async_method(memories_.memory_revisions_page)


class AsyncUsers(AsyncGroup):
    """End users (your external ids), their facts, synopsis and export."""

    create = async_method(people.user_create)
    list = async_pager(people.users_page)
    page = async_method(people.users_page)
    get = async_method(people.user_get)
    update = async_method(people.user_update)
    delete = async_method(people.user_delete)
    facts = async_pager(people.user_facts_page)
    facts_page = async_method(people.user_facts_page)
    synopsis = async_method(people.user_synopsis)
    update_synopsis = async_method(people.user_synopsis_update)
    refresh_synopsis = async_method(people.user_synopsis_refresh)
    export = async_method(people.user_export)


class AsyncRooms(AsyncGroup):
    """Rooms (conversations, your external ids), their settings and export."""

    create = async_method(people.room_create)
    list = async_pager(people.rooms_page)
    page = async_method(people.rooms_page)
    get = async_method(people.room_get)
    update = async_method(people.room_update)
    delete = async_method(people.room_delete)
    export = async_method(people.room_export)


class AsyncBuffer(AsyncGroup):
    """A room's recent turns: the window and buffer search."""

    window = async_method(rooms_.buffer_window)
    search = async_method(rooms_.buffer_search)


class AsyncWorking(AsyncGroup):
    """A room's working memory: short-lived notes in Redis."""

    add = async_method(rooms_.working_add)
    list = async_method(rooms_.working_list)
    search = async_method(rooms_.working_search)
    delete = async_method(rooms_.working_delete)
    clear = async_method(rooms_.working_clear)


class AsyncDocuments(AsyncGroup):
    """Documents: upload, follow ingestion, chunks, reingest, delete (project-level:
    the client's default user is not applied; pass ``user`` to scope one)."""

    upload = async_method(documents_.document_upload, scoped=False)
    upload_text = async_method(documents_.document_upload_text, scoped=False)
    list = async_pager(documents_.documents_page, scoped=False)
    page = async_method(documents_.documents_page, scoped=False)
    get = async_method(documents_.document_get)
    chunks = async_pager(documents_.document_chunks_page)
    chunks_page = async_method(documents_.document_chunks_page)
    reingest = async_method(documents_.document_reingest)
    delete = async_method(documents_.document_delete)

    async def wait_until_done(
        self,
        document_id: str,
        *,
        timeout: float = 600.0,
        interval: float = 0.5,
        on_progress: Callable[[Document], Any] | None = None,
    ) -> Document:
        """``Documents.wait_until_done`` for the async client (sleeps without blocking)."""
        watch = ProgressWatch(timeout=timeout, interval=interval, on_progress=on_progress)
        while True:
            document = await self.get(document_id)
            pause = watch.seen(document)
            if pause is None:
                return document
            await asyncio.sleep(pause)


class AsyncPrune(AsyncGroup):
    """Pruning (project-level): preview, run, past runs."""

    preview = async_method(project.prune_preview, scoped=False)
    run = async_method(project.prune_run, scoped=False)
    runs = async_pager(project.prune_runs_page)
    runs_page = async_method(project.prune_runs_page)
    get = async_method(project.prune_run_get)


class AsyncProjectSettings(AsyncGroup):
    """The project's configuration (a room's own settings: ``rooms.update``)."""

    get = async_method(project.settings_get)
    update = async_method(project.settings_update)
    revisions = async_pager(project.settings_revisions_page)
    revisions_page = async_method(project.settings_revisions_page)


class AsyncEmbedding(AsyncGroup):
    """The project's embedding model and its switch to another."""

    get = async_method(project.embedding_get)
    switch = async_method(project.embedding_switch)
    cancel = async_method(project.embedding_switch_cancel)


class AsyncLlm(AsyncGroup):
    """What the project's optional LLM spent this month against its budget."""

    usage = async_method(project.llm_usage_get)
