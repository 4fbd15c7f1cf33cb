"""The curators' view of the LLM calls and of the messages mined for facts: read-only,
a record of usage and failures."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from synopsis.models import FactExtraction, LlmCall


@admin.register(LlmCall)
class LlmCallAdmin(admin.ModelAdmin):
    list_display = [
        "created_at", "project", "purpose", "model", "status", "error_kind", "attempts",
        "prompt_tokens", "completion_tokens", "duration_ms",
    ]  # fmt: skip
    list_filter = ["status", "error_kind", "purpose", "model"]
    search_fields = ["error", "model"]
    list_select_related = ["project"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(FactExtraction)
class FactExtractionAdmin(admin.ModelAdmin):
    list_display = ["created_at", "project", "message", "status", "extractor", "facts", "error"]
    list_filter = ["status", "extractor"]
    search_fields = ["error", "message__content"]
    list_select_related = ["project", "message"]
    raw_id_fields = ["message"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
