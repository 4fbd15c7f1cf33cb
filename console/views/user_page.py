"""The console's user page, as tabs with their own URLs: the overview (who she is, her
synopsis, rooms and latest memories), the memories (every memory filtered and paginated,
and a live search through the API's search service) and her documents. The facts and
rooms tabs are views/facts.py and views/rooms.py, the context and synopsis tabs
views/user_panels.py; all extend console/user_base.html.

The Memories tab (console/user_memories.html) answers HTMX with its fragments: the memory
list (``#memories``, the tab's own URL) and the search results (``#search-results``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django import forms
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import URLPattern, path
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from console.paths import USER
from console.services.rooms_page import room_counts
from console.services.user_page import (
    MemoryFilters,
    Page,
    UserSummary,
    page_number,
    room_messages_page,
    user_memories_page,
    user_rooms_get,
    user_summary_get,
)
from console.views.access import ConsoleRequest, project_view
from ingestion.models import Document
from memories.models import EndUser, Memory, Project, Room
from memories.services.configuration import project_settings_get
from memories.services.search import SearchFilters, SearchMode, memory_search

TEMPLATE = "console/user_memories.html"
OVERVIEW = "console/user_overview.html"
RECENT = 5  # the overview's latest memories
ROOMS = 10  # the overview's most recent rooms
SEARCH_RESULTS = 20
DOCUMENTS_PAGE = 50


def end_user_of(request: ConsoleRequest, user_id: int) -> EndUser:
    """The project's user with this row id; 404 for another project's or none."""
    return get_object_or_404(EndUser.objects.for_project(request.project), pk=user_id)


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


def _context(
    request: ConsoleRequest, end_user: EndUser, tab: str = "memories", **extra: Any
) -> dict[str, Any]:
    return {
        "project": request.project,
        "can_edit": request.can_edit,
        "end_user": end_user,
        "section": "users",  # the project's tab to mark
        "user_tab": tab,  # the user's tab to mark
        **extra,
    }


def _memories_page(
    request: ConsoleRequest, end_user: EndUser, summary: UserSummary
) -> tuple[MemoryFilterForm, Page]:
    form = MemoryFilterForm(request.GET)
    page = user_memories_page(
        project=request.project,
        end_user=end_user,
        filters=form.filters(),
        page=request.GET.get("page"),
        summary=summary,
    )
    return form, page


@project_view()
@require_GET
def user_page(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """The user's Overview tab: her counts, synopsis (loaded into its slot), rooms and
    latest memories."""
    project = request.project
    end_user = end_user_of(request, user_id)
    summary = user_summary_get(project=project, end_user=end_user)
    recent = user_memories_page(
        project=project, end_user=end_user, filters=MemoryFilters(), page=None, summary=summary
    ).items[:RECENT]
    rooms = user_rooms_get(project=project, end_user=end_user)
    # each room's messages (every speaker, summarized or not), as the Rooms tab counts
    counts = room_counts(project=project, room_ids=[item.room.pk for item in rooms[:ROOMS]])
    listed = [(item, counts.get(item.room.pk, (0, 0, 0))[0]) for item in rooms[:ROOMS]]
    context = _context(
        request,
        end_user,
        tab="overview",
        summary=summary,
        rooms=rooms,
        listed=listed,
        recent=recent,
    )
    return render(request, OVERVIEW, context)


@project_view()
@require_GET
@vary_on_headers("HX-Request")
def user_memories(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """The Memories tab; asked by HTMX (the filters, a page of the list), the list."""
    project = request.project
    end_user = end_user_of(request, user_id)
    summary = user_summary_get(project=project, end_user=end_user)
    form, page = _memories_page(request, end_user, summary)
    context = _context(request, end_user, summary=summary, filter_form=form, memories=page)
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, f"{TEMPLATE}#memories", context)
    default_mode = project_settings_get(project=project).search.default_mode
    context["search_form"] = SearchForm(
        initial={"mode": default_mode, "status": Memory.Status.ACTIVE}
    )
    return render(request, TEMPLATE, context)


@project_view()
@require_GET
def user_room(request: ConsoleRequest, user_id: int, room_id: int) -> HttpResponse:
    """A page of one of the user's rooms' messages (the newest page by default)."""
    project = request.project
    end_user = end_user_of(request, user_id)
    room = get_object_or_404(Room.objects.for_project(project), pk=room_id)
    if not Memory.objects.for_project(project).filter(end_user=end_user, room=room).exists():
        raise Http404("The user has no memories in this room.")
    messages = room_messages_page(project=project, room=room, page=request.GET.get("page"))
    return render(
        request,
        "console/partials/room_messages.html",
        _context(request, end_user, room=room, messages=messages),
    )


@project_view()
@require_GET
def user_documents(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """The Documents tab: the documents uploaded for this user (scoped to her), newest
    first, each linking to its page in the project's Documents."""
    end_user = end_user_of(request, user_id)
    documents = Document.objects.filter(project=request.project, end_user=end_user)
    count = documents.count()
    number = page_number(request.GET.get("page"), pages=max(1, -(-count // DOCUMENTS_PAGE)))
    start = (number - 1) * DOCUMENTS_PAGE
    rows = list(documents.order_by("-created_at", "-pk")[start : start + DOCUMENTS_PAGE])
    page = Page(items=rows, number=number, count=count, size=DOCUMENTS_PAGE)
    context = _context(request, end_user, tab="documents", documents=page)
    return render(request, "console/user_documents.html", context)


def _search_hits(
    *, project: Project, end_user: EndUser, form: SearchForm
) -> tuple[str, list[HitView]]:
    """The search's mode and hits for a valid form with a query: the API's search
    service over the user's memories, with the per-signal scores (explain)."""
    data = form.cleaned_data
    result = memory_search(
        project=project,
        query=data["q"].strip(),
        mode=data["mode"] or None,
        filters=SearchFilters(
            end_user_id=end_user.pk,
            kinds=[data["kind"]] if data["kind"] else [],
            statuses=[data["status"]] if data["status"] else list(Memory.Status.values),
        ),
        k=SEARCH_RESULTS,
        explain=True,
    )
    hits = [
        HitView(
            memory=hit.memory,
            score=hit.score,
            similarity=hit.similarity,
            explain=_explain_rows(hit.explain),
        )
        for hit in result.hits
    ]
    return result.mode, hits


@project_view()
@require_GET
def user_search(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """The live search's results (the template marks the query's words in each), the
    per-signal scores (explain) with each."""
    end_user = end_user_of(request, user_id)
    form = SearchForm(request.GET)
    hits: list[HitView] = []
    query, mode = "", ""
    if form.is_valid() and form.cleaned_data["q"].strip():
        query = form.cleaned_data["q"].strip()
        mode, hits = _search_hits(project=request.project, end_user=end_user, form=form)
    context = _context(request, end_user, search_form=form, hits=hits, query=query, mode=mode)
    return render(request, f"{TEMPLATE}#search-results", context)


urlpatterns: list[URLPattern] = [
    path(f"{USER}memories/", user_memories, name="console-user-memories"),
    path(f"{USER}documents/", user_documents, name="console-user-documents"),
]
