"""The project's Activity log: every change to its memories, settings, synopses and
team, newest first, with who, when, why (intent) and what changed (a field-level
diff); filtered by actor, action, intent, memory kind and user, dates. Read only."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from console.paths import PROJECT
from console.services.activity import (
    ACTIONS,
    ACTOR_TYPES,
    INTENTS,
    activity_filters_read,
    activity_page,
)
from console.views.access import ConsoleRequest, project_view
from memories.models import Memory

TEMPLATE = "console/activity.html"


@project_view()
@require_GET
@vary_on_headers("HX-Request")
def activity(request: ConsoleRequest) -> HttpResponse:
    """The log (``?cursor=`` an older page; the filters by name); asked by HTMX, the
    list alone. A bad filter is named and left out."""
    project = request.project
    filters, errors = activity_filters_read(project=project, params=request.GET)
    cursor = request.GET.get("cursor", "")
    try:
        page = activity_page(project=project, filters=filters, cursor=cursor)
    except ValueError as error:
        errors.append(str(error))
        page = activity_page(project=project, filters=filters)
    context = {
        "project": project,
        "can_edit": request.can_edit,
        "section": "activity",
        "filters": filters,
        "errors": errors,
        "log": page,
        "older": bool(cursor) and not errors,
        "choices": _choices(),
    }
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, f"{TEMPLATE}#activity-list", context)
    return render(request, TEMPLATE, context)


def _choices() -> dict[str, tuple[str, ...]]:
    return {
        "actor_types": ACTOR_TYPES,
        "actions": ACTIONS,
        "intents": INTENTS,
        "kinds": tuple(Memory.Kind.values),
    }


urlpatterns: list[URLPattern] = [
    path(f"{PROJECT}activity/", activity, name="console-activity"),
]
