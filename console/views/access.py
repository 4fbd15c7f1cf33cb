"""Who may open which project in the operators' console.

Every console view that shows a project's data is wrapped in ``project_view``: the
project comes from the URL (``project_id``), and an operator without a membership
gets a 404 (the project's existence is not revealed), a viewer a 403 on a view that
changes something. Superusers see and edit every project.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django_htmx.middleware import HtmxDetails

from memories.models import Membership, Project


class ConsoleRequest(HttpRequest):
    """The request a project's console view receives, for the type checker only: no
    instance of it is made. HtmxMiddleware sets ``htmx`` on every request (django-htmx
    documents this declaration), ``project_view`` sets ``project`` and ``can_edit``."""

    htmx: HtmxDetails
    project: Project
    can_edit: bool  # an editor of the project (or a superuser), not a viewer


def projects_visible(user: Any) -> QuerySet[Project]:
    """The projects this operator may open: all for a superuser, else their memberships."""
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user)


def project_role(user: Any, project: Project) -> str | None:
    """``editor``, ``viewer`` or None (no access) for this operator and project."""
    if user.is_superuser:
        return Membership.Role.EDITOR
    membership = Membership.objects.filter(user=user, project=project).first()
    return membership.role if membership else None


View = Callable[..., HttpResponse]


def project_view(*, edit: bool = False) -> Callable[[View], View]:
    """Decorate a console view taking a ``ConsoleRequest``, for a URL with ``project_id``:
    sets ``request.project`` and ``request.can_edit``; 404 without access, 403 when
    ``edit`` and only a viewer."""

    def decorate(view: View) -> View:
        @login_required
        @wraps(view)
        def wrapped(
            request: HttpRequest, project_id: int, *args: Any, **kwargs: Any
        ) -> HttpResponse:
            project = Project.objects.filter(pk=project_id).first()
            role = project_role(request.user, project) if project else None
            if project is None or role is None:
                raise Http404("No such project.")
            can_edit = role == Membership.Role.EDITOR
            if edit and not can_edit:
                raise PermissionDenied("Viewers cannot change anything in this project.")
            # the same object, from here on carrying what a ConsoleRequest declares
            console_request = cast(ConsoleRequest, request)
            console_request.project = project
            console_request.can_edit = can_edit
            return view(console_request, *args, **kwargs)

        return wrapped

    return decorate
