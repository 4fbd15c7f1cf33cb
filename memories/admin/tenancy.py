"""Projects and who they serve: API keys, memberships, agents, end users, rooms."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from memories.admin.base import LargeTableAdmin, actor_of, deletion_summary, pretty_json
from memories.admin.embedding import switch_actions
from memories.config import SettingsError, settings_as_dict, settings_validate
from memories.models import (
    Agent,
    ApiKey,
    EndUser,
    Membership,
    Memory,
    Project,
    Room,
    SettingsRevision,
)
from memories.services.configuration import project_settings_get, project_settings_update
from memories.services.projects import api_key_create, api_key_revoke, project_delete
from memories.services.revisions import Actor
from memories.services.users import end_user_delete, end_user_update, room_delete, room_update


def memories_link(project_id: int, **filters: str) -> str:
    """A link to the memory list of a project narrowed by the memory admin's filters."""
    query = urlencode({"project__id__exact": project_id, **filters})
    return format_html(
        '<a href="{}?{}">memories</a>', reverse("admin:memories_memory_changelist"), query
    )


class ProjectForm(forms.ModelForm):
    """The settings field holds the project's overrides (memories/config/), checked
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
                [f"{name}: {' '.join(texts)}" for name, texts in error.errors.items()]
            ) from None


class SettingsRevisionInline(admin.TabularInline):
    model = SettingsRevision
    readonly_fields = ("created_at", "room", "actor_type", "actor", "before", "after")
    fields = readonly_fields
    extra = 0
    can_delete = False
    ordering = ["-created_at"]
    verbose_name_plural = "settings history"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    """The operators who may open this project's console, and their role."""

    model = Membership
    fields = ["user", "role", "created_at"]
    readonly_fields = ["created_at"]
    autocomplete_fields = ["user"]
    extra = 0


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    form = ProjectForm
    list_display = ["name", "created_at", "memories"]
    search_fields = ["name"]
    readonly_fields = ["effective_settings"]
    inlines = [MembershipInline, SettingsRevisionInline]

    @admin.display(description="Effective settings")
    def effective_settings(self, project: Project) -> str:
        values = settings_as_dict(project_settings_get(project=project))
        return format_html("<pre>{}</pre>", json.dumps(values, indent=2))

    @admin.display(description="Memories")
    def memories(self, project: Project) -> str:
        return memories_link(project.pk)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        """Django's, and a switch of the embedding model (memories/admin/embedding.py)."""
        return {**super().get_actions(request), **switch_actions()}

    def delete_model(self, request: HttpRequest, obj: Project) -> None:
        """Through the service: the memories locked first, Redis cleared after."""
        project_delete(project=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        for project in queryset:
            project_delete(project=project)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        also = {
            name: model._default_manager.filter(project__in=objs).count()
            for name, model in [
                ("memories", Memory),
                ("end users", EndUser),
                ("rooms", Room),
                ("API keys", ApiKey),
            ]
        }
        return deletion_summary(objs, self.model._meta, also=also)

    def save_model(self, request: HttpRequest, obj: Project, form: Any, change: bool) -> None:
        """Settings change through the service, which records who changed what."""
        settings = obj.settings
        # saved with what it had (nothing, when new): the service records the change
        obj.settings = Project.objects.get(pk=obj.pk).settings if change else {}
        super().save_model(request, obj, form, change)
        project_settings_update(
            project=obj, changes=settings, actor=actor_of(request), replace=True
        )


class ApiKeyCreateForm(forms.ModelForm):
    read_only = forms.BooleanField(
        required=False, help_text="Reads and searches only: a write gets 403."
    )

    class Meta:
        model = ApiKey
        fields = ["project", "name"]


class KeyStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> QuerySet[ApiKey]:
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are created here (the raw key shown once, in a message) and revoked; the
    stored hash is never shown or edited."""

    list_display = [
        "prefix",
        "name",
        "project",
        "scope_list",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["project", KeyStatusFilter]
    list_select_related = ["project"]
    search_fields = ["prefix", "name"]
    autocomplete_fields = ["project"]
    actions = ["revoke"]

    @admin.display(description="scopes")
    def scope_list(self, key: ApiKey) -> str:
        return ", ".join(key.scopes)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any):  # type: ignore[no-untyped-def]
        if obj is None:
            kwargs["form"] = ApiKeyCreateForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is None:
            return ("project", "name", "read_only")
        return ("name", *self.get_readonly_fields(request, obj))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is None:
            return ()
        return ("project", "prefix", "scope_list", "created_at", "last_used_at", "revoked_at")

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        """A new key is made by the service (which hashes it); its raw value is shown
        once, in the message on the next page."""
        if change:
            super().save_model(request, obj, form, change)
            return
        key, raw_key = api_key_create(
            project=form.cleaned_data["project"],
            name=form.cleaned_data["name"],
            read_only=form.cleaned_data["read_only"],
        )
        for field in ApiKey._meta.concrete_fields:
            setattr(obj, field.attname, getattr(key, field.attname))
        obj._state.adding, obj._state.db = False, key._state.db
        self.message_user(
            request,
            f"The new key (copy it now: it is not shown again): {raw_key}",
            level=messages.WARNING,
        )

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        keys = list(queryset.filter(revoked_at__isnull=True))
        for key in keys:
            api_key_revoke(key=key)
        self.message_user(request, f"Revoked {len(keys)} key(s).")


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    """Who may open which project's console: viewers read, editors change."""

    list_display = ["user", "project", "role", "created_at"]
    list_filter = ["role", "project"]
    list_select_related = ["user", "project"]
    search_fields = ["user__username", "user__email", "project__name"]
    autocomplete_fields = ["user", "project"]
    readonly_fields = ["created_at"]


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["external_id", "name", "project", "created_at"]
    list_filter = ["project"]
    list_select_related = ["project"]
    search_fields = ["external_id", "name"]
    fields = ["project", "external_id", "name", "created_at"]
    readonly_fields = ["project", "external_id", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # agents appear with their first memory or room


class DeletesMemoriesAdmin(LargeTableAdmin):
    """Users and rooms are deleted through their services, which record a revision for
    each memory that goes with them; the confirmation page counts those memories
    instead of listing each one (and each of its vectors)."""

    memory_relation = ""  # the Memory field pointing at this model

    def delete_one(self, obj: Any, actor: Actor) -> None:
        raise NotImplementedError

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self.delete_one(obj, actor_of(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        with transaction.atomic():
            for obj in queryset.select_related("project"):
                self.delete_model(request, obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        count = Memory.objects.filter(**{f"{self.memory_relation}__in": objs}).count()
        also = {"memories (each recorded as deleted)": count}
        return deletion_summary(objs, self.model._meta, also=also)


@admin.register(EndUser)
class EndUserAdmin(DeletesMemoriesAdmin):
    list_display = ["external_id", "name", "project", "created_at", "updated_at", "memories"]
    list_filter = ["project", "created_at"]
    list_select_related = ["project"]
    search_fields = ["external_id", "name"]
    fields = ["project", "external_id", "name", "metadata", "created_at", "updated_at"]
    readonly_fields = ["project", "external_id", "created_at", "updated_at"]
    ordering = ["-pk"]
    memory_relation = "end_user"

    def delete_one(self, obj: EndUser, actor: Actor) -> None:
        end_user_delete(end_user=obj, actor=actor)

    @admin.display(description="Memories")
    def memories(self, user: EndUser) -> str:
        return memories_link(user.project_id, user=user.external_id)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # users appear with their first memory or through the API

    def save_model(self, request: HttpRequest, obj: EndUser, form: Any, change: bool) -> None:
        end_user_update(end_user=obj, changes=form.cleaned_data)


@admin.register(Room)
class RoomAdmin(DeletesMemoriesAdmin):
    list_display = ["external_id", "name", "project", "agent", "world_id", "created_at", "memories"]
    list_filter = ["project", "created_at"]
    list_select_related = ["project", "agent"]
    search_fields = ["external_id", "name", "world_id"]
    fields = [
        "project",
        "external_id",
        "name",
        "agent",
        "world_id",
        "metadata",
        "room_settings",
        "created_at",
        "updated_at",
    ]
    readonly_fields = [
        "project",
        "external_id",
        "agent",
        "room_settings",
        "created_at",
        "updated_at",
    ]
    ordering = ["-pk"]
    memory_relation = "room"

    def delete_one(self, obj: Room, actor: Actor) -> None:
        room_delete(room=obj, actor=actor)

    @admin.display(description="Memories")
    def memories(self, room: Room) -> str:
        return memories_link(room.project_id, room=room.external_id)

    @admin.display(
        description="Settings (the room's own overrides; change them through "
        "the API or the console, which validate and record them)"
    )
    def room_settings(self, room: Room) -> str:
        return pretty_json(room.settings)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # rooms appear with their first memory or through the API

    def save_model(self, request: HttpRequest, obj: Room, form: Any, change: bool) -> None:
        room_update(room=obj, changes=form.cleaned_data)
