"""Users' synopses (read-only here: lock, unlock and regenerate call the services) and
their edit history."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from memories.admin.base import LargeTableAdmin, actor_of
from memories.admin.records import RevisionAdmin
from memories.models import Synopsis, SynopsisRevision
from memories.services.synopsis import (
    SynopsisUnavailable,
    synopsis_part_lock,
    synopsis_refresh_request,
)


@admin.register(Synopsis)
class SynopsisAdmin(LargeTableAdmin):
    """Users' synopses, read-only here: lock, unlock and regenerate call the services
    (operators edit the text through the API or the dashboard)."""

    list_display = [
        "end_user",
        "project",
        "identity_generator",
        "identity_generated_at",
        "identity_locked",
        "context_generator",
        "context_generated_at",
        "context_locked",
    ]
    list_filter = ["project", "identity_locked", "context_locked"]
    list_select_related = ["end_user", "project"]
    search_fields = ["end_user__external_id", "end_user__name"]
    ordering = ["-pk"]
    fields = [
        "end_user",
        "project",
        "identity_text",
        "identity_generated_at",
        "identity_token_count",
        "identity_generator",
        "identity_locked",
        "identity_edited_by",
        "context_text",
        "context_generated_at",
        "context_token_count",
        "context_generator",
        "context_locked",
        "context_edited_by",
        "version",
        "created_at",
        "updated_at",
    ]
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
                end_user=synopsis.end_user, part=part, locked=locked, actor=actor_of(request)
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
class SynopsisRevisionAdmin(RevisionAdmin):
    list_display = ["created_at", "end_user", "project", "part", "action", "actor_type", "actor"]
    list_filter = ["project", "part", "action", "actor_type", "created_at"]
    list_select_related = ["end_user", "project"]
    search_fields = ["end_user__external_id", "actor"]
    readonly_fields = (
        "end_user",
        "project",
        "part",
        "action",
        "actor_type",
        "actor",
        "created_at",
        "changes",
        "before_json",
        "after_json",
    )
    fields = readonly_fields
