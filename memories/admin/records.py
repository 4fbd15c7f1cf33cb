"""Records of what happened, read-only: memory and settings revisions, stored
idempotent responses, maintenance runs; the embedding spaces and vectors; the memory
tallies."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from memories.admin.base import LargeTableAdmin, ReadOnlyAdmin, as_uuid, changes_html, pretty_json
from memories.models import (
    Embedding,
    EmbeddingSpace,
    IdempotencyKey,
    MaintenanceRun,
    MemoryRevision,
    MemoryTally,
    SettingsRevision,
)

CHANGE_SHOWN = 80  # characters of each value a revision list shows (its page: all)


def memory_link(memory_id: Any, public_id: Any = None) -> str:
    """A link to the memory's page (a deleted memory's page says it no longer exists),
    named by the id its clients know (``public_id``) when given."""
    url = reverse("admin:memories_memory_change", args=[memory_id])
    return format_html('<a href="{}">{}</a>', url, public_id or memory_id)


class RevisionAdmin(ReadOnlyAdmin, LargeTableAdmin):
    """A change history: who, when, before and after; never edited. Newest first by id
    (the primary key's index: created_at has none of its own)."""

    ordering = ["-pk"]
    list_select_related = ["project"]

    class Media:
        css = {"all": ["memories/admin.css"]}

    @admin.display(description="changes (before → after)")
    def changes(self, revision: Any) -> str:
        return changes_html(revision.before, revision.after, limit=CHANGE_SHOWN)

    @admin.display(description="before")
    def before_json(self, revision: Any) -> str:
        return pretty_json(revision.before)

    @admin.display(description="after")
    def after_json(self, revision: Any) -> str:
        return pretty_json(revision.after)


@admin.register(MemoryRevision)
class MemoryRevisionAdmin(RevisionAdmin):
    list_display = ["created_at", "memory", "project", "action", "actor_type", "actor", "changes"]
    list_filter = ["project", "action", "actor_type", "created_at"]
    search_fields = ["actor"]
    uuid_search_fields = ("memory_public_id",)
    search_help_text = "A memory id (its whole history), or an actor: key prefix, operator, task."
    readonly_fields = (
        "memory",
        "project",
        "action",
        "actor_type",
        "actor",
        "created_at",
        "changes",
        "before_json",
        "after_json",
    )
    fields = readonly_fields

    @admin.display(description="memory")
    def memory(self, revision: MemoryRevision) -> str:
        return memory_link(revision.memory_id, revision.memory_public_id)


@admin.register(SettingsRevision)
class SettingsRevisionAdmin(RevisionAdmin):
    list_display = ["created_at", "project", "room", "actor_type", "actor", "changes"]
    list_filter = ["project", "actor_type", "created_at"]
    list_select_related = ["project", "room"]
    search_fields = ["actor"]
    readonly_fields = (
        "project",
        "room",
        "actor_type",
        "actor",
        "created_at",
        "changes",
        "before_json",
        "after_json",
    )
    fields = readonly_fields


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(LargeTableAdmin):
    """Stored responses replayed to retried writes; delete one to let a key run again."""

    list_display = ["key", "project", "status_code", "created_at"]
    list_filter = ["project", "status_code", "created_at"]
    list_select_related = ["project"]
    search_fields = ["key"]
    ordering = ["-pk"]
    readonly_fields = (
        "key",
        "project",
        "status_code",
        "request_hash",
        "created_at",
        "response_json",
    )
    fields = readonly_fields

    @admin.display(description="response")
    def response_json(self, key: IdempotencyKey) -> str:
        return pretty_json(key.response)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(MaintenanceRun)
class MaintenanceRunAdmin(LargeTableAdmin):
    """What the scheduled maintenance did (pruning, importance...): read-only. A few
    rows an hour, purged after MAINTENANCE_RUNS_KEEP_DAYS: a date hierarchy is cheap."""

    list_display = ["task", "project", "dry_run", "status", "started_at", "finished_at", "totals"]
    list_filter = ["task", "status", "dry_run", "project"]
    list_select_related = ["project"]
    ordering = ["-started_at", "-pk"]
    date_hierarchy = "started_at"
    readonly_fields = (
        "task",
        "project",
        "dry_run",
        "status",
        "started_at",
        "finished_at",
        "totals",
        "details_json",
        "error",
    )
    fields = readonly_fields

    @admin.display(description="Counts")
    def totals(self, run: MaintenanceRun) -> str:
        return ", ".join(f"{name}: {value}" for name, value in run.counts.items())

    @admin.display(description="details")
    def details_json(self, run: MaintenanceRun) -> str:
        return pretty_json(run.details)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a record of what ran: not editable


@admin.register(EmbeddingSpace)
class EmbeddingSpaceAdmin(ReadOnlyAdmin):
    """One per embedding model, made by the workers; deleting one would drop every
    vector of its model (do it in SQL, deliberately)."""

    list_display = ["__str__", "provider", "model", "dimension", "index_name", "created_at"]


@admin.register(Embedding)
class EmbeddingAdmin(ReadOnlyAdmin, LargeTableAdmin):
    """The vectors (one per window of a memory's text), as the workers stored them: to
    compute one again, re-embed its memory."""

    list_display = ["pk", "memory_id_link", "space", "window", "created_at"]
    list_filter = ["space"]
    list_select_related = ["space"]
    uuid_search_fields = ("memory_id",)
    search_fields = ["memory_id"]  # by id only: see get_search_results
    search_help_text = "A memory id."
    ordering = ["-pk"]
    readonly_fields = ("memory_id_link", "space", "window", "created_at", "dimensions")
    fields = readonly_fields

    @admin.display(description="memory")
    def memory_id_link(self, embedding: Embedding) -> str:
        return memory_link(embedding.memory_id)

    @admin.display(description="dimensions")
    def dimensions(self, embedding: Embedding) -> int:
        return len(embedding.vector)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Embedding], search_term: str
    ) -> tuple[QuerySet[Embedding], bool]:
        """A memory id finds its vectors; any other text finds nothing (not a scan)."""
        if not search_term.strip():
            return queryset, False
        if as_uuid(search_term.strip()) is None:
            return queryset.none(), False
        return super().get_search_results(request, queryset, search_term)


@admin.register(MemoryTally)
class MemoryTallyAdmin(ReadOnlyAdmin, LargeTableAdmin):
    """The counts the console reads (memories.models.tallies), written by triggers and
    folded by the beat: to look at, not to edit (`manage.py tallies --check` compares
    them with the memories, `--rebuild` recounts)."""

    list_display = [
        "project_id",
        "end_user_id",
        "room_id",
        "day",
        "kind",
        "status",
        "embedding_status",
        "n",
        "last_at",
    ]
    list_filter = ["kind", "status", "embedding_status"]
    ordering = ["-pk"]
