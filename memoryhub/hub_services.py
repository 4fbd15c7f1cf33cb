"""What `manage.py hub` supervises: its child processes (web, the worker pools, beat),
the embedded PostgreSQL and Redis, and the checks that say whether they answer."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from memories.providers.redis_client import redis_client
from memoryhub import embedded
from memoryhub.supervisor import exit_description

LOG_ROTATE_BYTES = 50 * 1024 * 1024

OUTPUT_LOCK = threading.Lock()  # whole lines from the hub and its children, never mixed
# looked up before any fork: between fork and exec only a plain C call runs
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:
    """In a child, before exec: SIGTERM when the hub dies, so no process is orphaned
    (the hub's main thread must start it: the signal follows the forking thread)."""
    if _prctl is not None:
        _prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ChildProcess:
    """A command run in its own process group (its pool or gunicorn workers with it, so
    what a killed main process leaves behind is killed before it starts again). Its
    output is appended to ``log_path`` and echoed to ``echo`` with its name in front."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        env: dict[str, str],
        cwd: Path,
        log_path: Path,
        needs: tuple[str, ...] = (),
        echo: IO[bytes] | None = None,
        stop_timeout: float = 20.0,
    ) -> None:
        self.name, self.command, self.env, self.cwd = name, list(command), env, cwd
        self.log_path, self.needs, self.echo = log_path, needs, echo
        self.stop_timeout = stop_timeout
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._group_kill()  # leftovers of the previous run hold its port or its tasks
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.log_path.exists() and self.log_path.stat().st_size > LOG_ROTATE_BYTES:
            self.log_path.replace(self.log_path.with_suffix(".log.1"))
        self.process = subprocess.Popen(
            self.command,
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches the hub only, which stops us in order
            preexec_fn=_die_with_parent,
        )
        threading.Thread(target=self._copy_output, args=(self.process.stdout,), daemon=True).start()

    def _copy_output(self, pipe: IO[bytes]) -> None:
        prefix = f"{self.name:<6}| ".encode()
        with open(self.log_path, "ab") as log:
            for line in pipe:
                log.write(line)
                log.flush()
                if self.echo is not None:
                    with OUTPUT_LOCK, contextlib.suppress(OSError, ValueError):
                        self.echo.write(prefix + line)
                        self.echo.flush()

    def ended(self) -> str | None:
        if self.process is None:
            return "never started"
        code = self.process.poll()
        return None if code is None else exit_description(code)

    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)

    def wait(self, timeout: float) -> None:
        """Wait for it to exit; kill its whole group after ``timeout`` seconds."""
        if self.process is None:
            return
        try:
            self.process.wait(timeout=max(0.1, timeout))
        except subprocess.TimeoutExpired:
            self._group_kill()
            self.process.wait()
        self._group_kill()

    def stop_begin(self) -> None:
        self.signal(signal.SIGTERM)  # gunicorn and Celery finish what they are doing

    def stop(self) -> None:
        self.wait(self.stop_timeout)

    def _group_kill(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)


# --- the worker pools ------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerPool:
    """A Celery worker process of its own for some queues, with its own concurrency.

    ``name`` is the hub's service (its log: logs/<name>.log) and ``hostname`` the
    worker's: /ready/ (memoryhub/health.py) knows a service's heartbeats by the hostname
    starting with the service's name after "worker-" ("worker-embed": "embed@...").
    docker-compose.yml runs the same pools under the same hostnames."""

    name: str
    hostname: str
    queues: tuple[str, ...]  # empty: every queue (settings.CELERY_TASK_QUEUES)
    concurrency: int

    def command(self, celery: Sequence[str]) -> list[str]:
        """The worker's command line after ``celery`` (python -m celery -A memoryhub)."""
        return [
            *celery,
            "worker",
            *("--loglevel", "INFO", "--concurrency", str(self.concurrency)),
            *("--hostname", self.hostname),
            *(("--queues", ",".join(self.queues)) if self.queues else ()),
        ]


def worker_pools(*, embed: int, derived: int, single: int | None = None) -> list[WorkerPool]:
    """The pools `manage.py hub` runs: embedding (`default`: the embedding runs and the
    backfill, the short core tasks) in a process of its own, so that no backlog of
    derived memory or documents and no long maintenance run ever stands in front of a
    write's embedding; the derived memory, documents and maintenance in another. With
    ``single``, one worker on every queue with that concurrency (the layout before
    issue 45: one model in memory instead of two)."""
    if single is not None:
        return [WorkerPool("worker", "worker@%h", (), single)]
    return [
        WorkerPool("worker-embed", "embed@%h", ("default",), embed),
        WorkerPool(
            "worker-derived", "derived@%h", ("derived", "ingestion", "maintenance"), derived
        ),
    ]


# --- the embedded servers ---------------------------------------------------------------


class EmbeddedPostgresService:
    """The embedded PostgreSQL, watched through its postmaster.pid. It is stopped by
    pgserver when the hub exits (the last process attached to it), not here."""

    name = "postgres"
    needs: tuple[str, ...] = ()

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.log_path = folder / "pg" / "log"
        self.known_pid = embedded.postgres_pid(folder)

    def start(self) -> None:
        self.known_pid = embedded.postgres_restart(self.folder)

    def ended(self) -> str | None:
        pid = embedded.postgres_pid(self.folder)
        if pid is None:
            return f"stopped (postmaster pid {self.known_pid} no longer runs)"
        if pid != self.known_pid:  # restarted by someone else: the one to stop at exit now
            self.known_pid = embedded.postgres_restart(self.folder)
        return None

    def pid(self) -> int | None:
        return self.known_pid

    def stop_begin(self) -> None:
        pass

    def stop(self) -> None:
        pass


class EmbeddedRedisService:
    """The embedded Redis (a child of the hub unless the hub attached to a running one)."""

    name = "redis"
    needs: tuple[str, ...] = ()

    def __init__(self, folder: Path, server: embedded.EmbeddedRedis) -> None:
        self.folder, self.server = folder, server
        self.log_path = folder / "redis" / "redis.log"

    def start(self) -> None:
        self.server = embedded.redis_start(self.folder)

    def ended(self) -> str | None:
        process = self.server.process
        if process is not None and process.poll() is not None:
            return exit_description(process.returncode)
        if self.server.running_pid() is None:
            return "stopped (its process no longer runs)"
        return None

    def pid(self) -> int | None:
        return self.server.running_pid()

    def stop_begin(self) -> None:
        pass  # after the processes that use it

    def stop(self) -> None:
        self.server.stop()


# --- checks -----------------------------------------------------------------------------


def database_check(conninfo: str) -> Callable[[], None]:
    """A check that PostgreSQL answers SELECT 1, on one kept connection."""
    import psycopg

    kept: list[psycopg.Connection[Any]] = []

    def check() -> None:
        try:
            if not kept:
                kept.append(psycopg.connect(conninfo, autocommit=True, connect_timeout=2))
            kept[0].execute("SELECT 1")
        except Exception:
            if kept:
                with contextlib.suppress(Exception):
                    kept.pop().close()
            raise

    return check


def redis_check(url: str) -> Callable[[], None]:
    """A check that Redis answers PING."""
    client = redis_client(url=url, pausing=False, timeout=0.5)

    def check() -> None:
        client.ping()

    return check
