"""Liveness and readiness: what a load balancer and docker-compose healthchecks see."""

import time
import uuid

import pytest
from django.test import Client

from memories.services import workers
from memories.services.workers import worker_heartbeat
from tests.memoryhub.test_supervisor import hub_state_write


@pytest.fixture
def heartbeats(monkeypatch, queues_empty):
    """A heartbeat namespace of this test's own, so a worker another test started (or
    the one a developer runs on this Redis) cannot make /ready/ pass."""
    monkeypatch.setattr(workers, "HEARTBEAT_PREFIX", f"memoryhub:test-worker-{uuid.uuid4().hex}:")


def test_health_answers_without_a_key(db):
    response = Client().get("/health/")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_ready_is_503_without_a_live_worker(db, heartbeats):
    response = Client().get("/ready/")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["redis"]["ok"] is True
    assert body["checks"]["workers"] == {"ok": False, "alive": [], "lost": []}


def test_ready_is_200_with_a_worker_heartbeat(db, heartbeats):
    worker_heartbeat(hostname="w1@box", info={"pid": 42})
    response = Client().get("/ready/")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    [alive] = body["checks"]["workers"]["alive"]
    assert alive["hostname"] == "w1@box"
    assert alive["pid"] == 42
    assert alive["age_seconds"] >= 0


def test_ready_is_503_naming_redis_when_it_is_down(db, settings, tmp_path):
    redis_url = settings.REDIS_URL
    settings.REDIS_URL = f"unix://{tmp_path}/no-redis-here.sock"
    try:
        response = Client().get("/ready/")
    finally:
        settings.REDIS_URL = redis_url
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"]["ok"] is True
    assert checks["redis"]["ok"] is False
    assert "no-redis-here.sock" in checks["redis"]["error"]
    assert checks["workers"]["ok"] is False
    assert response.json()["health"] == "unknown"  # what workers run: not known without Redis


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_ready_is_200_with_a_real_worker_running(celery_worker_process):
    response = Client().get("/ready/")
    assert response.status_code == 200, response.json()
    hostnames = [w["hostname"] for w in response.json()["checks"]["workers"]["alive"]]
    assert any(name.startswith("test-") for name in hostnames)


def test_ready_says_what_each_worker_runs_and_stays_200_when_it_is_late(db, heartbeats):
    task = "synopsis.tasks.facts_extract_task"
    started = time.time() - 95
    stuck = {"task": task, "id": "t1", "input": "[42]", "started_at": started, "soft_limit": 60}
    worker_heartbeat(hostname="derived@box", info={"queues": ["derived"], "running": [stuck]})
    response = Client().get("/ready/")
    assert response.status_code == 200  # a late task is detail: the web still serves
    body = response.json()
    assert (body["status"], body["workers"], body["health"]) == ("ok", "ok", "red")
    [worker] = body["checks"]["workers"]["alive"]
    [running] = worker["running"]
    assert running["task"] == task and running["seconds"] >= 95 and running["status"] == "red"
    assert "input" not in running  # /ready/ is public: no task's input
    reason = f"derived@box runs {task} for 95 s, past its 60 s soft limit"
    assert reason in body["reasons"]
    # no live worker takes the default queue (embedding): red, and said
    assert body["checks"]["queues"]["default"]["status"] == "red"
    assert "queue default: no live worker takes it" in body["reasons"]


def test_ready_needs_a_heartbeat_from_each_worker_pool_the_hub_runs(
    db, heartbeats, settings, tmp_path
):
    settings.DATA_DIR = tmp_path  # the hub's state file: this test's own
    since = time.time() - 1
    pools = {"worker-embed": {"since": since}, "worker-derived": {"since": since}}
    hub_state_write(tmp_path, **pools)
    worker_heartbeat(hostname="embed@box", info={"queues": ["default"]})
    response = Client().get("/ready/")
    assert response.status_code == 503
    body = response.json()
    assert body["workers"] == "down" and body["checks"]["workers"]["service"] == "worker-derived"
    worker_heartbeat(hostname="derived@box", info={"queues": ["derived", "ingestion"]})
    response = Client().get("/ready/")
    assert response.status_code == 200, response.json()
    assert response.json()["services"] == {"worker-embed": "up", "worker-derived": "up"}
