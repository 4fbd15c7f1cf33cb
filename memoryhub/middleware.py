"""What every request goes through before and after its view, whatever app serves it.

* RequestLimitsMiddleware: a body or query string over its limit is a 413 naming the
  limit, before anything reads it; a JSON body nested deeper than MEMORYHUB_MAX_JSON_DEPTH
  is a 400 before anything parses it, whatever parser its view has; a path segment that
  cannot be an id (NUL, control characters) or a NUL in an API query parameter is a 400
  naming it, before a view sends it to PostgreSQL (which refuses NUL in text: that was
  a 500).
* ServiceOutageMiddleware: PostgreSQL or Redis unreachable is a 503 with Retry-After (a
  JSON error on the API, templates/503.html on the dashboard and admin), not a 500.
  Django closes a broken connection at the end of the request (CONN_HEALTH_CHECKS
  checks a kept one before reuse), so the process recovers by itself once the service
  is back. Any other failure on the API is a JSON 500 with the request's id, which
  every response carries (X-Request-ID) and every log line of the request names.
* ServerTimingMiddleware: every response says how long the hub took to answer it,
  how much of that in the database and on the CPU (``Server-Timing``), so a client can
  tell time in the hub from time getting there, and work from waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.log import log_response

from memories.api.errors import outage_detail, outage_log, outage_of, retry_after_seconds
from memories.api.parsers import json_depth_refusal
from memories.api.validators import id_problem
from memories.providers import request_ids

JSON_PREFIXES = ("/api/", "/mcp/", "/health/", "/ready/")


def wants_json(request: HttpRequest) -> bool:
    """The API and the health checks answer JSON; the dashboard and admin, pages."""
    return request.path_info.startswith(JSON_PREFIXES)


def body_limit(path: str) -> int | None:
    """The largest body ``path`` takes, or None where the view enforces a cap of its own."""
    if path.startswith(tuple(settings.MEMORYHUB["BODY_LIMIT_EXEMPT_PATHS"])):
        return None
    return int(settings.MEMORYHUB["MAX_BODY_BYTES"])


def too_large(request: HttpRequest, what: str, limit: int) -> HttpResponse:
    detail = f"{what} larger than {limit} bytes"
    if wants_json(request):
        return JsonResponse({"detail": detail, "limit": limit}, status=413)
    return HttpResponse(f"{detail[0].upper()}{detail[1:]}.", status=413, content_type="text/plain")


def bad_request(request: HttpRequest, field: str, problem: str) -> HttpResponse:
    if wants_json(request):
        return JsonResponse({field: [problem]}, status=400)
    return HttpResponse(f"{field}: {problem}", status=400, content_type="text/plain")


def bad_json(problem: str) -> HttpResponse:
    return JsonResponse({"detail": problem}, status=400)


def _utf8_json(request: HttpRequest) -> bool:
    """A JSON body in UTF-8 (the parser checks another charset after decoding it)."""
    content_type = request.content_type or ""
    if content_type != "application/json" and not content_type.endswith("+json"):
        return False
    return (request.encoding or "utf-8").lower().replace("_", "-") in ("utf-8", "utf8")


class RequestLimitsMiddleware:
    """Sizes by the Content-Length header and the raw query string; ids in the path."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        query_limit = int(settings.MEMORYHUB["MAX_QUERY_BYTES"])
        if len(request.META.get("QUERY_STRING", "")) > query_limit:
            return too_large(request, "query string", query_limit)
        limit = body_limit(request.path_info)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return bad_request(request, "Content-Length", "Must be a number of bytes.")
        if limit is not None and length > limit:
            return too_large(request, "request body", limit)
        if _utf8_json(request) and 0 < length <= (limit or settings.DATA_UPLOAD_MAX_MEMORY_SIZE):
            refusal = json_depth_refusal(request.body)
            if refusal is not None:
                field, problem = refusal
                return bad_request(request, field, problem) if field else bad_json(problem)
            request.json_depth_checked = True  # type: ignore[attr-defined]  # the parser skips it
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        for name, value in view_kwargs.items():
            problem = id_problem(value) if isinstance(value, str) else None
            if problem:
                return bad_request(request, name, problem)
        if wants_json(request):
            for name, values in request.GET.lists():
                if "\x00" in name or any("\x00" in value for value in values):
                    return bad_request(
                        request, name.replace("\x00", ""), "Null characters are not allowed."
                    )
        return None


class ServerTimingMiddleware:
    """``Server-Timing: app;dur=<ms>, db;dur=<ms>, cpu;dur=<ms>, queue;dur=<ms>``: the
    time from the first middleware to the response (a streamed body's transfer
    excluded), the part of it in this thread's database calls (each until the thread
    runs again), this thread's CPU time, and how long it was ready to run but waited for
    a core (Linux). What is left of ``app`` is waiting: for the GIL, for a core, for a
    lock. Browsers' developer tools show the header."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        database = [0.0]

        def timed(execute: Callable[..., Any], *args: Any) -> Any:
            started = time.perf_counter()
            try:
                return execute(*args)
            finally:
                database[0] += time.perf_counter() - started

        started, cpu, queued = time.perf_counter(), time.thread_time(), _queued()
        with connection.execute_wrapper(timed):
            response = self.get_response(request)
        app, cpu = time.perf_counter() - started, time.thread_time() - cpu
        timing = f"app;dur={app * 1000:.1f}, db;dur={database[0] * 1000:.1f}"
        timing += f", cpu;dur={cpu * 1000:.1f}"
        if queued is not None and (now := _queued()) is not None:
            timing += f", queue;dur={(now - queued) * 1000:.1f}"
        response["Server-Timing"] = timing
        return response


def _queued() -> float | None:
    """Seconds this thread has spent runnable but waiting for a core (Linux's
    schedstat; None elsewhere)."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class ServiceOutageMiddleware:
    """Every response carries its request's id (X-Request-ID: a sane one from a proxy,
    else a new one; memories/providers/request_ids.py), which every log line written
    meanwhile names. A view that found PostgreSQL or Redis unreachable answers 503 with
    Retry-After. Any other failure on the API is a JSON 500 naming the request id, never
    Django's HTML page: Django turns an exception (a view's, a middleware's) into its
    500 page, having logged it with its traceback and sent got_request_exception (which
    error trackers and the test client listen to); on the API that page is replaced.

    The API's own exception handler answers for DRF views (memories.api.errors); this
    catches the rest: the dashboard, the admin, plain Django views."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_ids.request_id_choose(request.META.get(request_ids.META_KEY))
        token = request_ids.current.set(request_id)
        try:
            response = _answered(request, self.get_response(request), request_id)
        finally:
            request_ids.current.reset(token)
        response[request_ids.HEADER] = request_id
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        service = outage_of(exception)
        if service is None:
            return None
        outage_log(service, exception)
        wait = retry_after_seconds()
        detail = outage_detail(service)
        if wants_json(request):
            response: HttpResponse = JsonResponse(
                {"detail": detail, "service": service, "request_id": request_ids.current.get()},
                status=503,
            )
        else:
            page = render_to_string("503.html", {"detail": detail, "retry_after": wait})
            response = HttpResponse(page, status=503)
        response["Retry-After"] = str(wait)
        return response


def _answered(request: HttpRequest, response: HttpResponse, request_id: str) -> HttpResponse:
    """``response`` logged if it is an error (Django's line, written here while the
    request's id is known; Django writes it after the middleware unless it was), and an
    HTML 500 on the API replaced by the JSON one."""
    if response.status_code >= 400:
        log_response(
            "%s: %s", response.reason_phrase, request.path, response=response, request=request
        )
    if response.status_code == 500 and wants_json(request) and not _is_json(response):
        response = server_error_json(request_id)
        response._has_been_logged = True  # type: ignore[attr-defined]  # Django's mark
    return response


def server_error_json(request_id: str) -> JsonResponse:
    """The API's 500: no detail of the failure (the log has it), the id that finds it."""
    return JsonResponse({"detail": "Internal server error.", "request_id": request_id}, status=500)


def _is_json(response: HttpResponse) -> bool:
    return str(response.get("Content-Type", "")).startswith("application/json")
