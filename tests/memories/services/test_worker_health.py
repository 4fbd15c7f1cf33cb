"""Worker health: what each worker runs and for how long, how long each queue's oldest
task has waited, ok/amber/red with the reason; from heartbeats and the broker's lists,
and from a real worker whose task is held on a table lock."""

from __future__ import annotations

import io
import json
import time
import uuid

import pytest
import redis
from celery import current_app
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.test import Client
from kombu import Queue

from memories.models import IdempotencyKey
from memories.services import workers
from memories.services.projects import project_get_or_create
from memories.services.queues import SENT_AT_HEADER, queue_readings
from memories.services.worker_health import (
    duration_words,
    health_report,
    queue_age_limits_parse,
)
from memories.services.workers import (
    task_input_words,
    worker_heartbeat,
    worker_heartbeat_stop,
    worker_heartbeats,
)
from memories.tasks import idempotency_keys_purge_task
from tests.conftest import wait_until
from tests.console.operators import operator_client

EMBED = "memories.tasks.embedding_run_task"
PURGE = "memories.tasks.idempotency_keys_purge_task"


@pytest.fixture
def heartbeats(monkeypatch, queues_empty):
    """A heartbeat namespace of this test's own: no other worker is seen."""
    monkeypatch.setattr(workers, "HEARTBEAT_PREFIX", f"memoryhub:test-worker-{uuid.uuid4().hex}:")


@pytest.fixture
def broker() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


@pytest.fixture
def idle_queue(settings, broker):
    """A queue of this test's own, the only one the app declares; no worker takes it."""
    name = f"test-idle-{uuid.uuid4().hex[:8]}"
    settings.CELERY_TASK_QUEUES = (Queue(name),)
    settings.WORKER_QUEUE_AGE_LIMITS = {name: (60.0, 600.0)}
    yield name
    broker.delete(name)


def running(task: str, seconds: float, soft_limit: float | None = 60) -> dict[str, object]:
    started = time.time() - seconds
    return {"task": task, "id": "t1", "input": "", "started_at": started, "soft_limit": soft_limit}


# --- workers --------------------------------------------------------------------------


def test_a_task_is_amber_past_half_its_soft_limit_and_red_past_it(heartbeats, settings):
    worker_heartbeat(hostname="embed@box", info={"running": [running(EMBED, 20)]})
    assert health_report().workers[0].status == "ok"
    worker_heartbeat(hostname="embed@box", info={"running": [running(EMBED, 35)]})
    [worker] = health_report().workers
    assert (worker.status, worker.running[0].status) == ("amber", "amber")
    assert worker.reasons == [f"embed@box runs {EMBED} for 35 s, over 50% of its 60 s soft limit"]
    worker_heartbeat(hostname="embed@box", info={"running": [running(EMBED, 95)]})
    report = health_report()
    assert report.workers[0].status == "red"
    assert f"embed@box runs {EMBED} for 95 s, past its 60 s soft limit" in report.reasons
    beyond = {**running(EMBED, 100), "hard_limit": 90}
    worker_heartbeat(hostname="embed@box", info={"running": [beyond]})
    reason = f"embed@box runs {EMBED} for 100 s, past its 90 s hard limit: it was not stopped"
    assert health_report().reasons == [reason]
    settings.WORKER_TASK_AMBER_SHARE = 0.9
    worker_heartbeat(hostname="embed@box", info={"running": [running(EMBED, 35)]})
    assert health_report().workers[0].status == "ok"


def test_a_task_without_a_soft_limit_is_never_judged(heartbeats):
    worker_heartbeat(hostname="embed@box", info={"running": [running(EMBED, 9999, None)]})
    [worker] = health_report().workers
    assert worker.status == "ok" and worker.running[0].seconds >= 9999


def test_a_worker_that_stopped_beating_is_lost_and_red(heartbeats, broker):
    last = {"at": time.time() - 40, "running": [running(EMBED, 50)]}
    broker.hset(workers._last_key(), "derived@box", json.dumps(last))
    report = health_report()
    assert report.workers == [] and [w.hostname for w in report.lost] == ["derived@box"]
    assert report.lost[0].status == report.status == "red"
    assert report.reasons[0] == f"no heartbeat from derived@box for 40 s (it was running {EMBED})"


def test_a_worker_stopped_on_purpose_is_not_lost(heartbeats, broker):
    worker_heartbeat(hostname="derived@box")
    worker_heartbeat_stop(hostname="derived@box")
    assert [w["hostname"] for w in worker_heartbeats()] == ["derived@box"]  # until it expires
    last = json.loads(broker.hget(workers._last_key(), "derived@box"))
    broker.hset(workers._last_key(), "derived@box", json.dumps({**last, "at": time.time() - 40}))
    assert worker_heartbeats() == [] and health_report().lost == []


def test_a_worker_is_forgotten_after_a_while(heartbeats, broker):
    gone = json.dumps({"at": time.time() - workers.LOST_KEEP - 1})
    broker.hset(workers._last_key(), "old@box", gone)
    assert health_report().lost == [] and not broker.hexists(workers._last_key(), "old@box")


def test_a_tasks_input_shows_ids_never_text():
    ids = [str(uuid.UUID(int=n)) for n in range(5)]
    words = task_input_words([7, ids], {"parts": ["profile"], "force": True})
    assert words == f"7, [{ids[0]}, {ids[1]}, {ids[2]}, … 5 in all], parts=[profile], force=True"
    assert task_input_words(["I adopted a cat called Miso", {"a": 1}], {}) == "…, …"


def test_durations_are_words_precise_near_a_limit():
    words = [duration_words(s) for s in (4.4, 95, 150, 540, 720, 7500)]
    assert words == ["4 s", "95 s", "2 min 30 s", "9 min", "12 min", "2 h 5 min"]


# --- queues ---------------------------------------------------------------------------


def _age_oldest(broker: redis.Redis, queue: str, seconds: float) -> None:
    """Make the queue's oldest message look ``seconds`` old (its sent_at stamp)."""
    message = json.loads(broker.lindex(queue, -1))
    message["headers"][SENT_AT_HEADER] = time.time() - seconds
    broker.lset(queue, -1, json.dumps(message))


def test_a_sent_task_is_stamped_and_its_queue_ages_to_amber_then_red(
    heartbeats, idle_queue, broker
):
    worker_heartbeat(hostname="derived@box", info={"queues": [idle_queue]})
    before = time.time()
    current_app.send_task(PURGE, queue=idle_queue)
    [reading] = queue_readings()
    assert reading.length == 1 and before <= reading.oldest_sent_at <= time.time()
    [queue] = health_report().queues
    assert (queue.status, queue.consumers) == ("ok", ["derived@box"])
    _age_oldest(broker, idle_queue, 100)
    [queue] = health_report().queues
    assert queue.status == "amber" and 100 <= queue.oldest_seconds < 102
    assert queue.reasons == [
        f"queue {idle_queue}: oldest task waiting 100 s (amber over 60 s, red over 10 min)"
    ]
    _age_oldest(broker, idle_queue, 720)
    report = health_report()
    assert report.status == "red"
    assert report.reasons == [
        f"queue {idle_queue}: oldest task waiting 12 min (amber over 60 s, red over 10 min)"
    ]


def test_queue_limits_come_from_the_environment_form(heartbeats, idle_queue, settings, broker):
    worker_heartbeat(hostname="derived@box", info={"queues": [idle_queue]})
    current_app.send_task(PURGE, queue=idle_queue)
    _age_oldest(broker, idle_queue, 100)
    settings.WORKER_QUEUE_AGE_LIMITS = f"{idle_queue}=20/90, other=1/2"
    [queue] = health_report().queues
    assert (queue.status, queue.amber_seconds, queue.red_seconds) == ("red", 20.0, 90.0)
    assert queue_age_limits_parse("") == {}
    for wrong in ("derived=600", "derived=600/60", "=1/2", "derived=a/b"):
        with pytest.raises(ValueError, match="WORKER_QUEUE_AGE_LIMITS"):
            queue_age_limits_parse(wrong)


def test_a_queue_no_live_worker_takes_is_red(heartbeats, idle_queue):
    worker_heartbeat(hostname="embed@box", info={"queues": ["default"]})
    current_app.send_task(PURGE, queue=idle_queue)
    [queue] = health_report().queues
    assert queue.status == "red" and queue.consumers == []
    assert queue.reasons == [f"queue {idle_queue}: no live worker takes it, 1 waiting"]


def _taken(broker: redis.Redis, queue: str, *, eta: float, sent: float) -> str:
    """An unacknowledged message of ``queue`` as kombu's Redis transport keeps it."""
    tag = uuid.uuid4().hex
    eta_iso = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(eta))
    headers = {"id": tag, "task": PURGE, "eta": eta_iso, SENT_AT_HEADER: sent}
    broker.hset("unacked", tag, json.dumps([{"headers": headers, "body": ""}, "", queue]))
    broker.zadd("unacked_index", {tag: sent})
    return tag


def test_a_retry_waiting_for_its_countdown_is_scheduled_not_waiting(heartbeats, idle_queue, broker):
    worker_heartbeat(hostname="derived@box", info={"queues": [idle_queue]})
    now = time.time()
    tags = [_taken(broker, idle_queue, eta=now + 300, sent=now - 500)]
    try:
        [queue] = health_report().queues
        assert (queue.length, queue.scheduled, queue.oldest_seconds) == (0, 1, None)
        assert queue.status == "ok"
        # due 200 s ago and not running: it waits for a pool process (or a dead worker)
        tags.append(_taken(broker, idle_queue, eta=now - 200, sent=now - 500))
        [queue] = health_report().queues
        assert queue.scheduled == 1 and 200 <= queue.oldest_seconds < 203
        assert queue.status == "amber"
    finally:
        broker.hdel("unacked", *tags)
        broker.zrem("unacked_index", *tags)


# --- the command ------------------------------------------------------------------------


def test_the_command_prints_inputs_as_json_and_exits_by_status(heartbeats, idle_queue):
    stuck = {**running(EMBED, 35), "input": "[42]"}
    worker_heartbeat(hostname="embed@box", info={"queues": [idle_queue], "running": [stuck]})
    output = io.StringIO()
    call_command("workers", "--json", stdout=output)
    data = json.loads(output.getvalue())
    assert data["status"] == "amber" and data["checked_at"] > 0
    assert data["workers"][0]["running"][0]["input"] == "[42]"  # the shell is an operator's
    assert data["queues"][idle_queue]["consumers"] == ["embed@box"]
    output = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("workers", "--check", stdout=output)
    assert exited.value.code == 1  # amber (red: 2)
    assert f"AMBER runs {EMBED}[t1]([42]) for 35 s (soft limit 60 s)" in output.getvalue()


def test_the_command_says_when_redis_is_down(settings, tmp_path):
    settings.REDIS_URL = f"unix://{tmp_path}/no-redis-here.sock"
    with pytest.raises(CommandError, match="Redis unreachable"):
        call_command("workers", stdout=io.StringIO())
    with pytest.raises(SystemExit) as exited:
        call_command("workers", "--check", stdout=io.StringIO(), stderr=io.StringIO())
    assert exited.value.code == 3


# --- a real worker ----------------------------------------------------------------------


def _running_on_worker(task: str) -> dict[str, object] | None:
    for worker in worker_heartbeats():
        for item in worker.get("running", []):
            if item["task"] == task:
                return {**item, "hostname": worker["hostname"], "worker_pid": worker["pid"]}
    return None


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_held_task_shows_with_its_duration_everywhere(celery_worker_process, settings):
    settings.WORKER_TASK_AMBER_SHARE = 0.001  # amber after a second or so
    settings.WORKER_QUEUE_AGE_LIMITS = {"default": (1.0, 600.0)}
    project, _ = project_get_or_create(name="health")
    operator = operator_client("root", superuser=True)
    with transaction.atomic():
        with connection.cursor() as cursor:  # the purge's DELETE waits for this lock
            cursor.execute(f"LOCK TABLE {IdempotencyKey._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        current_app.send_task(PURGE)
        held = wait_until(lambda: _running_on_worker(PURGE), timeout=60)
        current_app.send_task(PURGE)  # waits behind it in the default queue
        time.sleep(2.5)
        ready = Client().get("/ready/")
        page = operator.get(f"/dashboard/p/{project.pk}/").content.decode()
        output = io.StringIO()
        call_command("workers", stdout=output)
    _assert_heartbeat(held)
    _assert_ready(ready, held)
    assert f"runs <code>{PURGE}</code> for <strong>" in page
    assert f"{held['hostname']} runs {PURGE} for " in page
    assert "queue default: oldest task waiting" in page
    limit = duration_words(float(held["soft_limit"]))  # type: ignore[arg-type]
    line = f"AMBER runs {PURGE}[{held['id']}]() for "
    assert any(row.strip().startswith(line) for row in output.getvalue().splitlines())
    assert f"(soft limit {limit})" in output.getvalue()
    # the lock released, both tasks run and the heartbeat says so within seconds
    wait_until(lambda: _running_on_worker(PURGE) is None, timeout=30)


def _assert_heartbeat(held: dict[str, object]) -> None:
    """A pool process runs it (not the main process), with the registry's soft limit."""
    task = idempotency_keys_purge_task
    assert held["soft_limit"] == (task.soft_time_limit or settings.CELERY_TASK_SOFT_TIME_LIMIT)
    assert held["queue"] == "default" and held["input"] == ""
    assert held["pid"] != held["worker_pid"]


def _assert_ready(response, held: dict[str, object]) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 200  # amber is detail: readiness stands
    body = response.json()
    [worker] = [w for w in body["checks"]["workers"]["alive"] if w["hostname"] == held["hostname"]]
    assert worker["queues"] == sorted(queue.name for queue in settings.CELERY_TASK_QUEUES)
    [task] = [t for t in worker["running"] if t["id"] == held["id"]]
    assert task["task"] == PURGE and task["seconds"] >= 2.5 and task["status"] == "amber"
    assert "input" not in task  # /ready/ is public: no task's input
    assert body["health"] != "ok"
    assert any(r.startswith(f"{held['hostname']} runs {PURGE} for ") for r in body["reasons"])
    queue = body["checks"]["queues"]["default"]
    assert queue["length"] >= 1 and queue["oldest_seconds"] >= 2 and queue["status"] == "amber"
