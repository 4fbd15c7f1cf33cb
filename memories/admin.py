"""The curators' admin: filters, search, and actions that call the same services as the API."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from memories.config import SettingsError, settings_as_dict, settings_validate
from memories.models import (
    Agent,
    ApiKey,
    Embedding,
    EmbeddingSpace,
    EndUser,
    MaintenanceRun,
    Memory,
    MemoryRevision,
    Project,
    Room,
    SettingsRevision,
    Synopsis,
    SynopsisRevision,
)
from memories.services.configuration import project_settings_get, project_settings_update
from memories.services.embedding import embedding_enqueue
from memories.services.memories import memory_delete, memory_update
from memories.services.projects import api_key_revoke
from memories.services.revisions import Actor
from memories.services.synopsis import (
    SynopsisUnavailable,
    synopsis_part_lock,
    synopsis_refresh_request,
)


def _actor(request: HttpRequest) -> Actor:
    return Actor.operator(request.user.get_username())  # type: ignore[union-attr]


class ProjectForm(forms.ModelForm):
    """The settings field holds the project's overrides (memories/config.py), checked
    by the same validation as PATCH /api/v1/settings/."""

    class Meta:
        model = Project
        fields = ["name", "settings"]
        help_texts = {
            "settings": 'Overrides by section, e.g. {"search": {"keyword_weight": 0.7}}; '
            "what is left out keeps its default (see Effective settings).",
        }

    def clean_settings(self) -> dict[str, Any]:
        try:
            return settings_validate(self.cleaned_data["settings"] or {})
        except SettingsError as error:
            raise forms.ValidationError(
                [f"{name}: {' '.join(messages)}" for name, messages in error.errors.items()]
            ) from None


class SettingsRevisionInline(admin.TabularInline):
    model = SettingsRevision
    fields = ["created_at", "actor_type", "actor", "before", "after"]
    readonly_fields = ["created_at", "actor_type", "actor", "before", "after"]
    extra = 0
    can_delete = False
    ordering = ["-created_at"]
    verbose_name_plural = "settings history"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    form = ProjectForm
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    readonly_fields = ["effective_settings"]
    inlines = [SettingsRevisionInline]

    @admin.display(description="Effective settings")
    def effective_settings(self, project: Project) -> str:
        values = settings_as_dict(project_settings_get(project=project))
        return format_html("<pre>{}</pre>", json.dumps(values, indent=2))

    def save_model(self, request: HttpRequest, obj: Project, form: Any, change: bool) -> None:
        """Settings change through the service, which records who changed what."""
        settings = obj.settings
        if change:
            obj.settings = Project.objects.get(pk=obj.pk).settings
        super().save_model(request, obj, form, change)
        project_settings_update(project=obj, changes=settings, actor=_actor(request), replace=True)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = [
        "prefix",
        "name",
        "project",
        "scopes",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["project", "revoked_at"]
    readonly_fields = ["prefix", "key_hash", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # keys are shown once: create them with `manage.py create_api_key`

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            api_key_revoke(key=key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")


@admin.register(EndUser)
class EndUserAdmin(admin.ModelAdmin):
    list_display = ["external_id", "name", "project", "created_at"]
    list_filter = ["project"]
    search_fields = ["external_id", "name"]


@admin.register(Room)
class RoomAdmin(admin.ModelAdmin):
    list_display = ["external_id", "name", "project", "agent", "created_at"]
    list_filter = ["project"]
    search_fields = ["external_id", "name"]


admin.site.register(Agent)


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = [
        "short_content",
        "kind",
        "role",
        "end_user",
        "room",
        "status",
        "embedding_status",
        "importance",
        "pinned",
        "importance_score",
        "created_at",
    ]
    list_filter = ["project", "kind", "status", "embedding_status", "role", "pinned"]
    search_fields = ["content", "end_user__external_id", "room__external_id"]
    list_select_related = ["end_user", "room"]
    readonly_fields = [
        "id",
        "project",
        "content_hash",
        "embedding_status",
        "embedded_at",
        "importance_score",
        "access_count",
        "accessed_at",
        "created_at",
        "updated_at",
    ]
    exclude = ["search_vector"]
    raw_id_fields = ["end_user", "room", "agent"]
    actions = ["re_embed", "archive", "pin", "unpin"]
    date_hierarchy = "created_at"

    @admin.display(description="content")
    def short_content(self, memory: Memory) -> str:
        return memory.content[:80]

    def save_model(self, request: HttpRequest, obj: Memory, form: Any, change: bool) -> None:
        if not change:
            messages.error(request, "Create memories through the API.")
            return
        changes = {
            name: form.cleaned_data[name] for name in form.changed_data if name in form.cleaned_data
        }
        memory_update(memory=obj, changes=changes, actor=_actor(request))

    def delete_model(self, request: HttpRequest, obj: Memory) -> None:
        memory_delete(memory=obj, actor=_actor(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        for memory in queryset:
            memory_delete(memory=memory, actor=_actor(request))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Re-embed selected memories")
    def re_embed(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        Embedding.objects.filter(memory__in=queryset).delete()
        count = queryset.update(embedding_status=Memory.EmbeddingStatus.PENDING, embedded_at=None)
        embedding_enqueue()
        self.message_user(request, f"{count} memories queued for embedding.")

    @admin.action(description="Archive selected memories")
    def archive(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        for memory in queryset:
            memory_update(
                memory=memory, changes={"status": Memory.Status.ARCHIVED}, actor=_actor(request)
            )
        self.message_user(request, "Archived.")

    @admin.action(description="Pin selected memories (never pruned, importance 1)")
    def pin(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        for memory in queryset:
            memory_update(memory=memory, changes={"pinned": True}, actor=_actor(request))
        self.message_user(request, "Pinned.")

    @admin.action(description="Unpin selected memories")
    def unpin(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        for memory in queryset:
            memory_update(memory=memory, changes={"pinned": False}, actor=_actor(request))
        self.message_user(request, "Unpinned.")


@admin.register(MemoryRevision)
class MemoryRevisionAdmin(admin.ModelAdmin):
    list_display = ["memory_id", "action", "actor_type", "actor", "created_at"]
    list_filter = ["project", "action", "actor_type"]
    search_fields = ["memory_id", "actor"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the history is not editable

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(EmbeddingSpace)
class EmbeddingSpaceAdmin(admin.ModelAdmin):
    list_display = ["provider", "model", "dimension", "created_at"]


@admin.register(MaintenanceRun)
class MaintenanceRunAdmin(admin.ModelAdmin):
    """What the scheduled maintenance did (pruning, importance...): read-only."""

    list_display = ["task", "project", "dry_run", "status", "started_at", "finished_at", "totals"]
    list_filter = ["task", "status", "project"]
    list_select_related = ["project"]
    ordering = ["-started_at", "-pk"]
    date_hierarchy = "started_at"

    @admin.display(description="Counts")
    def totals(self, run: MaintenanceRun) -> str:
        return ", ".join(f"{name}: {value}" for name, value in run.counts.items())

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a record of what ran: not editable


@admin.register(Synopsis)
class SynopsisAdmin(admin.ModelAdmin):
    """Users' synopses, read-only here: lock, unlock and regenerate call the services
    (operators edit the text through the API or the dashboard)."""

    list_display = [
        "end_user", "project", "identity_generator", "identity_generated_at",
        "identity_locked", "context_generator", "context_generated_at", "context_locked",
    ]  # fmt: skip
    list_filter = ["project", "identity_locked", "context_locked", "identity_generator"]
    list_select_related = ["end_user", "project"]
    search_fields = ["end_user__external_id", "end_user__name"]
    actions = ["lock_identity", "unlock_identity", "lock_context", "unlock_context", "regenerate"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # edits go through synopsis_part_edit (recorded), not a raw form

    def _lock(
        self, request: HttpRequest, queryset: QuerySet[Synopsis], part: str, locked: bool
    ) -> None:
        for synopsis in queryset.select_related("end_user__project"):
            synopsis_part_lock(
                end_user=synopsis.end_user, part=part, locked=locked, actor=_actor(request)
            )
        self.message_user(request, f"{part.title()} {'locked' if locked else 'unlocked'}.")

    @admin.action(description="Lock the identity part")
    def lock_identity(self, request: HttpRequest, queryset: QuerySet[Synopsis]) -> None:
        self._lock(request, queryset, "identity", True)

    @admin.action(description="Unlock the identity part")
    def unlock_identity(self, request: HttpRequest, queryset: QuerySet[Synopsis]) -> None:
        self._lock(request, queryset, "identity", False)

    @admin.action(description="Lock the context part")
    def lock_context(self, request: HttpRequest, queryset: QuerySet[Synopsis]) -> None:
        self._lock(request, queryset, "context", True)

    @admin.action(description="Unlock the context part")
    def unlock_context(self, request: HttpRequest, queryset: QuerySet[Synopsis]) -> None:
        self._lock(request, queryset, "context", False)

    @admin.action(description="Regenerate the unlocked parts now")
    def regenerate(self, request: HttpRequest, queryset: QuerySet[Synopsis]) -> None:
        queued = 0
        try:
            for synopsis in queryset.select_related("end_user"):
                parts = [p for p in ("identity", "context") if not synopsis.part(p).locked]
                if parts:
                    synopsis_refresh_request(end_user=synopsis.end_user, parts=parts, force=True)
                    queued += 1
        except SynopsisUnavailable as error:
            self.message_user(request, f"Could not queue: {error}", level=messages.ERROR)
            return
        self.message_user(request, f"{queued} synopses queued for regeneration.")


@admin.register(SynopsisRevision)
class SynopsisRevisionAdmin(admin.ModelAdmin):
    list_display = ["end_user", "part", "action", "actor_type", "actor", "created_at"]
    list_filter = ["project", "part", "action", "actor_type"]
    list_select_related = ["end_user"]
    search_fields = ["end_user__external_id", "actor"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the history is not editable

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
