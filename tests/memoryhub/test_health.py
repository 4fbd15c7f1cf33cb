"""Liveness and readiness: what a load balancer and docker-compose healthchecks see."""

import uuid

import pytest
from django.test import Client

from memories.services import workers
from memories.services.workers import worker_heartbeat


@pytest.fixture
def heartbeats(monkeypatch):
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
    assert body["checks"]["workers"] == {"ok": False, "alive": []}


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


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_ready_is_200_with_a_real_worker_running(celery_worker_process):
    response = Client().get("/ready/")
    assert response.status_code == 200, response.json()
    hostnames = [w["hostname"] for w in response.json()["checks"]["workers"]["alive"]]
    assert any(name.startswith("test-") for name in hostnames)
