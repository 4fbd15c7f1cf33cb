"""Embedding model switches: each project's, with its progress (read only: a switch is
started, and cancelled, from the project list's actions, through the same services as
the API and the console, memories/services/embedding_switch.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from memories.admin.base import actor_of
from memories.models import EmbeddingSwitch, Project
from memories.services.embedding_spaces import model_choices
from memories.services.embedding_switch import (
    SwitchRefused,
    embedding_switch_cancel,
    embedding_switch_start,
    switch_progress,
)

ProjectAction = Callable[[admin.ModelAdmin, HttpRequest, QuerySet[Project]], None]


@admin.register(EmbeddingSwitch)
class EmbeddingSwitchAdmin(admin.ModelAdmin):
    list_display = [
        "project",
        "source",
        "target",
        "status",
        "progress",
        "started_at",
        "finished_at",
    ]
    list_filter = ["status"]
    list_select_related = ["project", "source", "target"]
    search_fields = ["project__name"]
    ordering = ["-started_at"]
    readonly_fields = [field.name for field in EmbeddingSwitch._meta.fields]

    @admin.display(description="Progress")
    def progress(self, switch: EmbeddingSwitch) -> str:
        shown = switch_progress(switch)
        rate = f", {shown['rate_per_second']}/s" if shown["rate_per_second"] else ""
        return f"{shown['done']}/{shown['total']}{rate}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def switch_actions() -> dict[str, tuple[ProjectAction, str, str]]:
    """The project list's actions: a switch to each model a project can choose (the
    choices depend on the configuration: the endpoint's only when one is set), and the
    cancel of a running switch."""
    actions: dict[str, tuple[ProjectAction, str, str]] = {}
    for key in model_choices():
        name = f"embedding_switch_to_{key.replace('-', '_')}"
        actions[name] = (_switcher(key), name, f"Switch the embedding model to {key}")
    actions["embedding_switch_cancel"] = (
        _cancel,
        "embedding_switch_cancel",
        "Cancel the running embedding model switch",
    )
    return actions


def _switcher(model: str) -> ProjectAction:
    def switch(_: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        for project in queryset:
            try:
                embedding_switch_start(project=project, model=model, actor=actor_of(request))
            except SwitchRefused as refused:
                messages.error(request, f"{project}: {refused}")
            else:
                messages.success(request, f"{project}: switching to {model} (Embedding switches).")

    return switch


def _cancel(_: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Project]) -> None:
    for project in queryset:
        try:
            embedding_switch_cancel(project=project, actor=actor_of(request))
        except SwitchRefused as refused:
            messages.error(request, f"{project}: {refused}")
        else:
            messages.success(request, f"{project}: switch cancelled.")
