"""The sync client's method groups, as the API groups its endpoints: ``hub.memories``,
``hub.users``, ``hub.rooms``, ``hub.buffer``, ``hub.working``, ``hub.documents``,
``hub.prune``, ``hub.settings``, ``hub.embedding``. Each method is an endpoint function of
``memoryhub_client.endpoints`` (same arguments, same docstring), sent."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from memoryhub_client.endpoints import documents as documents_
from memoryhub_client.endpoints import memories as memories_
from memoryhub_client.endpoints import people, project
from memoryhub_client.endpoints import rooms as rooms_
from memoryhub_client.endpoints.base import Call
from memoryhub_client.methods import ProgressWatch, sync_method, sync_pager
from memoryhub_client.models import Document

__all__ = [
    "Buffer",
    "Documents",
    "Embedding",
    "Memories",
    "Prune",
    "ProjectSettings",
    "Rooms",
    "Users",
    "Working",
]

T = TypeVar("T")


class Group:
    """Methods sent through the client that holds them (its defaults, its connection)."""

    def __init__(self, hub: Any) -> None:
        self._hub = hub

    def _send(self, call: Call[T]) -> T:
        result: T = self._hub._send(call)
        return result

    def _defaults(self) -> Mapping[str, str | None]:
        defaults: Mapping[str, str | None] = self._hub._defaults()
        return defaults


class Memories(Group):
    """Memories of every kind: store, list, count, get, update, delete, revisions."""

    add = sync_method(memories_.memory_add)
    add_batch = sync_method(memories_.memory_add_batch)
    list = sync_pager(memories_.memories_page)
    page = sync_method(memories_.memories_page)
    count = sync_method(memories_.memories_count)
    get = sync_method(memories_.memory_get)
    update = sync_method(memories_.memory_update)
    delete = sync_method(memories_.memory_delete)
    delete_where = sync_method(memories_.memories_delete_where)
    revisions = sync_pager(memories_.memory_revisions_page)
    revisions_page = sync_method(memories_.memory_revisions_page)


class Users(Group):
    """End users (your external ids), their facts, synopsis and export."""

    create = sync_method(people.user_create)
    list = sync_pager(people.users_page)
    page = sync_method(people.users_page)
    get = sync_method(people.user_get)
    update = sync_method(people.user_update)
    delete = sync_method(people.user_delete)
    facts = sync_pager(people.user_facts_page)
    facts_page = sync_method(people.user_facts_page)
    synopsis = sync_method(people.user_synopsis)
    update_synopsis = sync_method(people.user_synopsis_update)
    refresh_synopsis = sync_method(people.user_synopsis_refresh)
    export = sync_method(people.user_export)


class Rooms(Group):
    """Rooms (conversations, your external ids), their settings and export."""

    create = sync_method(people.room_create)
    list = sync_pager(people.rooms_page)
    page = sync_method(people.rooms_page)
    get = sync_method(people.room_get)
    update = sync_method(people.room_update)
    delete = sync_method(people.room_delete)
    export = sync_method(people.room_export)


class Buffer(Group):
    """A room's recent turns: the window and buffer search."""

    window = sync_method(rooms_.buffer_window)
    search = sync_method(rooms_.buffer_search)


class Working(Group):
    """A room's working memory: short-lived notes in Redis."""

    add = sync_method(rooms_.working_add)
    list = sync_method(rooms_.working_list)
    search = sync_method(rooms_.working_search)
    delete = sync_method(rooms_.working_delete)
    clear = sync_method(rooms_.working_clear)


class Documents(Group):
    """Documents: upload, follow ingestion, chunks, reingest, delete (project-level:
    the client's default user is not applied; pass ``user`` to scope one)."""

    upload = sync_method(documents_.document_upload, scoped=False)
    upload_text = sync_method(documents_.document_upload_text, scoped=False)
    list = sync_pager(documents_.documents_page, scoped=False)
    page = sync_method(documents_.documents_page, scoped=False)
    get = sync_method(documents_.document_get)
    chunks = sync_pager(documents_.document_chunks_page)
    chunks_page = sync_method(documents_.document_chunks_page)
    reingest = sync_method(documents_.document_reingest)
    delete = sync_method(documents_.document_delete)

    def wait_until_done(
        self,
        document_id: str,
        *,
        timeout: float = 600.0,
        interval: float = 0.5,
        on_progress: Callable[[Document], Any] | None = None,
    ) -> Document:
        """Poll the document every ``interval`` s until its ingestion is done and return
        it; ``on_progress(document)`` is called whenever its status or progress moved.
        Raises DocumentFailed (status failed, with its ``error``) or WaitTimeout."""
        watch = ProgressWatch(timeout=timeout, interval=interval, on_progress=on_progress)
        while True:
            document = self.get(document_id)
            pause = watch.seen(document)
            if pause is None:
                return document
            time.sleep(pause)


class Prune(Group):
    """Pruning (project-level): preview, run, past runs."""

    preview = sync_method(project.prune_preview, scoped=False)
    run = sync_method(project.prune_run, scoped=False)
    runs = sync_pager(project.prune_runs_page)
    runs_page = sync_method(project.prune_runs_page)
    get = sync_method(project.prune_run_get)


class ProjectSettings(Group):
    """The project's configuration (a room's own settings: ``rooms.update``)."""

    get = sync_method(project.settings_get)
    update = sync_method(project.settings_update)
    revisions = sync_pager(project.settings_revisions_page)
    revisions_page = sync_method(project.settings_revisions_page)


class Embedding(Group):
    """The project's embedding model and its switch to another."""

    get = sync_method(project.embedding_get)
    switch = sync_method(project.embedding_switch)
    cancel = sync_method(project.embedding_switch_cancel)


class Llm(Group):
    """What the project's optional LLM spent this month against its budget."""

    usage = sync_method(project.llm_usage_get)
