"""The curators' view of the LLM calls and of the messages mined for facts: a record
of usage and failures. Both tables grow with the conversations (an extraction per
user message), so they list like the memories: no full count, a date filter rather
than a date hierarchy (which reads every row's date)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from memories.admin.base import LargeTableAdmin, ReadOnlyAdmin, change_link
from synopsis.models import FactExtraction, LlmCall


@admin.register(LlmCall)
class LlmCallAdmin(ReadOnlyAdmin, LargeTableAdmin):
    list_display = [
        "created_at",
        "project",
        "purpose",
        "model",
        "status",
        "error_kind",
        "attempts",
        "prompt_tokens",
        "completion_tokens",
        "duration_ms",
    ]
    list_filter = ["project", "status", "error_kind", "purpose", "model", "created_at"]
    search_fields = ["error", "model"]
    list_select_related = ["project"]
    ordering = ["-pk"]


@admin.register(FactExtraction)
class FactExtractionAdmin(LargeTableAdmin):
    """Read-only; deleting one lets its message be mined again (`manage.py extract_facts`
    or the facts sweep)."""

    list_display = [
        "created_at",
        "project",
        "message_link",
        "status",
        "extractor",
        "facts",
        "error",
    ]
    list_filter = ["project", "status", "extractor", "created_at"]
    search_fields = ["error", "extractor"]
    uuid_search_fields = ("message_id",)
    search_help_text = "A message id, or words of the error or the extractor."
    list_select_related = ["project", "message"]
    ordering = ["-pk"]
    readonly_fields = (
        "message_link",
        "project",
        "status",
        "extractor",
        "facts",
        "error",
        "created_at",
    )
    fields = readonly_fields

    @admin.display(description="message")
    def message_link(self, extraction: FactExtraction) -> str:
        return change_link(extraction.message)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
