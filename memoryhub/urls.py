from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from console.forms import AdminLoginForm
from console.views import auth as console_auth
from memoryhub import errors, health, metrics


@csrf_exempt  # as every DRF view is: the MCP view authenticates by API key, no cookie
def mcp(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """``/mcp/`` (memoryhub/mcp.py), imported on the first MCP request: the MCP SDK
    takes 0.7-3 s to import, which no other first request of a process should wait for."""
    from memoryhub.mcp import mcp_view

    return mcp_view(request, *args, **kwargs)


# the admin's login counts failures and refuses when throttled, as the console's does
admin.site.login_form = AdminLoginForm

urlpatterns = [
    path("admin/login/", console_auth.admin_login),  # before admin/: answers 429 when throttled
    path("admin/", admin.site.urls),
    path("api/v1/", include("memories.api.urls")),
    path("api/v1/", include("ingestion.api.urls")),
    path("api/v1/", include("synopsis.api")),  # GET llm-usage/ (synopsis/api.py)
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("mcp/", mcp, name="mcp"),  # MCP over streamable HTTP (memoryhub/mcp.py)
    path("health/", health.health, name="health"),
    path("ready/", health.ready, name="ready"),
    path("metrics", metrics.metrics, name="metrics"),  # Prometheus (memoryhub/metrics.py)
    path("", include("console.urls")),
]

# an unknown URL under /api/ (a run id that is not a number, a typo) is the API's JSON 404
handler404 = errors.not_found
