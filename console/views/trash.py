"""The project's Trash: memories operators forgot, waiting out ``pruning.trash_days``
before the purge erases them. Restore (the undo: the status each had) or erase now,
one or many; every change recorded under the operator's name."""

from __future__ import annotations

import uuid

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path
from django.views.decorators.http import require_GET, require_POST

from console.paths import PROJECT
from console.services.trash_page import trash_page
from console.views.access import ConsoleRequest, project_view
from memories.services.configuration import project_settings_get
from memories.services.revisions import Actor
from memories.services.trash import memories_untrash, trash_erase

TEMPLATE = "console/trash.html"
SELECTED_MAX = 1000  # ids one request may name (a page shows 50)


def _context(request: ConsoleRequest, **extra: object) -> dict[str, object]:
    user = request.GET.get("user", "").strip()[:255]
    return {
        "project": request.project,
        "can_edit": request.can_edit,
        "section": "trash",
        "user_filter": user,
        "trash_days": project_settings_get(project=request.project).pruning.trash_days,
        "trash": trash_page(project=request.project, page=request.GET.get("page"), user=user),
        **extra,
    }


def _render(request: ConsoleRequest, **extra: object) -> HttpResponse:
    context = _context(request, **extra)
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, f"{TEMPLATE}#trash-list", context)
    return render(request, TEMPLATE, context)


@project_view()
@require_GET
def trash(request: ConsoleRequest) -> HttpResponse:
    """The trash, newest first (``?user=`` one user's, ``?page=``)."""
    return _render(request)


def _selected(request: ConsoleRequest) -> tuple[list[uuid.UUID], str]:
    """The ``ids`` posted (valid UUIDs, at most SELECTED_MAX) and an error if any."""
    raw = request.POST.getlist("ids")
    if not raw:
        return [], "ids: select at least one memory."
    if len(raw) > SELECTED_MAX:
        return [], f"ids: at most {SELECTED_MAX} at once."
    try:
        return [uuid.UUID(value) for value in raw], ""
    except ValueError:
        return [], "ids: not a memory id."


@project_view(edit=True)
@require_POST
def trash_restore(request: ConsoleRequest) -> HttpResponse:
    """Take the selected memories out of the trash (an undo each)."""
    ids, error = _selected(request)
    if error:
        return _render(request, error=error)
    actor = Actor.operator(request.user.get_username())
    restored = memories_untrash(project=request.project, ids=ids, actor=actor)
    return _render(request, notice=f"{restored} restored.")


@project_view(edit=True)
@require_POST
def trash_erase_view(request: ConsoleRequest) -> HttpResponse:
    """Erase the selected memories now (``all=yes``: the whole trash), after the
    confirmation (``confirm=yes``); the erasure is the delete's (no words kept)."""
    everything = request.POST.get("all") == "yes"
    ids, error = ([], "") if everything else _selected(request)
    if error:
        return _render(request, error=error)
    if request.POST.get("confirm") != "yes":
        return _render(request, error="Nothing was erased: confirm first.")
    actor = Actor.operator(request.user.get_username())
    erased = trash_erase(project=request.project, actor=actor, ids=None if everything else ids)
    return _render(request, notice=f"{erased} erased for good.")


urlpatterns: list[URLPattern] = [
    path(f"{PROJECT}trash/", trash, name="console-trash"),
    path(f"{PROJECT}trash/restore/", trash_restore, name="console-trash-restore"),
    path(f"{PROJECT}trash/erase/", trash_erase_view, name="console-trash-erase"),
]
