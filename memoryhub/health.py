"""Liveness and readiness for load balancers and the docker-compose healthchecks."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

from memories.services.workers import worker_heartbeats
from memoryhub.supervisor import hub_state_read


def health(request: HttpRequest) -> JsonResponse:
    """The web process answers (nothing else is checked: it stays 200 in an outage)."""
    return JsonResponse({"status": "ok"})


def ready(request: HttpRequest) -> JsonResponse:
    """Database, Redis and at least one live worker; 503 naming what is missing.

    Under `manage.py hub` the supervisor's state file adds what it is restarting: the
    status is then "recovering" rather than "unavailable", a worker it is restarting
    is not ready whatever heartbeat it left in Redis, and "restarts" counts the
    restarts of each service since the hub started.
    """
    checks = _checks()
    hub = hub_state_read(Path(settings.DATA_DIR))
    services: dict[str, dict[str, Any]] = hub["services"] if hub else {}
    worker = services.get("worker")
    if worker is not None and checks["workers"]["ok"] and not _worker_fresh(worker, checks):
        checks["workers"] = {**checks["workers"], "ok": False, "state": worker["state"]}
    ok = all(check["ok"] for check in checks.values())
    status = "ok" if ok else "recovering" if hub and hub["status"] == "running" else "unavailable"
    body: dict[str, Any] = {
        "status": status,
        **{name: "ok" if check["ok"] else "down" for name, check in checks.items()},
        "checks": checks,
    }
    if hub:
        body["services"] = {name: service["state"] for name, service in services.items()}
        body["restarts"] = {name: service["restarts"] for name, service in services.items()}
    return JsonResponse(body, status=200 if ok else 503)


def _worker_fresh(worker: dict[str, Any], checks: dict[str, dict[str, Any]]) -> bool:
    """The worker the hub runs now has sent a heartbeat: one its killed predecessor
    left (same hostname, alive for 30 s in Redis) is older than its start."""
    now = time.time()
    return worker["state"] == "up" and any(
        now - alive["age_seconds"] >= worker["since"] - 0.2 for alive in checks["workers"]["alive"]
    )


def _checks() -> dict[str, dict[str, Any]]:
    checks: dict[str, dict[str, Any]] = {}
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
    return checks
