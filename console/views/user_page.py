"""The console's user page: who the user is, her rooms and their messages, every memory
(filtered, paginated) and a live search through the API's search service.

One template (console/user.html) serves the page and its fragments: the
memory list (``#memories``, the page's own URL asked by HTMX), a room's messages
(``#room``) and the search results (``#search-results``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django import forms
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from console.services.user_page import (
    MemoryFilters,
    Page,
    UserSummary,
    room_messages_page,
    text_highlight,
    user_memories_page,
    user_rooms_get,
    user_summary_get,
)
from console.views.access import project_view
from memories.models import EndUser, Memory, Project, Room
from memories.services.configuration import project_settings_get
from memories.services.search import SearchFilters, SearchMode, memory_search

TEMPLATE = "console/user.html"
SEARCH_RESULTS = 20


def end_user_of(request: HttpRequest, user_id: int) -> EndUser:
    """The project's user with this row id; 404 for another project's or none."""
    project: Project = request.project  # type: ignore[attr-defined]
    return get_object_or_404(EndUser.objects.for_project(project), pk=user_id)


def memories_for_display(memories: list[Memory]) -> list[Memory]:
    """Give each memory the JSON text of its metadata, which the rows show."""
    for memory in memories:
        memory.metadata_text = (  # type: ignore[attr-defined]
            json.dumps(memory.metadata, ensure_ascii=False, sort_keys=True)
            if memory.metadata
            else ""
        )
    return memories


def _choices(values: list[str], blank: str) -> list[tuple[str, str]]:
    return [("", blank), *((value, value) for value in values)]


class MemoryFilterForm(forms.Form):
    kind = forms.ChoiceField(choices=_choices(Memory.Kind.values, "any kind"), required=False)
    status = forms.ChoiceField(choices=_choices(Memory.Status.values, "any status"), required=False)
    start = forms.DateField(
        required=False, label="from", widget=forms.DateInput(attrs={"type": "date"})
    )
    end = forms.DateField(
        required=False, label="to", widget=forms.DateInput(attrs={"type": "date"})
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("start") and data.get("end") and data["start"] > data["end"]:
            self.add_error("end", "Must be on or after the start date.")
        return data

    def filters(self) -> MemoryFilters:
        """The valid filters (an invalid field filters nothing; its error is shown)."""
        data = self.cleaned_data if self.is_valid() else {}
        end = data.get("end")
        return MemoryFilters(
            kind=data.get("kind", ""),
            status=data.get("status", ""),
            start=_midnight(data.get("start")),
            end=_midnight(end + timedelta(days=1)) if end else None,  # the whole last day
        )


def _midnight(day: date | None) -> datetime | None:
    if day is None:
        return None
    return timezone.make_aware(datetime.combine(day, time.min))


class SearchForm(forms.Form):
    q = forms.CharField(required=False, max_length=500, label="Search her memories")
    mode = forms.ChoiceField(choices=[(m, m) for m in SearchMode.ALL], required=False)
    kind = forms.ChoiceField(choices=_choices(Memory.Kind.values, "any kind"), required=False)
    status = forms.ChoiceField(
        choices=[(Memory.Status.ACTIVE, "active"), ("", "any status")], required=False
    )


@dataclass
class HitView:
    """One search result as the page shows it."""

    memory: Memory
    score: float
    similarity: float | None
    content_html: SafeString
    explain: list[tuple[str, str]]


def _explain_rows(explain: dict[str, Any]) -> list[tuple[str, str]]:
    """The per-signal scores as (name, value) lines, numbers rounded for reading."""
    rows = []
    for name, value in explain.items():
        if isinstance(value, dict):
            text = ", ".join(f"{key} {_number(item)}" for key, item in value.items())
        else:
            text = _number(value)
        rows.append((name.replace("_", " "), text))
    return rows


def _number(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _context(request: HttpRequest, end_user: EndUser, **extra: Any) -> dict[str, Any]:
    return {
        "project": request.project,  # type: ignore[attr-defined]
        "can_edit": request.can_edit,  # type: ignore[attr-defined]
        "end_user": end_user,
        "section": "users",  # the project's tab to mark
        **extra,
    }


def _memories_page(
    request: HttpRequest, end_user: EndUser, summary: UserSummary
) -> tuple[MemoryFilterForm, Page]:
    form = MemoryFilterForm(request.GET)
    page = user_memories_page(
        project=request.project,  # type: ignore[attr-defined]
        end_user=end_user,
        filters=form.filters(),
        page=request.GET.get("page"),
        summary=summary,
    )
    memories_for_display(page.items)
    return form, page


@project_view()
@require_GET
@vary_on_headers("HX-Request")
def user_page(request: HttpRequest, user_id: int) -> HttpResponse:
    """The user page; asked by HTMX (the filters, a page of the list), the memory list."""
    project: Project = request.project  # type: ignore[attr-defined]
    end_user = end_user_of(request, user_id)
    summary = user_summary_get(project=project, end_user=end_user)
    form, page = _memories_page(request, end_user, summary)
    context = _context(request, end_user, summary=summary, filter_form=form, memories=page)
    if request.htmx and not request.htmx.history_restore_request:  # type: ignore[attr-defined]
        return render(request, f"{TEMPLATE}#memories", context)
    rooms = user_rooms_get(project=project, end_user=end_user)
    room = rooms[0].room if rooms else None
    context.update(
        rooms=rooms,
        room=room,
        messages=room_messages_page(project=project, room=room, page=None) if room else None,
        search_form=SearchForm(
            initial={
                "mode": project_settings_get(project=project).search.default_mode,
                "status": Memory.Status.ACTIVE,
            }
        ),  # fmt: skip
    )
    return render(request, TEMPLATE, context)


@project_view()
@require_GET
def user_room(request: HttpRequest, user_id: int, room_id: int) -> HttpResponse:
    """A page of one of the user's rooms' messages (the newest page by default)."""
    project: Project = request.project  # type: ignore[attr-defined]
    end_user = end_user_of(request, user_id)
    room = get_object_or_404(Room.objects.for_project(project), pk=room_id)
    if not Memory.objects.for_project(project).filter(end_user=end_user, room=room).exists():
        raise Http404("The user has no memories in this room.")
    messages = room_messages_page(project=project, room=room, page=request.GET.get("page"))
    return render(
        request, f"{TEMPLATE}#room", _context(request, end_user, room=room, messages=messages)
    )


@project_view()
@require_GET
def user_search(request: HttpRequest, user_id: int) -> HttpResponse:
    """The live search's results: the API's search service over the user's memories,
    matches marked, the per-signal scores (explain) with each."""
    project: Project = request.project  # type: ignore[attr-defined]
    end_user = end_user_of(request, user_id)
    form = SearchForm(request.GET)
    hits: list[HitView] = []
    query, mode = "", ""
    if form.is_valid() and form.cleaned_data["q"].strip():
        query = form.cleaned_data["q"].strip()
        status = form.cleaned_data["status"]
        result = memory_search(
            project=project,
            query=query,
            mode=form.cleaned_data["mode"] or None,
            filters=SearchFilters(
                end_user_id=end_user.pk,
                kinds=[form.cleaned_data["kind"]] if form.cleaned_data["kind"] else [],
                statuses=[status] if status else list(Memory.Status.values),
            ),
            k=SEARCH_RESULTS,
            explain=True,
        )
        mode = result.mode
        memories_for_display([hit.memory for hit in result.hits])
        hits = [
            HitView(
                memory=hit.memory,
                score=hit.score,
                similarity=hit.similarity,
                content_html=text_highlight(hit.memory.content, query),
                explain=_explain_rows(hit.explain),
            )
            for hit in result.hits
        ]
    context = _context(request, end_user, search_form=form, hits=hits, query=query, mode=mode)
    return render(request, f"{TEMPLATE}#search-results", context)
