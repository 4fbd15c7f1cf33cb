"""Parked tasks: the inputs a task failed, timed out or died on PARKING_ATTEMPTS times,
for an operator to read and retry (memories/services/parking.py)."""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join

from memories.admin.base import pretty_json
from memories.models import ParkedTask
from memories.services.parking import parked_task_retry

ERROR_SHOWN = 120  # characters of the last error the list shows (its page: all)
IDS_SHOWN = 3  # ids of an input the list links to
# the admin page of an input's kind, by URL name
INPUT_PAGES = {
    "memory": "admin:memories_memory_change",
    "message": "admin:memories_memory_change",
    "room": "admin:memories_room_change",
    "user": "admin:memories_enduser_change",
    "document": "admin:ingestion_document_change",
    "maintenance run": "admin:memories_maintenancerun_change",
}


@admin.register(ParkedTask)
class ParkedTaskAdmin(admin.ModelAdmin):
    """Newest failure first; never added or edited by hand; "retry" sends the task again
    as recorded (the row says who retried it and when); deleting a row dismisses it."""

    list_display = [
        "last_failed_at",
        "task_name",
        "input",
        "project",
        "reason",
        "attempts",
        "status",
        "error",
    ]
    list_filter = ["status", "reason", "task", "input_kind", "project"]
    list_select_related = ["project"]
    search_fields = ["input_key", "input_ids", "last_error"]
    search_help_text = "An input's id, or words of its last error."
    ordering = ["-last_failed_at"]
    actions = ["retry"]
    fields = readonly_fields = (
        "task",
        "input_kind",
        "input",
        "input_key",
        "project",
        "status",
        "reason",
        "attempts",
        "first_failed_at",
        "last_failed_at",
        "last_error",
        "arguments",
        "retried_at",
        "retried_by",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="task", ordering="task")
    def task_name(self, parked: ParkedTask) -> str:
        return parked.task.rsplit(".", 1)[-1]

    @admin.display(description="input")
    def input(self, parked: ParkedTask) -> str:
        """The input's kind and its first ids, each a link to its page where it has one."""
        ids = [str(pk) for pk in parked.input_ids[:IDS_SHOWN]]
        more = f" … {len(parked.input_ids)} in all" if len(parked.input_ids) > IDS_SHOWN else ""
        links = format_html_join(", ", "{}", ((_input_link(parked.input_kind, pk),) for pk in ids))
        return format_html("{} {}{}", parked.input_kind, links or "-", more)

    @admin.display(description="last error")
    def error(self, parked: ParkedTask) -> str:
        text = parked.last_error
        return f"{text[: ERROR_SHOWN - 1]}…" if len(text) > ERROR_SHOWN else text

    @admin.display(description="sent again as")
    def arguments(self, parked: ParkedTask) -> str:
        return pretty_json({"args": parked.args, "kwargs": parked.kwargs})

    @admin.action(description="Retry: send the selected tasks again as recorded")
    def retry(self, request: HttpRequest, queryset: QuerySet[ParkedTask]) -> None:
        operator = request.user.get_username()  # type: ignore[union-attr]
        sent = [
            parked for parked in queryset if parked_task_retry(parked=parked, operator=operator)
        ]
        if sent:
            LogEntry.objects.log_actions(
                user_id=cast(int, request.user.pk),
                queryset=sent,
                action_flag=CHANGE,
                change_message="Retried",
            )
            self.message_user(request, f"{len(sent)} parked tasks sent again.")
        if len(sent) < queryset.count():
            self.message_user(
                request,
                f"{queryset.count() - len(sent)} could not be sent (is Redis up?); see the log.",
                level=messages.ERROR,
            )


def _input_link(kind: str, pk: str) -> str:
    page = INPUT_PAGES.get(kind)
    if page is None:
        return pk
    try:
        return format_html('<a href="{}">{}</a>', reverse(page, args=[pk]), pk)
    except NoReverseMatch:
        return pk
