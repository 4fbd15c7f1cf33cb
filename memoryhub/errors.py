"""Django's error handlers, answering JSON where the client speaks JSON.

A URL that matches no pattern never reaches DRF, so without this an API client asking for
``/api/v1/prune/runs/latest/`` (the pattern wants a number) would get an HTML page.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from memoryhub.middleware import wants_json


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if wants_json(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)
