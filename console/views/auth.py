"""Logging in and out of the console, and the admin's login, both throttled
(console.services.logins): past the limit the form says how long to wait and the
answer is a 429."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse

from console.forms import ConsoleLoginForm


def _throttled(response: HttpResponse, form: Any) -> HttpResponse:
    wait = getattr(form, "throttled_seconds", 0)
    if wait:
        response.status_code = 429
        response["Retry-After"] = str(wait)
    return response


class ConsoleLoginView(auth_views.LoginView):
    form_class = ConsoleLoginForm
    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def form_invalid(self, form: Any) -> HttpResponse:
        return _throttled(super().form_invalid(form), form)


login = ConsoleLoginView.as_view()
logout = auth_views.LogoutView.as_view()  # POST only (Django 5); to LOGOUT_REDIRECT_URL


def admin_login(request: HttpRequest) -> HttpResponse:
    """The admin's own login view (admin.site.login_form is the throttled form, set in
    memoryhub/urls.py), answering 429 when throttled."""
    response = admin.site.login(request)
    form = (getattr(response, "context_data", None) or {}).get("form")
    return _throttled(response, form)
