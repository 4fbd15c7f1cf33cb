"""One beat at a time (memoryhub/beat_lock.py): the lock in the test session's Redis,
then two real ``celery beat`` processes, of which only one sends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings

from memoryhub.beat_lock import (
    LOCK_KEY,
    beat_lock_acquire,
    lock_holder,
    lock_release,
    lock_take,
)
from tests.conftest import _database_url, wait_until

BASE_DIR = Path(settings.BASE_DIR)
SENT = "Sending due task"


@pytest.fixture
def lock_client(redis_server: object) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(LOCK_KEY)
    yield client
    client.delete(LOCK_KEY)


def test_a_second_holder_waits_until_the_first_releases(lock_client: redis.Redis) -> None:
    first = beat_lock_acquire(lock_client, seconds=30, timeout=0)
    assert first is not None
    assert lock_holder(lock_client) == first.token
    assert beat_lock_acquire(lock_client, seconds=30, poll=0.1, timeout=0.3) is None
    first.release()
    assert lock_holder(lock_client) is None
    second = beat_lock_acquire(lock_client, seconds=30, timeout=0)
    assert second is not None and second.token != first.token


def test_a_dead_holders_lock_expires_and_the_standby_takes_over(lock_client: redis.Redis) -> None:
    assert lock_take(lock_client, "dead-host:1:000000", 0.5)  # never renewed
    started = time.monotonic()
    standby = beat_lock_acquire(lock_client, seconds=30, poll=0.05, timeout=5)
    assert standby is not None
    assert 0.3 < time.monotonic() - started < 2


def test_a_holder_that_lost_its_lock_stops(lock_client: redis.Redis) -> None:
    stops: list[str] = []
    lock = beat_lock_acquire(lock_client, seconds=30, timeout=0, on_lost=lambda: stops.append("x"))
    assert lock is not None and lock.renew_once() and not stops
    lock_client.set(LOCK_KEY, "another-host:2:000000")  # it expired and another took it
    assert not lock.renew_once()
    assert stops == ["x"] and lock.stopped.is_set()
    lock.release()  # not ours any more: left to its holder
    assert lock_holder(lock_client) == "another-host:2:000000"
    assert not lock_release(lock_client, lock.token)


def test_a_lock_gone_with_a_redis_restart_is_taken_again(lock_client: redis.Redis) -> None:
    stops: list[str] = []
    lock = beat_lock_acquire(lock_client, seconds=30, timeout=0, on_lost=lambda: stops.append("x"))
    assert lock is not None
    lock_client.delete(LOCK_KEY)  # Redis restarted without it: nobody holds it
    assert lock.renew_once() and not stops
    assert lock_holder(lock_client) == lock.token
    assert 0 < lock_client.pttl(LOCK_KEY) <= 30_000


def test_redis_down_for_less_than_the_expiry_keeps_the_lock(lock_client: redis.Redis) -> None:
    stops: list[str] = []
    lock = beat_lock_acquire(lock_client, seconds=30, timeout=0, on_lost=lambda: stops.append("x"))
    assert lock is not None
    lock.client = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    assert lock.renew_once() and not stops  # within the expiry: still ours
    lock.renewed_at -= 31
    assert not lock.renew_once() and stops == ["x"]  # past it another may hold it: stop


# --- two real beats --------------------------------------------------------------------


def beat_start(tmp_path: Path, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    environment = {
        **{key: value for key, value in os.environ.items() if key != "PYTEST_VERSION"},
        "DATABASE_URL": _database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "MEMORYHUB_DATA_DIR": str(tmp_path / name),
        "BEAT_LOCK_SECONDS": "3",
        "EMBEDDING_BACKFILL_INTERVAL": "1",
    }
    log_path = tmp_path / f"{name}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "memoryhub", "beat", "--loglevel", "INFO",
             "--schedule", str(tmp_path / f"{name}.schedule")],
            env=environment, cwd=BASE_DIR, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return process, log_path


def sends(log_path: Path) -> int:
    return log_path.read_text(errors="replace").count(SENT)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_of_two_beats_one_sends_and_the_other_takes_over_when_it_dies(
    tmp_path: Path, lock_client: redis.Redis, queues_empty: None
) -> None:
    first, first_log = beat_start(tmp_path, "first")
    second = None
    try:
        wait_until(lambda: sends(first_log) > 0, timeout=90)
        second, second_log = beat_start(tmp_path, "second")
        wait_until(lambda: "waits as a standby" in second_log.read_text(), timeout=90)
        holder = lock_holder(lock_client)
        assert holder is not None and f":{first.pid}:" in holder
        sent_before = sends(first_log)
        time.sleep(3)
        assert sends(first_log) > sent_before  # the first goes on sending
        assert sends(second_log) == 0  # the standby sends nothing
        first.send_signal(signal.SIGKILL)  # dies without releasing: the lock expires
        first.wait(timeout=10)
        wait_until(lambda: sends(second_log) > 0, timeout=15)
        holder = lock_holder(lock_client)
        assert holder is not None and f":{second.pid}:" in holder
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=20)
    # a beat that stops cleanly releases its lock at once
    assert lock_holder(lock_client) is None
