"""Real Celery workers for the time-limit and parking tests: started on the test database
and Redis with an environment of their own (limits, an LLM stand-in), on a queue only
they take, in a session of their own (killed whole at the end)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil
from django.conf import settings

from tests.conftest import BASE_DIR, _database_url, wait_until


@contextmanager
def worker_running(*, queues: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A `celery worker` (concurrency 1) taking ``queues``, with ``env`` over ours."""
    name = f"limits-{uuid.uuid4().hex[:8]}"
    log = open(Path(settings.DATA_DIR) / f"test-{name}.log", "wb")  # noqa: SIM115
    command = [sys.executable, "-m", "celery", "-A", "memoryhub", "worker"]
    command += ["-Q", ",".join(queues), "--concurrency", "1", "--loglevel", "INFO"]
    command += ["--hostname", f"{name}@%h", "--without-mingle", "--without-gossip"]
    process = subprocess.Popen(
        command,
        env={**os.environ, "DATABASE_URL": _database_url(), "REDIS_URL": settings.REDIS_URL, **env},
        cwd=BASE_DIR,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        log.close()


def pool_pid(worker: subprocess.Popen[bytes], *, other_than: int | None = None) -> int:
    """The pid of the worker's pool process (waits for one, or for a new one)."""

    def found() -> int | None:
        children = [p.pid for p in psutil.Process(worker.pid).children() if p.pid != other_than]
        return children[0] if children else None

    return int(wait_until(found, timeout=120))
