"""The console's project pages: the list, the overview, the API keys and the
configuration. Reads come from console.services.overview, changes go through the
services the API uses."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from console.forms import ApiKeyCreateForm, SettingsSectionForm
from console.services.activity import snapshot_diff
from console.services.overview import (
    DayCount,
    project_overview,
    projects_summarize,
    workers_health,
)
from console.views.access import ConsoleRequest, project_view, projects_visible
from console.views.embedding import embedding_card_context
from memories.config import SettingsError, settings_as_dict, settings_schema
from memories.models import ApiKey, Membership, SettingsRevision
from memories.services.configuration import project_settings_get, project_settings_update
from memories.services.projects import KEY_PREFIX, api_key_create, api_key_revoke
from memories.services.revisions import Actor


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """The projects this operator may open (superusers: all), with their counts."""
    projects = projects_summarize(projects=projects_visible(request.user))
    roles = dict(
        Membership.objects.filter(user_id=request.user.pk or 0).values_list("project_id", "role")
    )
    for project in projects:
        role = "superuser" if request.user.is_superuser else roles.get(project.pk, "")
        project.role = role  # type: ignore[attr-defined]
    return render(request, "console/projects.html", {"projects": projects})


@dataclass
class Bar:
    """One day of the overview's chart, in SVG user units."""

    day: date
    count: int
    x: float
    y: float
    height: float


CHART_HEIGHT, CHART_SLOT, CHART_BAR = 120.0, 20.0, 14.0


def _bars(days: list[DayCount]) -> tuple[list[Bar], int]:
    """The chart's bars (a one-unit stub for a day with memories, so none is lost at
    scale) and the count at the top of the scale."""
    top = max((day.count for day in days), default=0)
    bars = []
    for index, day in enumerate(days):
        height = CHART_HEIGHT * day.count / (top or 1)
        height = max(height, 1.0) if day.count else 0.0
        x = index * CHART_SLOT + (CHART_SLOT - CHART_BAR) / 2
        bars.append(Bar(day.day, day.count, x, CHART_HEIGHT - height, height))
    return bars, top


HEALTH_PART = "health"  # ?part=: the workers' and queues' card alone (its HTMX poll)


@project_view()
def overview(request: ConsoleRequest) -> HttpResponse:
    """Counts by kind and status, memories per day, backlog, and what each worker runs
    and each queue holds (ok/amber/red, polled every few seconds); a new project's
    first steps. Tasks' inputs (ids) are shown to superusers alone: the workers serve
    every project."""
    project = request.project
    if request.htmx and request.GET.get("part") == HEALTH_PART:
        health, redis_error = workers_health()
        context = _health_context(request, health=health, redis_error=redis_error)
        return render(request, "console/overview.html#worker-health", context)
    data = project_overview(project=project)
    bars, top = _bars(data.days)
    key = ApiKey.objects.active().filter(project=project).order_by("-created_at").first()
    context = {
        "overview": data,
        "bars": bars,
        "chart_top": top,
        "chart_width": CHART_SLOT * len(bars),
        "chart_height": CHART_HEIGHT,
        "days_total": sum(day.count for day in data.days),
        "first_key": f"{KEY_PREFIX}{key.prefix}_…" if key else "",
        "memories_url": request.build_absolute_uri("/api/v1/memories/"),
        "section": "overview",
        **_health_context(request, health=data.health, redis_error=data.redis_error),
    }
    return render(request, "console/overview.html", context)


def _health_context(request: ConsoleRequest, **health: Any) -> dict[str, Any]:
    return {**health, "show_inputs": request.user.is_superuser, "health_part": HEALTH_PART}


def _keys_page(
    request: ConsoleRequest, *, form: ApiKeyCreateForm, new_key: str = "", status: int = 200
) -> HttpResponse:
    project = request.project
    keys = ApiKey.objects.filter(project=project).order_by("revoked_at", "-created_at")
    template = "console/api_keys.html"
    if request.htmx:
        template += "#keys"
    context = {"keys": keys, "form": form, "new_key": new_key, "section": "keys"}
    return render(request, template, context, status=status)


@project_view()
def api_keys(request: ConsoleRequest) -> HttpResponse:
    """The project's API keys (active first) and, for editors, the form for a new one."""
    return _keys_page(request, form=ApiKeyCreateForm())


@require_POST
@project_view(edit=True)
def api_key_new(request: ConsoleRequest) -> HttpResponse:
    """Create a key and show it, this once: only its hash is kept."""
    form = ApiKeyCreateForm(request.POST)
    if not form.is_valid():
        return _keys_page(request, form=form, status=422)
    _, raw_key = api_key_create(
        project=request.project,
        name=form.cleaned_data["name"],
        read_only=form.cleaned_data["read_only"],
    )
    return _keys_page(request, form=ApiKeyCreateForm(), new_key=raw_key, status=201)


@project_view(edit=True)
def api_key_revoke_confirm(request: ConsoleRequest, key_id: int) -> HttpResponse:
    """GET: ask for confirmation (inline with HTMX); POST: revoke the key."""
    key = get_object_or_404(
        ApiKey,
        pk=key_id,
        project=request.project,
    )
    if request.method == "POST":
        api_key_revoke(key=key)
        return _keys_page(request, form=ApiKeyCreateForm())
    template = "console/api_key_revoke.html"
    if request.htmx:
        template += "#confirm"
    return render(request, template, {"key": key, "section": "keys"})


def _settings_forms(request: ConsoleRequest, bound: SettingsSectionForm | None = None) -> list[Any]:
    project = request.project
    values = settings_as_dict(project_settings_get(project=project))
    forms = []
    for section in settings_schema():
        if bound is not None and bound.section == section:
            forms.append(bound)
        else:
            forms.append(SettingsSectionForm(section=section, initial=values[section]))
        forms[-1].overrides = set((project.settings or {}).get(section, {}))
        for name, entry in forms[-1].schema.items():  # what a reset gives back
            forms[-1].fields[name].default_value = entry["default"]  # type: ignore[attr-defined]
    return forms


def _settings_page(
    request: ConsoleRequest,
    *,
    bound: SettingsSectionForm | None = None,
    saved: str = "",
    status: int = 200,
    notice: str = "",
) -> HttpResponse:
    project = request.project
    forms = _settings_forms(request, bound)
    context: dict[str, Any] = {
        "forms": forms,
        "saved": saved,
        "notice": notice,
        "section": "settings",
        "revisions": _recent_changes(project),
    }
    if request.htmx and bound is not None:
        context["form"] = next(form for form in forms if form.section == bound.section)
        context["recent_oob"] = bool(saved)  # the recent changes, swapped in by HTMX
        return render(request, "console/settings.html#section", context, status=status)
    context |= embedding_card_context(request)
    return render(request, "console/settings.html", context, status=status)


RECENT_CHANGES = 10


def _recent_changes(project: Any) -> list[dict[str, Any]]:
    """The project's last settings changes, each with its changed settings (before and
    after: the overrides; none, the default)."""
    revisions = SettingsRevision.objects.filter(project=project, room__isnull=True).order_by(
        "-created_at", "-pk"
    )[:RECENT_CHANGES]
    return [
        {"revision": revision, "changes": snapshot_diff(revision.before, revision.after)}
        for revision in revisions
    ]


@project_view()
def project_settings(request: ConsoleRequest) -> HttpResponse:
    """The configuration, a form per section (read-only for viewers), and its history."""
    return _settings_page(request)


@require_POST
@project_view(edit=True)
def project_settings_section(request: ConsoleRequest, section: str) -> HttpResponse:
    """Save one section through the API's service (recorded as a SettingsRevision);
    invalid values come back in place with their errors (422). ``reset=<name>``
    instead: put that setting back to its default."""
    project = request.project
    if section not in settings_schema():
        return HttpResponse("No such section.", status=404)
    if "reset" in request.POST:
        return _setting_reset(request, section, request.POST["reset"])
    values = settings_as_dict(project_settings_get(project=project))[section]
    form = SettingsSectionForm(request.POST, section=section, initial=values)
    if form.is_valid() and form.changed_data:
        try:
            project_settings_update(
                project=project,
                changes=form.changes(),
                actor=Actor.operator(request.user.get_username()),
            )
        except SettingsError as error:
            form.errors_add(error.errors)
    if not form.is_valid():
        return _settings_page(request, bound=form, status=422)
    saved = section if form.changed_data else ""
    # a fresh form on the saved values, so the next change is measured from them
    values = settings_as_dict(project_settings_get(project=project))[section]
    fresh = SettingsSectionForm(section=section, initial=values)
    return _settings_page(request, bound=fresh, saved=saved)


def _setting_reset(request: ConsoleRequest, section: str, name: str) -> HttpResponse:
    """Remove the project's override of ``section.name`` (back to its default) through
    the API's service: a null value in a PATCH, recorded as a SettingsRevision."""
    project = request.project
    if name not in settings_schema()[section]:
        values = settings_as_dict(project_settings_get(project=project))[section]
        form = SettingsSectionForm(request.POST, section=section, initial=values)
        form.is_valid()
        form.add_error(None, f"reset: {section} has no setting {name[:100]!r}.")
        return _settings_page(request, bound=form, status=422)
    was_set = name in (project.settings or {}).get(section, {})
    project_settings_update(
        project=project,
        changes={section: {name: None}},
        actor=Actor.operator(request.user.get_username()),
    )
    values = settings_as_dict(project_settings_get(project=project))[section]
    fresh = SettingsSectionForm(section=section, initial=values)
    notice = f"{section}.{name} is back at its default." if was_set else ""
    return _settings_page(request, bound=fresh, saved=section if was_set else "", notice=notice)
