"""(Being built.) This module's console pages; console/urls.py includes its
``urlpatterns``."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
