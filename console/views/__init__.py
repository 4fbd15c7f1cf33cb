"""The operators' console: server-rendered pages with HTMX fragments.

auth (login, logout), projects (list, overview, API keys, configuration), users (the
users list); access.project_view scopes every project page to the operator's
memberships.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect


def home(request: HttpRequest) -> HttpResponse:
    return redirect("dashboard")
