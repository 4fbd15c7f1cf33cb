"""Poison inputs are parked, never run in a loop: a task that failed, timed out or killed
its worker PARKING_ATTEMPTS times on one input is recorded (memories/task_guard.py,
services/parking.py), later deliveries of it are acknowledged without running, the sweeps
leave it out, and an operator's retry sends it again."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
import redis
from celery import current_app
from celery.exceptions import Retry, SoftTimeLimitExceeded

from memories.models import Memory, ParkedTask, Room
from memories.services import parking
from memories.services.parking import (
    parked_input_ids,
    parked_task_retry,
    parked_tasks_summary,
)
from memories.services.task_attempts import PREFIX, attempt_begin, attempts_key
from memories.task_guard import Interruption, LimitedTask, TaskInput
from synopsis.services.summaries import ROOM_SUMMARIZE_TASK
from synopsis.tasks import room_summarize_sweep_task
from tests.conftest import wait_until
from tests.memories.tasks.workers import pool_pid, worker_running
from tests.synopsis.llm_server import LlmServer
from tests.synopsis.tasks.test_summaries_crash import room_over_capacity

QUEUE = "parking-test"


@pytest.fixture(autouse=True)
def attempts_forgotten(redis_client: redis.Redis) -> Iterator[None]:
    for key in redis_client.scan_iter(f"{PREFIX}*"):
        redis_client.delete(key)
    yield


class Flaky(LimitedTask):
    """A task on rooms whose run does what the test says."""

    name = "tests.flaky_room_task"
    task_input = TaskInput(kind="room", project=parking.project_of_room)
    behaviour: BaseException | None = None
    runs = 0
    seen: list[Interruption] = []

    def run(self, room_id: int) -> str:
        type(self).runs += 1
        if self.behaviour is not None:
            raise self.behaviour
        return "done"


@pytest.fixture
def flaky() -> Iterator[Flaky]:
    Flaky.runs, Flaky.behaviour, Flaky.seen = 0, None, []
    Flaky.task_input = TaskInput(
        kind="room", project=parking.project_of_room, interrupted=Flaky.seen.append
    )
    task = Flaky()
    task.bind(current_app)
    yield task


def deliver(task: Flaky, *args: object, task_id: str = "t1") -> object:
    """One delivery as a worker runs it (a request with an id, not eager)."""
    task.push_request(id=task_id, args=list(args), called_directly=False, is_eager=False)
    try:
        return task(*args)
    finally:
        task.pop_request()


@pytest.fixture
def room(owner) -> Room:
    return Room.objects.create(project=owner.project, external_id="r1")


def test_an_input_that_fails_n_times_is_parked_and_not_run_again(flaky, room, settings) -> None:
    settings.PARKING_ATTEMPTS = 3
    flaky.behaviour = ValueError("bad text")
    for _ in range(3):
        with pytest.raises(ValueError):
            deliver(flaky, room.pk)
    parked = ParkedTask.objects.get()
    assert (parked.task, parked.input_kind, parked.input_ids, parked.input_key) == (
        "tests.flaky_room_task",
        "room",
        [str(room.pk)],
        f"room:{room.pk}",
    )
    assert (parked.reason, parked.attempts, parked.status) == ("failed", 3, "parked")
    assert parked.last_error == "ValueError: bad text"
    assert parked.project == room.project and parked.args == [room.pk]
    assert [i.final for i in flaky.seen] == [False, False, True]
    assert deliver(flaky, room.pk) is None  # acknowledged, not run
    assert flaky.runs == 3
    assert parked_input_ids(task="tests.flaky_room_task", input_kind="room") == {str(room.pk)}


def test_a_success_or_a_retry_forgets_the_failures(flaky, room, settings) -> None:
    settings.PARKING_ATTEMPTS = 2
    flaky.behaviour = ValueError("once")
    with pytest.raises(ValueError):
        deliver(flaky, room.pk)
    flaky.behaviour = None
    assert deliver(flaky, room.pk) == "done"
    flaky.behaviour = Retry("the LLM is down")  # a passing error, the task's own retries
    for _ in range(3):
        with pytest.raises(Retry):
            deliver(flaky, room.pk)
    flaky.behaviour = ValueError("again")
    with pytest.raises(ValueError):
        deliver(flaky, room.pk)
    assert not ParkedTask.objects.exists()  # one failure since the last success


def test_a_soft_time_limit_stops_the_task_cleanly_and_counts(flaky, room, settings) -> None:
    settings.PARKING_ATTEMPTS = 2
    flaky.behaviour = SoftTimeLimitExceeded()
    assert deliver(flaky, room.pk) is None  # no exception: the task stopped
    assert flaky.seen[0].reason == "time limit" and not flaky.seen[0].final
    assert deliver(flaky, room.pk) is None
    parked = ParkedTask.objects.get()
    assert (parked.reason, parked.attempts) == ("time limit", 2)
    assert parked.last_error.startswith("soft time limit")


def test_deliveries_whose_process_died_are_counted_and_parked(flaky, room, settings) -> None:
    settings.PARKING_ATTEMPTS = 3
    key = attempts_key(flaky.name, f"room:{room.pk}")
    for _ in range(3):
        attempt_begin(key=key)  # an attempt that began, and whose process died
    assert deliver(flaky, room.pk) is None  # the fourth delivery: parked, not run
    assert flaky.runs == 0
    parked = ParkedTask.objects.get()
    assert (parked.reason, parked.attempts) == ("worker lost", 3)
    assert flaky.seen[-1].reason == "worker lost" and flaky.seen[-1].final


def test_a_task_without_input_counts_the_deliveries_of_its_message(db, settings) -> None:
    settings.PARKING_ATTEMPTS = 1

    class Sweep(LimitedTask):
        name = "tests.sweep_task"

        def run(self) -> int:
            raise RuntimeError("broken")

    task = Sweep()
    task.bind(current_app)
    task.push_request(id="run-1", args=[], called_directly=False, is_eager=False)
    with pytest.raises(RuntimeError):
        task()
    task.pop_request()
    parked = ParkedTask.objects.get()
    assert (parked.input_kind, parked.input_key, parked.input_ids) == ("run", "run", [])
    task.push_request(id="run-2", args=[], called_directly=False, is_eager=False)
    with pytest.raises(RuntimeError):  # another run (the next beat's) still runs
        task()
    task.pop_request()
    assert ParkedTask.objects.get().attempts == 2  # the same row: one per task


def test_parking_again_reopens_the_row_and_the_summary_counts_per_project(
    flaky, room, outsider, settings, monkeypatch
) -> None:
    settings.PARKING_ATTEMPTS = 1
    monkeypatch.setattr(parking, "task_send", lambda name, **kw: None)
    flaky.behaviour = ValueError("bad")
    with pytest.raises(ValueError):
        deliver(flaky, room.pk)
    other = Room.objects.create(project=outsider.project, external_id="r2")
    with pytest.raises(ValueError):
        deliver(flaky, other.pk)
    row = ParkedTask.objects.get(project=room.project)
    assert parked_task_retry(parked=row, operator="alice")
    row.refresh_from_db()
    assert (row.status, row.retried_by) == ("retried", "alice")
    summary = parked_tasks_summary(project=room.project)
    assert (summary.parked, summary.retried) == (0, 1)
    with pytest.raises(ValueError):  # the retry failed again: the same row, reopened
        deliver(flaky, room.pk)
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("parked", 2)
    assert ParkedTask.objects.count() == 2
    everything = parked_tasks_summary()
    assert everything.parked == 2 and everything.by_task == {"tests.flaky_room_task": 2}
    assert everything.by_reason == {"failed": 2}
    assert parked_tasks_summary(project=outsider.project).parked == 1


def test_the_admin_lists_parked_tasks_and_its_retry_action_sends_them(
    admin_client, room, monkeypatch
) -> None:
    sent = []
    monkeypatch.setattr(parking, "task_send", lambda name, **kw: sent.append((name, kw)))
    row = ParkedTask.objects.create(
        task="synopsis.tasks.room_summarize_task",
        input_kind="room",
        input_ids=[str(room.pk)],
        input_key=f"room:{room.pk}",
        args=[room.pk],
        reason="worker lost",
        last_error="its process died",
        attempts=3,
        project=room.project,
    )
    page = admin_client.get("/admin/memories/parkedtask/")
    assert page.status_code == 200 and b"room_summarize_task" in page.content
    assert admin_client.get(f"/admin/memories/parkedtask/{row.pk}/change/").status_code == 200
    response = admin_client.post(
        "/admin/memories/parkedtask/",
        {"action": "retry", "_selected_action": [row.pk]},
    )
    assert response.status_code == 302
    assert sent == [("synopsis.tasks.room_summarize_task", {"args": [room.pk], "kwargs": {}})]
    row.refresh_from_db()
    assert row.status == "retried" and row.retried_by == "admin"


# --- a real worker, killed while it works --------------------------------------------------


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_task_that_kills_its_worker_n_times_is_parked_then_retried(
    owner, celery_worker_process
) -> None:
    room = room_over_capacity(owner)
    llm = LlmServer().start()
    try:
        for _ in range(4):
            llm.delay(120)  # each attempt waits on the LLM, and its process is killed
        env = {"LLM_BASE_URL": llm.base_url, "LLM_TIMEOUT": "120", "LLM_MAX_RETRIES": "0"}
        with worker_running(queues=[QUEUE, "derived"], env=env) as worker:
            current_app.send_task(ROOM_SUMMARIZE_TASK, args=[room.pk], queue=QUEUE)
            pid = None
            for attempt in range(1, 4):
                wait_until(lambda n=attempt: len(llm.requests) >= n, timeout=120)
                pid = pool_pid(worker, other_than=pid)
                os.kill(pid, signal.SIGKILL)  # redelivered: acks_late, reject_on_worker_lost
            parked = wait_until(
                lambda: ParkedTask.objects.filter(task=ROOM_SUMMARIZE_TASK).first(), timeout=120
            )
            assert (parked.input_kind, parked.input_ids, parked.reason, parked.attempts) == (
                "room",
                [str(room.pk)],
                "worker lost",
                3,
            )
            assert parked.project == owner.project
            assert len(llm.requests) == 3  # the fourth delivery did not run
            assert room_summarize_sweep_task() == 0  # the sweep leaves the room out
            assert not Memory.objects.filter(room=room, kind="summary").exists()

            llm.reset()  # answers at once from now on
            assert parked_task_retry(parked=parked, operator="alice")
            summary = wait_until(
                lambda: Memory.objects.filter(room=room, kind="summary").first(), timeout=90
            )
            assert summary.source_ids
    finally:
        llm.stop()
    # the worker embeds the summary next: let it finish before the tables are emptied
    wait_until(lambda: not Memory.objects.filter(embedding_status="pending").exists(), timeout=60)
