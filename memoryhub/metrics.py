"""Prometheus metrics at ``/metrics`` (prometheus-client, text format 0.0.4).

What a scrape of the web process answers:

* counted per request by ``MetricsMiddleware`` (a histogram observation and at most a
  counter: a few microseconds): ``memoryhub_http_request_duration_seconds`` by method,
  route (the URL pattern, never the raw path: bounded series) and status class; the
  steps of a search or a context, read from the ``timings_ms`` its API answer carries
  (``memoryhub_search_step_seconds`` by route and step: nothing is added to the search
  or context services); ``memoryhub_rate_limited_total`` (the 429 refusals, API keys'
  rate limits and the logins' throttle);
* read at scrape time from PostgreSQL and Redis, so every web process on every machine
  answers the same whichever one Prometheus reaches (memoryhub/metrics_state.py): the
  queues' depth and oldest task's age, the embedding backlog and time-to-embedded, the
  database connections, the replicas' lag;
* the Celery tasks' durations, failures and retries, counted in the worker processes
  (memoryhub/metrics_worker.py): a worker on another machine serves its own on
  METRICS_WORKER_PORT; on one machine with PROMETHEUS_MULTIPROC_DIR they are in this
  scrape too.

Several web processes (gunicorn workers) on one machine share their counters through
prometheus-client's multiprocess mode: set PROMETHEUS_MULTIPROC_DIR to an empty folder
of that machine before they start (emptied at each start). Without it each process
answers its own counters, which is right for one process only.

Access (settings METRICS_TOKEN, METRICS_ALLOWED_IPS): a request passes with
``Authorization: Bearer <METRICS_TOKEN>`` or from an address in METRICS_ALLOWED_IPS
(addresses or networks). With neither configured the endpoint is off (404): a reverse
proxy on the same machine makes every request come from 127.0.0.1, so "loopback only"
would publish it.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import struct
import time
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

from memoryhub.metrics_state import StateCollector

# request latency: from a cached GET (~1 ms) to a slow context build or an import
REQUEST_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
STEP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
MAX_STEPS = 32  # steps of one answer that are counted (they are named in the code: ~10)

REQUEST_SECONDS = Histogram(
    "memoryhub_http_request_duration_seconds",
    "Time from the request to its response, by method, URL pattern and status class.",
    ["method", "route", "status"],
    buckets=REQUEST_BUCKETS,
)
STEP_SECONDS = Histogram(
    "memoryhub_search_step_seconds",
    "Time of each step of a search or a context (its answer's timings_ms), by route.",
    ["route", "step"],
    buckets=STEP_BUCKETS,
)
RATE_LIMITED = Counter(
    "memoryhub_rate_limited",
    "Requests refused with 429: an API key over its rate limit, a throttled login.",
    ["route"],
)

# the labelled children by their labels: a dict lookup instead of labels()' validation
# and lock at each request (the label sets are bounded: the URL patterns, the steps)
_children: dict[tuple[Any, ...], Any] = {}


def _child(metric: Any, *labels: str) -> Any:
    key = (metric, *labels)
    child = _children.get(key)
    if child is None:
        child = _children.setdefault(key, metric.labels(*labels))
    return child


_state_registry = CollectorRegistry(auto_describe=False)
_state_registry.register(StateCollector())


def request_route(request: HttpRequest) -> str:
    """The URL pattern that served ``request`` ("api/v1/memories/<str:memory_id>/"),
    "(static)" for a static file, "(unmatched)" when no pattern did (a 404)."""
    match = getattr(request, "resolver_match", None)
    if match is not None and match.route:
        return str(match.route)
    if request.path_info.startswith(f"/{settings.STATIC_URL.lstrip('/')}"):
        return "(static)"
    return "(unmatched)"


def response_observe(request: HttpRequest, response: HttpResponse, seconds: float) -> None:
    """Count one answered request (and the steps of a search or context it answered)."""
    route = request_route(request)
    status = response.status_code
    _child(REQUEST_SECONDS, request.method or "", route, f"{status // 100}xx").observe(seconds)
    if status == 429:
        _child(RATE_LIMITED, route).inc()
    data = getattr(response, "data", None)  # a DRF answer's data, still there after render
    if status == 200 and isinstance(data, dict):
        timings = data.get("timings_ms")
        if isinstance(timings, dict):
            steps_observe(route, timings.items())


def steps_observe(route: str, timings: Iterable[tuple[Any, Any]]) -> None:
    for count, (step, ms) in enumerate(timings):
        if count >= MAX_STEPS:
            break
        if isinstance(ms, int | float):
            _child(STEP_SECONDS, route, str(step)).observe(float(ms) / 1000)


class MetricsMiddleware:
    """Times each request from just inside Server-Timing to its response."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        try:
            response = self.get_response(request)
        except BaseException:
            seconds = time.perf_counter() - started
            _child(REQUEST_SECONDS, request.method or "", request_route(request), "5xx").observe(
                seconds
            )
            raise
        response_observe(request, response, time.perf_counter() - started)
        return response


# --- the endpoint --------------------------------------------------------------------


@lru_cache(maxsize=8)
def _networks(
    allowed: tuple[str, ...],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(item, strict=False) for item in allowed)


def address_allowed(address: str, allowed: Iterable[str]) -> bool:
    """Whether ``address`` is one of, or in one of, the ``allowed`` addresses/networks."""
    networks = _networks(tuple(allowed))
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def scrape_allowed(request: HttpRequest) -> bool:
    """Raises Http404 while metrics are off (no token, no addresses configured)."""
    token: str = settings.METRICS_TOKEN
    allowed: list[str] = settings.METRICS_ALLOWED_IPS
    if not token and not allowed:
        raise Http404("metrics are off: set METRICS_TOKEN or METRICS_ALLOWED_IPS")
    if token:
        scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip(), token):
            return True
    return bool(allowed) and address_allowed(request.META.get("REMOTE_ADDR", ""), allowed)


def exposition() -> bytes:
    """This process's (or this machine's, in multiprocess mode) counters, then the
    state read from the database and Redis now."""
    text = _multiprocess_text() if os.environ.get("PROMETHEUS_MULTIPROC_DIR") else None
    return (text or generate_latest(REGISTRY)) + generate_latest(_state_registry)


def _multiprocess_text(attempts: int = 3) -> bytes:
    """Every process's files added up; read again when one was caught being created
    (a process's first file is empty for an instant: struct.error)."""
    for attempt in range(attempts):
        counted = CollectorRegistry()
        multiprocess.MultiProcessCollector(counted)  # type: ignore[no-untyped-call]
        try:
            return generate_latest(counted)
        except struct.error:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05)
    return b""


def metrics(request: HttpRequest) -> HttpResponse:
    """GET /metrics: the Prometheus text format; 403 to a scraper not let in."""
    if not scrape_allowed(request):
        return HttpResponse("Forbidden.\n", status=403, content_type="text/plain")
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_PLAIN_0_0_4)
