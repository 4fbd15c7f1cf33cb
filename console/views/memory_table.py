"""The project's Memories table: every memory across users, newest first, filtered by
words, user, room, kind, status, dates and a metadata key = value, a keyset page at a
time; editors select many (on the page, or all matching up to SELECT_MAX) and archive,
pin, unpin, forget (to the trash, confirmed first), re-embed or export them. Every
change goes through the memories services as the operator's, with the intent "bulk"
(console/services/memory_table.py, memories/services/bulk.py); a selection past
BACKGROUND_OVER is carried out by a worker, and a panel polls the run until it ends."""

from __future__ import annotations

import json
import uuid
from datetime import date, datetime, time, timedelta
from typing import Any, cast
from urllib.parse import urlencode

from django import forms
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from console.paths import PROJECT
from console.services import memory_table as memory_table_service
from console.services.memory_table import (
    ACTIONS,
    SELECT_MAX,
    TableFilters,
    TablePage,
    TableRefused,
    table_action,
    table_export_lines,
    table_page,
    table_selection,
)
from console.views.access import ConsoleRequest, project_view
from console.views.user_page import MemoryFilterForm
from memories.models import MaintenanceRun
from memories.services.bulk import (
    BulkQueueUnavailable,
    BulkRun,
    bulk_run_get,
    bulk_runs_running,
)
from memories.services.configuration import project_settings_get
from memories.services.revisions import Actor

TEMPLATE = "console/memories.html"
FILTER_FIELDS = ("q", "user", "room", "kind", "status", "start", "end", "metadata")


class TableFilterForm(MemoryFilterForm):
    """The user page's kind, status and date filters, and the table's own."""

    q = forms.CharField(required=False, max_length=500, label="words")
    user = forms.CharField(required=False, max_length=255, label="user")
    room = forms.CharField(required=False, max_length=255, label="room")
    metadata = forms.CharField(required=False, max_length=500, label="metadata")

    field_order = ["q", "user", "room", "kind", "status", "start", "end", "metadata"]

    def clean_metadata(self) -> dict[str, Any]:
        """``key=value``: the value as JSON when it is some (a number, true, "7"), else
        as text; contained in the memory's metadata."""
        raw = self.cleaned_data.get("metadata", "").strip()
        if not raw:
            return {}
        key, equals, value = raw.partition("=")
        if not equals or not key.strip():
            raise forms.ValidationError("Write key=value, e.g. source=email.")
        value = value.strip()
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        return {key.strip(): parsed}

    def table_filters(self) -> TableFilters:
        """The valid filters (an invalid field filters nothing; its error is shown)."""
        self.is_valid()
        data = self.cleaned_data  # the fields that are valid
        start, end = data.get("start"), data.get("end")
        return TableFilters(
            kind=data.get("kind", ""),
            status=data.get("status", ""),
            start=_midnight(start) if start else None,
            end=_midnight(end + timedelta(days=1)) if end else None,  # the whole last day
            text=data.get("q", "").strip(),
            user=data.get("user", "").strip(),
            room=data.get("room", "").strip(),
            metadata=data.get("metadata") or {},
        )


def _midnight(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def _context(request: ConsoleRequest, data: Any, **extra: Any) -> dict[str, Any]:
    """The page's context for the filters and cursor in ``data`` (GET or POST)."""
    form = TableFilterForm(data)
    after, before = data.get("after", "")[:4096], data.get("before", "")[:4096]
    try:
        page = table_page(
            project=request.project, filters=form.table_filters(), after=after, before=before
        )
    except TableRefused as refused:
        extra.setdefault("error", str(refused))
        page = table_page(project=request.project, filters=form.table_filters())
        after = before = ""
    query = {name: data.get(name, "") for name in FILTER_FIELDS if data.get(name)}
    return {
        **_page_urls(request, query, page),
        "project": request.project,
        "can_edit": request.can_edit,
        "section": "memories",
        "filter_form": form,
        "filter_query": query,
        "page": page,
        "after": after,
        "before": before,
        "select_max_text": f"{SELECT_MAX:,}",
        "background_over_text": f"{memory_table_service.BACKGROUND_OVER:,}",
        "bulk_runs": bulk_runs_running(project=request.project),
        "runs_query": urlencode(query),
        **extra,
    }


def _page_urls(request: ConsoleRequest, query: dict[str, str], page: TablePage) -> dict[str, str]:
    """The links of the table with these filters: its first page, the newer and older
    pages around ``page`` ('' when there is none)."""
    base = reverse("console-memories", args=[request.project.pk])

    def link(**cursor: str) -> str:
        encoded = urlencode({**query, **cursor})
        return f"{base}?{encoded}" if encoded else base

    return {
        "first_url": link(),
        "newer_url": link(before=page.newer) if page.newer else "",
        "older_url": link(after=page.older) if page.older else "",
    }


def _render(request: ConsoleRequest, data: Any, status: int = 200, **extra: Any) -> HttpResponse:
    context = _context(request, data, **extra)
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, f"{TEMPLATE}#memory-table", context, status=status)
    return render(request, TEMPLATE, context, status=status)


@project_view()
@require_GET
@vary_on_headers("HX-Request")
def memory_table(request: ConsoleRequest) -> HttpResponse:
    """The table (``?after=`` / ``?before=`` a cursor, and the filters); asked by HTMX,
    the table alone."""
    return _render(request, request.GET)


def _selected(request: ConsoleRequest) -> list[uuid.UUID]:
    """The pks the POST selects: all matching its filters (``scope=all``, the filters
    all valid) or the ``ids`` ticked; TableRefused naming the field otherwise."""
    if request.POST.get("scope") == "all":
        form = TableFilterForm(request.POST)
        if not form.is_valid():
            name, errors = next(iter(form.errors.items()))
            raise TableRefused(f"{name}: {errors[0]} Nothing was changed.")
        return table_selection(project=request.project, filters=form.table_filters(), ids=None)
    raw = request.POST.getlist("ids")
    if not raw:
        raise TableRefused("ids: select at least one memory.")
    if len(raw) > SELECT_MAX:
        raise TableRefused(f"ids: at most {SELECT_MAX:,} at once.")
    try:
        ids = [uuid.UUID(value) for value in raw]
    except ValueError:
        raise TableRefused("ids: not a memory id.") from None
    return table_selection(project=request.project, filters=TableFilters(), ids=ids)


@project_view(edit=True)
@require_POST
def memory_table_action(request: ConsoleRequest) -> HttpResponse:
    """Apply ``action`` (one of ACTIONS) to the selection; a forget is confirmed first
    (``confirm=yes``). Answers with the table and what was done."""
    action = request.POST.get("action", "")
    try:
        if action not in ACTIONS:
            raise TableRefused(f"action: not one of {', '.join(ACTIONS)}.")
        ids = _selected(request)
    except TableRefused as refused:
        return _render(request, request.POST, status=422, error=str(refused))
    if action == "forget" and request.POST.get("confirm") != "yes":
        days = project_settings_get(project=request.project).pruning.trash_days
        confirm = {"count": len(ids), "days": days, "fields": _selection_fields(request)}
        return _render(request, request.POST, confirm=confirm)
    actor = Actor.operator(request.user.get_username())
    try:
        done = table_action(project=request.project, action=action, ids=ids, actor=actor)
    except BulkQueueUnavailable as error:
        return _render(request, request.POST, status=503, error=f"{error} Nothing was changed.")
    if isinstance(done, MaintenanceRun):  # a worker carries it out; the panel follows it
        return _render(request, request.POST, bulk_runs=_runs_with(request, done.pk))
    return _render(request, request.POST, notice=done.message)


def _runs_with(request: ConsoleRequest, queued: int) -> list[BulkRun]:
    """The runs under way and the one just queued, even if a fast worker ended it."""
    runs = bulk_runs_running(project=request.project)
    if all(item.run.pk != queued for item in runs):
        found = bulk_run_get(project=request.project, run_id=queued)
        runs += [found] if found is not None else []
    return runs


def _selection_fields(request: ConsoleRequest) -> list[tuple[str, str]]:
    """The POST's selection and filters, as hidden fields for the confirmation."""
    names = ("scope", "ids", *FILTER_FIELDS, "after", "before")
    return [(name, value) for name in names for value in request.POST.getlist(name)]


@project_view(edit=True)
@require_POST
def memory_table_export(request: ConsoleRequest) -> HttpResponse:
    """A download of the selection as JSON Lines (one memory a line, oldest first)."""
    try:
        ids = _selected(request)
    except TableRefused as refused:
        return _render(request, request.POST, status=422, error=str(refused))
    lines = table_export_lines(project=request.project, ids=ids)
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    stamp = f"{timezone.now():%Y%m%d-%H%M%S}"
    name = f"memories-{request.project.pk}-{stamp}.jsonl"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    # streamed, not held in memory; project_view's views are typed as HttpResponse
    return cast(HttpResponse, response)


@project_view()
@require_GET
def memory_table_run(request: ConsoleRequest, run_id: int) -> HttpResponse:
    """A bulk run's panel (what it polls while a worker carries it out): its progress,
    then its outcome, or its error; the table's filters (as the query) for the link
    that reloads it."""
    run = bulk_run_get(project=request.project, run_id=run_id)
    if run is None:
        raise Http404("No such run.")
    query = {name: request.GET[name][:500] for name in FILTER_FIELDS if request.GET.get(name)}
    return render(request, "console/memory_table/run.html", _run_context(request, run, query))


def _run_context(request: ConsoleRequest, run: BulkRun, query: dict[str, str]) -> dict[str, Any]:
    table = reverse("console-memories", args=[request.project.pk])
    return {
        "project": request.project,
        "bulk": run,
        "runs_query": urlencode(query),
        "table_url": f"{table}?{urlencode(query)}" if query else table,
    }


urlpatterns: list[URLPattern] = [
    path(f"{PROJECT}memories/", memory_table, name="console-memories"),
    path(f"{PROJECT}memories/action/", memory_table_action, name="console-memories-action"),
    path(f"{PROJECT}memories/export/", memory_table_export, name="console-memories-export"),
    path(f"{PROJECT}memories/runs/<int:run_id>/", memory_table_run, name="console-memories-run"),
]
