"""Liveness and readiness for load balancers and the docker-compose healthchecks."""

from __future__ import annotations

import time

from django.db import connection
from django.http import HttpRequest, JsonResponse

from memories.services.workers import worker_heartbeats


def health(request: HttpRequest) -> JsonResponse:
    """The web process answers."""
    return JsonResponse({"status": "ok"})


def ready(request: HttpRequest) -> JsonResponse:
    """Database, Redis and at least one live worker; 503 naming what is missing."""
    checks: dict[str, dict[str, object]] = {}
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 2)}
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        checks["database"] = {"ok": False, "error": str(exc)}
    try:
        workers = worker_heartbeats()
        checks["redis"] = {"ok": True}
        checks["workers"] = {"ok": bool(workers), "alive": workers}
    except Exception as exc:  # noqa: BLE001
        checks["redis"] = {"ok": False, "error": str(exc)}
        checks["workers"] = {"ok": False, "error": "Redis unreachable"}
    ok = all(check["ok"] for check in checks.values())
    return JsonResponse(
        {"status": "ok" if ok else "unavailable", "checks": checks}, status=200 if ok else 503
    )
