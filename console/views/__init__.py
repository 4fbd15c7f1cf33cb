"""The operators' console: server-rendered pages with HTMX fragments.

auth (login, logout), projects (list, overview, API keys, configuration), users (the
users list), user_page (a user's memories, rooms and search), memory_edit (changing
them), user_panels (the synopsis and the context preview), documents (the Documents
tab). access.project_view scopes every project page to the operator's memberships and
hands the view a ConsoleRequest.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect


def home(request: HttpRequest) -> HttpResponse:
    return redirect("dashboard")
