from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from memories.api import health

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("memories.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("health/", health.health, name="health"),
    path("ready/", health.ready, name="ready"),
    path("", include("memories.urls")),
]
