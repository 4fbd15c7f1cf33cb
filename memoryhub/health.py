"""Liveness and readiness for load balancers and the docker-compose healthchecks."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

from memories.services.worker_health import health_report
from memories.services.workers import worker_heartbeats
from memoryhub.supervisor import hub_state_read

logger = logging.getLogger(__name__)

# what /ready/'s status code answers for; the workers' and queues' health is detail
GATES = ("database", "redis", "workers")


def health(request: HttpRequest) -> JsonResponse:
    """The web process answers (nothing else is checked: it stays 200 in an outage)."""
    return JsonResponse({"status": "ok"})


def ready(request: HttpRequest) -> JsonResponse:
    """Database, Redis and at least one live worker; 503 naming what is missing.

    Under `manage.py hub` the supervisor's state file adds what it is restarting: the
    status is then "recovering" rather than "unavailable", a worker it is restarting
    is not ready whatever heartbeat it left in Redis, and "restarts" counts the
    restarts of each service since the hub started.

    The details say what each worker runs and for how long, and how long each queue's
    oldest task has waited, each ok/amber/red with the reason ("health", "reasons");
    they never change the status code (a slow queue is not a reason to stop sending
    requests to this web process), and carry no task's input (this page is public).
    """
    checks, judged = _checks()
    hub = hub_state_read(Path(settings.DATA_DIR))
    services: dict[str, dict[str, Any]] = hub["services"] if hub else {}
    unready = _worker_service_unready(services, checks["workers"].get("alive", []))
    if unready is not None and checks["workers"]["ok"]:
        name, state = unready
        checks["workers"] = {**checks["workers"], "ok": False, "state": state, "service": name}
    ok = all(checks[name]["ok"] for name in GATES)
    status = "ok" if ok else "recovering" if hub and hub["status"] == "running" else "unavailable"
    body: dict[str, Any] = {
        "status": status,
        **{name: "ok" if checks[name]["ok"] else "down" for name in GATES},
        "health": judged["status"],
        "reasons": judged["reasons"],
        "checks": checks,
    }
    if hub:
        body["services"] = {name: service["state"] for name, service in services.items()}
        body["restarts"] = {name: service["restarts"] for name, service in services.items()}
    return JsonResponse(body, status=200 if ok else 503)


def _worker_service_unready(
    services: dict[str, dict[str, Any]], alive: list[dict[str, Any]]
) -> tuple[str, str] | None:
    """(name, state) of the first worker service the hub runs ("worker", "worker-embed",
    ...) that is not up with a heartbeat of its own, or None.

    A service's own heartbeats are those whose hostname starts with its name after
    "worker-" ("worker-embed": "embed@..."; "worker": "worker@..."); when no heartbeat
    is named after any of them (hostnames set otherwise), any heartbeat counts."""
    workers = {name: s for name, s in sorted(services.items()) if name.startswith("worker")}
    prefixes = {name: f"{name.removeprefix('worker-')}@" for name in workers}
    named = any(w["hostname"].startswith(tuple(prefixes.values())) for w in alive)
    for name, service in workers.items():
        own = [w for w in alive if w["hostname"].startswith(prefixes[name])] if named else alive
        if not _worker_fresh(service, own):
            return name, str(service["state"])
    return None


def _worker_fresh(service: dict[str, Any], alive: list[dict[str, Any]]) -> bool:
    """The worker the hub runs now has sent a heartbeat: one its killed predecessor
    left (same hostname, alive for 30 s in Redis) is older than its start."""
    now = time.time()
    return service["state"] == "up" and any(
        now - heartbeat["age_seconds"] >= service["since"] - 0.2 for heartbeat in alive
    )


def _checks() -> tuple[dict[str, Any], dict[str, Any]]:
    """The checks by name (database, redis, workers, queues), and the workers' and
    queues' health: its status ("unknown" without Redis) and reasons."""
    checks: dict[str, Any] = {}
    judged: dict[str, Any] = {"status": "unknown", "reasons": []}
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 2)}
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        checks["database"] = {"ok": False, "error": str(exc)}
    try:
        alive = worker_heartbeats()
    except Exception as exc:  # noqa: BLE001
        checks["redis"] = {"ok": False, "error": str(exc)}
        checks["workers"] = {"ok": False, "error": "Redis unreachable"}
        return checks, judged
    checks["redis"] = {"ok": True}
    checks["workers"] = {"ok": bool(alive), "alive": alive}
    try:
        report = health_report(alive=alive).as_dict(inputs=False)
    except Exception as exc:  # noqa: BLE001 - the details are missing, readiness stands
        logger.warning("/ready/: no worker health: %s", exc)
        error = str(exc) or type(exc).__name__
        return checks, {**judged, "reasons": [f"workers' and queues' health unknown: {error}"]}
    checks["workers"] = {"ok": bool(alive), "alive": report["workers"], "lost": report["lost"]}
    checks["queues"] = report["queues"]
    return checks, {"status": report["status"], "reasons": report["reasons"]}
