"""The project's Team page: its operators and their roles; editors add a teammate (an
existing operator, or a new login whose generated password is shown once), change a
role, remove one. Each change recorded (console.services.team) and in the Activity log."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path
from django.views.decorators.http import require_GET, require_POST

from console.paths import PROJECT
from console.services.team import (
    ROLES,
    TeamError,
    team_get,
    teammate_add,
    teammate_remove,
    teammate_role_set,
)
from console.views.access import ConsoleRequest, project_view

TEMPLATE = "console/team.html"


def _render(request: ConsoleRequest, *, status: int = 200, **extra: object) -> HttpResponse:
    context = {
        "project": request.project,
        "can_edit": request.can_edit,
        "section": "team",
        "team": team_get(project=request.project),
        "roles": ROLES,
        "form": request.POST if extra.get("error") else {},
        **extra,
    }
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, f"{TEMPLATE}#team", context, status=status)
    return render(request, TEMPLATE, context, status=status)


def _membership_id(request: ConsoleRequest) -> int:
    try:
        return int(request.POST.get("membership", ""))
    except ValueError:
        raise TeamError("membership", "not a member of this project's team.") from None


@project_view()
@require_GET
def team(request: ConsoleRequest) -> HttpResponse:
    """The operators of the project and their roles (superusers see every project)."""
    return _render(request)


@project_view(edit=True)
@require_POST
def team_add(request: ConsoleRequest) -> HttpResponse:
    """Add an existing operator (``operator``: username or e-mail) or a new one
    (``username``, ``email``) in ``role``; a new one's password is shown once."""
    try:
        added = teammate_add(
            project=request.project,
            by=request.user,
            role=request.POST.get("role", ""),
            operator=request.POST.get("operator", ""),
            username=request.POST.get("username", ""),
            email=request.POST.get("email", ""),
        )
    except TeamError as error:
        return _render(request, status=422, error=str(error), error_field=error.field)
    name = added.membership.user.get_username()
    notice = f"{name} added as {added.membership.role}."
    return _render(request, notice=notice, new_login=name, password=added.password)


@project_view(edit=True)
@require_POST
def team_role(request: ConsoleRequest) -> HttpResponse:
    """Make a teammate an editor or a viewer."""
    try:
        membership = teammate_role_set(
            project=request.project,
            by=request.user,
            membership_id=_membership_id(request),
            role=request.POST.get("role", ""),
        )
    except TeamError as error:
        return _render(request, status=422, error=str(error))
    notice = f"{membership.user.get_username()} is {membership.role}."
    return _render(request, notice=notice)


@project_view(edit=True)
@require_POST
def team_remove(request: ConsoleRequest) -> HttpResponse:
    """Take a teammate off the team (their login stays)."""
    try:
        name = teammate_remove(
            project=request.project, by=request.user, membership_id=_membership_id(request)
        )
    except TeamError as error:
        return _render(request, status=422, error=str(error))
    return _render(request, notice=f"{name} removed from the team.")


urlpatterns: list[URLPattern] = [
    path(f"{PROJECT}team/", team, name="console-team"),
    path(f"{PROJECT}team/add/", team_add, name="console-team-add"),
    path(f"{PROJECT}team/role/", team_role, name="console-team-role"),
    path(f"{PROJECT}team/remove/", team_remove, name="console-team-remove"),
]
