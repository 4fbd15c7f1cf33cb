from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from console.forms import AdminLoginForm
from console.views import auth as console_auth
from memoryhub import errors, health, metrics
from memoryhub.mcp import McpView

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
    path("mcp/", McpView.as_view(), name="mcp"),  # MCP over streamable HTTP (memoryhub/mcp.py)
    path("health/", health.health, name="health"),
    path("ready/", health.ready, name="ready"),
    path("metrics", metrics.metrics, name="metrics"),  # Prometheus (memoryhub/metrics.py)
    path("", include("console.urls")),
]

# an unknown URL under /api/ (a run id that is not a number, a typo) is the API's JSON 404
handler404 = errors.not_found
