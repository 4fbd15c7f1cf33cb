"""Prometheus metrics: /metrics scraped after real traffic through the API (writes,
searches, contexts, a rate-limit refusal, the embedding run), its series move; a real
Celery worker serves its tasks' durations and failures on METRICS_WORKER_PORT; the
endpoint is off without configuration and refuses a wrong token or address."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from kombu import Queue
from prometheus_client.parser import text_string_to_metric_families

from memories.api.throttling import ApiKeyRateThrottle
from memoryhub.celery import app
from tests.conftest import BASE_DIR, _database_url, embed_pending, wait_until
from tests.memoryhub import replica_fixtures
from tests.memoryhub.replica_fixtures import ALIAS, on_replica, query

# the real streaming replica's fixtures (tests/memoryhub/replica_fixtures.py)
standby = replica_fixtures.standby
replica_database = replica_fixtures.replica_database
replica = replica_fixtures.replica

TOKEN = "scrape-token-for-tests"
SEARCH, CONTEXT = "api/v1/search/", "api/v1/context/"
PURGE = "memories.tasks.idempotency_keys_purge_task"  # reads and writes nothing of a test's


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_IPS = []
    ApiKeyRateThrottle.paused_until = 0.0


def parse(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by (name, sorted labels)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return parse(response.content.decode())


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples, name: str, **labels: str) -> float:
    """The sum over the samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))


def test_off_without_a_token_or_addresses(db, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_IPS = "", []
    assert Client().get("/metrics").status_code == 404
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer anything").status_code == 404


def test_a_wrong_token_or_address_is_refused(db, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_IPS = TOKEN, []
    assert Client().get("/metrics").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_IPS = "", ["10.0.0.0/8", "::1"]
    assert Client().get("/metrics").status_code == 403  # the test client is 127.0.0.1
    assert Client(REMOTE_ADDR="10.2.3.4").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="not an address").get("/metrics").status_code == 403


def _traffic(owner) -> None:
    body = {"memories": [{"user": "maria", "content": f"maria likes tea number {n}"}
                         for n in range(5)]}  # fmt: skip
    assert owner.client.post("/api/v1/memories/batch/", body, format="json").status_code == 201
    for _ in range(3):
        found = owner.client.post("/" + SEARCH, {"query": "tea", "mode": "hybrid"})
        assert found.status_code == 200, found.json()
    context = owner.client.post("/" + CONTEXT, {"user": "maria", "query": "tea"}, format="json")
    assert context.status_code == 200, context.json()
    assert owner.client.get("/api/v1/memories/").status_code == 200


def test_series_move_after_real_traffic(owner, metrics_on, queues_empty):
    before = scrape()

    _traffic(owner)
    during = scrape()
    owner.project.settings = {"limits": {"reads_per_minute": 1}}
    owner.project.save(update_fields=["settings"])
    assert owner.client.get("/api/v1/memories/").status_code == 429
    embedded = embed_pending()
    after = scrape()

    requests = "memoryhub_http_request_duration_seconds_count"
    assert (
        total(after, requests, route=SEARCH, status="2xx")
        - total(before, requests, route=SEARCH, status="2xx")
        == 3
    )
    assert total(after, requests, route=CONTEXT, method="POST") > total(
        before, requests, route=CONTEXT, method="POST"
    )
    # the search's own steps and the context's, from their answers' timings_ms
    steps = "memoryhub_search_step_seconds_count"
    search_steps = {dict(ls)["step"] for (n, ls), v in after.items()
                    if n == steps and dict(ls)["route"] == SEARCH and v > 0}  # fmt: skip
    assert "total" in search_steps and len(search_steps) >= 3, search_steps
    assert total(after, steps, route=CONTEXT) > total(before, steps, route=CONTEXT)
    # the refusal
    refused = "memoryhub_rate_limited_total"
    assert total(after, refused) - total(before, refused) == 1
    # the backlog: five memories waited, then the run embedded them
    assert value(during, "memoryhub_embedding_backlog") >= 5
    assert embedded >= 5
    assert value(after, "memoryhub_embedding_backlog") == 0
    assert value(after, "memoryhub_time_to_embedded_memories") >= 5
    assert value(after, "memoryhub_time_to_embedded_seconds", quantile="0.5") > 0
    # the database's connections; every source answered
    assert total(after, "memoryhub_database_connections") >= 1
    assert value(after, "memoryhub_database_max_connections") > 0
    for source in ("queues", "embedding", "database", "replicas"):
        assert value(after, "memoryhub_metrics_source_up", source=source) == 1, source


def test_queue_depth_and_oldest_task_age_per_queue(db, metrics_on, settings, redis_client):
    """A queue of the test's own among the declared ones: no worker takes it."""
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    settings.CELERY_TASK_QUEUES = (*settings.CELERY_TASK_QUEUES, Queue(queue))
    try:
        empty = scrape()
        assert value(empty, "memoryhub_queue_length", queue=queue) == 0
        assert value(empty, "memoryhub_queue_oldest_task_age_seconds", queue=queue) == 0
        for _ in range(3):
            app.send_task(PURGE, queue=queue)

        def waited():
            samples = scrape()
            age = value(samples, "memoryhub_queue_oldest_task_age_seconds", queue=queue)
            return samples if age >= 1.0 else None

        samples = wait_until(waited, timeout=10, interval=0.25)
        assert value(samples, "memoryhub_queue_length", queue=queue) == 3
        assert value(samples, "memoryhub_queue_consumers", queue=queue) == 0
    finally:
        redis_client.delete(queue)


@on_replica
def test_replica_lag_from_a_real_streaming_replica(replica, owner, metrics_on):
    caught = scrape()
    assert value(caught, "memoryhub_replica_up", replica=ALIAS) == 1
    assert value(caught, "memoryhub_replica_lag_seconds", replica=ALIAS) < 1.0

    query(replica.socket_dir, "SELECT pg_wal_replay_pause()")
    body = {"user": "alice", "content": "written while the replica waits"}
    assert owner.client.post("/api/v1/memories/", body).status_code == 201
    time.sleep(1.5)
    late = scrape()
    assert value(late, "memoryhub_replica_lag_seconds", replica=ALIAS) > 1.0

    replica.stop("fast")
    stopped = scrape()  # answers, the replica down and no lag series
    assert value(stopped, "memoryhub_replica_up", replica=ALIAS) == 0
    assert ("memoryhub_replica_lag_seconds", (("replica", ALIAS),)) not in stopped
    assert value(stopped, "memoryhub_metrics_source_up", source="replicas") == 1


# --- a worker's own port ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _worker_scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return parse(response.read().decode())


@pytest.mark.worker
@pytest.mark.slow
def test_a_worker_serves_its_tasks_durations_and_failures(db, tmp_path):
    """A worker process with METRICS_WORKER_PORT, on a queue of its own: a task that
    ran in its pool process and one that failed there are counted on its port."""
    port, queue = _free_port(), f"metrics-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DATABASE_URL": _database_url(), "REDIS_URL": settings.REDIS_URL,
           "METRICS_WORKER_PORT": str(port)}  # fmt: skip
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log_path = Path(tmp_path) / "worker.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "memoryhub", "worker", "--concurrency", "1",
             "--queues", queue, "--hostname", f"{queue}@%h", "--without-mingle",
             "--without-gossip", "--loglevel", "INFO"],
            env=env, cwd=BASE_DIR, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_until(lambda: _answers(port) or process.poll() is not None, timeout=90)
        assert process.poll() is None, log_path.read_text()[-3000:]
        app.send_task(PURGE, queue=queue)
        app.send_task(PURGE, args=["an argument it does not take"], queue=queue)

        def counted():
            samples = _worker_scrape(port)
            ran = "memoryhub_task_duration_seconds_count"
            done = value(samples, ran, task=PURGE, state="SUCCESS")
            failed = value(samples, ran, task=PURGE, state="FAILURE")
            return samples if done == 1 and failed == 1 else None

        samples = wait_until(counted, timeout=60, interval=0.5)
        failures = "memoryhub_task_failures_total"
        assert value(samples, failures, task=PURGE, exception="TypeError") == 1
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def _answers(port: int) -> bool:
    try:
        _worker_scrape(port)
    except OSError:
        return False
    return True


# --- several web processes on one machine -----------------------------------------------


@pytest.mark.slow
def test_gunicorn_workers_add_up_their_counters(db, tmp_path):
    """Two gunicorn workers sharing PROMETHEUS_MULTIPROC_DIR: whichever one answers the
    scrape counts the requests both served."""
    port, folder = _free_port(), Path(tmp_path) / "prometheus"
    folder.mkdir()
    env = {**os.environ, "DATABASE_URL": _database_url(), "REDIS_URL": settings.REDIS_URL,
           "PROMETHEUS_MULTIPROC_DIR": str(folder), "METRICS_TOKEN": TOKEN,
           "EMBEDDING_WARM_UP": "0"}  # fmt: skip
    log_path = Path(tmp_path) / "web.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "memoryhub.wsgi", "--workers", "2",
             "--bind", f"127.0.0.1:{port}"],
            env=env, cwd=BASE_DIR, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _get(f"{base}/health/") or process.poll() is not None, timeout=90)
        assert process.poll() is None, log_path.read_text()[-3000:]
        requests = "memoryhub_http_request_duration_seconds_count"
        before = total(_scrape_http(base), requests, route="health/")
        with ThreadPoolExecutor(8) as pool:  # both workers busy: each takes some
            assert all(pool.map(lambda _: _get(f"{base}/health/"), range(60)))
        counts = {total(_scrape_http(base), requests, route="health/") for _ in range(6)}
        # whichever worker answered counted both workers' requests (a process of another
        # test probing /health/ on a port it thought free may add one)
        assert min(counts) >= before + 60 and max(counts) <= before + 63, (before, counts)
        assert len(list(folder.glob("histogram_*.db"))) >= 2
    finally:
        process.terminate()
        process.wait(timeout=20)


def _scrape_http(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    request = urllib.request.Request(
        f"{base}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return parse(response.read().decode())


def _get(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return bool(response.status == 200)
    except OSError:
        return False
