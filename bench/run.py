#!/usr/bin/env python
"""MemoryHub benchmarks against the real stack: write latency, ingestion throughput,
search latency, a room's buffer, working memory and summaries, fact extraction, access
tracking, importance recompute and pruning, context-build latency, peak memory.

    make bench          # full: searches at 10,000, 100,000 and 1,000,000 memories
    make bench-quick    # quick: searches at 10,000 memories
    .venv/bin/python bench/run.py --quick --torch-threads 1 --wait-quiet 300
    .venv/bin/python bench/run.py --levels 30000 --search-n 10 --ingest 2000  # try-out
    .venv/bin/python bench/run.py --quick --ingest 300 --search-n 10 --only buffer,working
    .venv/bin/python bench/run.py --quick --ingest 300 --search-n 10 --only facts,importance
    .venv/bin/python bench/run.py --quick --ingest 300 --search-n 10 --only context
    .venv/bin/python bench/run.py --quick --ingest 300 --search-n 10 --only console
    .venv/bin/python bench/run.py --quick --only concurrency
    .venv/bin/python bench/run.py --quick --only concurrency,mem0_concurrency

On a quiet 2-core machine the full run takes about 15 minutes (the 1M bulk load ~5 of
them, most of it the HNSW index build; the bare model and ingestion ~4; searches and
recall at 1M ~3) and the quick one about 3; the room phases add about 1.5 minutes to
the quick run (most of it the summaries) and 2.5 to the full one (twice the messages);
the documents phase about 2 (a 200-page PDF, measured with 1.2 cores busy with other
work); the facts phase about 1 (full: 1.5), plus any wait for the worker to finish mining
the earlier phases' user messages (it mines them in the background meanwhile; the wait
is reported); access tracking, importance and pruning well under a minute at 10,000
memories, about 1 more at 100,000; the context phase well under a minute per level,
plus about 1 at the end of the full run (moving 90,000 memories to one user, VACUUM);
other work on the machine stretches them.

Starts its own hub (`manage.py hub --no-demo` on a free port) on a scratch data
folder (var/bench/, deleted at the start of each run, never the user's var/), makes
an API key with `manage.py create_api_key --project bench`, and measures over real
HTTP from one client thread on one persistent connection:

1. writes: single (POST /api/v1/memories/) and batches of 100 (…/batch/), p50/p95,
   while the Celery worker embeds them (the normal case) and with the worker's pool
   process paused (SIGSTOP: as if embedding ran on another machine);
2. ingestion: from the first write until 10,000 messages are all embedded by the
   worker (messages/s), beside the bare model's batch throughput on the same texts in
   this process with the worker's torch thread count, and the ratio; then documents
   (bench/ingestion_phase.py): a 200-page PDF uploaded to POST /api/v1/documents/ until
   every chunk is embedded (pages/s, chunks/s, the stages the document reports), beside
   the bare model on the same chunks; the document is deleted after;
3. search: p50/p95 per mode (auto, vector, keyword, hybrid), with and without a user
   filter, with the server's own timings (query embedding apart), at each level: 10,000
   memories (the ingested ones) and (full) 100,000 and 1,000,000, bulk-loaded straight
   into PostgreSQL by bench/bulk.py (pairs of real memories, the normalized sum of their
   real vectors; the run measures how close that is to the model's embedding of the
   joined text), with the HNSW and keyword indexes rebuilt after each load;
   right after each level's searches, concurrency (bench/concurrency_phase.py): 1, 4
   and 16 client threads on connections of their own, each doing 4 searches (auto, user
   filter) per single write for a fixed time: searches/s, search and write p50/p95;
   in the full run, mem0 beside it at the first level (bench/mem0_concurrency.py: the
   same workload in mem0's process on the same memories; its venv is built the first
   time, ~2 minutes; the phase adds ~4 more: the 10,000 memories added one per call);
4. HNSW recall@10 at each level: the hub's vector search (a raw query vector through
   the API) against an exact scan in SQL, with and without a user filter (bench/recall.py);
5. rooms (bench/buffer_phases.py), each in a room of its own: buffer search p50/p95 in
   a room of exactly 100 embedded messages (max_size 10 x buffer_multiplier 10, so none
   is summarized; there is no cache of room buffers) and the window's GET; working
   memory: 1,000 items, the first search (it embeds them all) apart from the steady-state
   p50/p95; summaries: 1,000 (full: 2,000) messages into a room of capacity 10, until the
   worker has summarized it down to 10 (the offline summarizer: the bench hub has no
   LLM_BASE_URL) and embedded everything: messages summarized per second from the
   first write to the last summary (database times), the summarizer's own seconds per
   summary and the summaries' token counts, beside the ingestion's embedding rate;
6. facts (bench/maintenance_phases.py), after the rooms: first until the user messages
   of the earlier phases are mined, then 1,000 (full: 2,000) LoCoMo turns written as
   user messages, until each has its FactExtraction row (the offline extractor: no
   LLM_BASE_URL): messages mined per second from the first write to the last extraction
   (database times), facts created by kind, the share of messages that yielded one,
   beside the bare offline extractor in this process;
7. at the maintenance level (full: 100,000 memories, right after its searches; quick:
   the ingested ones): search p50/p95 (auto, user filter) with access tracking on and
   off, in interleaved blocks; importance_recompute of the project, twice (right after
   the level was reached, then at once again: only moved scores are written), timed in a
   `manage.py shell` process apart from its start-up; pruning, last: `manage.py prune`
   dry and real with a FIFO cap per user and kind that selects about 10% (the policy
   reset afterwards; the pruned memories stay pruned, and the next level tops the active
   ones up again);
8. context (bench/context_phase.py), right after each level's searches: POST
   /api/v1/context/ (no room, max_tokens 2,000) for the user with the most memories
   (said, with how many it has), client p50/p95 and the server's timings_ms per stage;
   target p95 < 60 ms; at the end of the run, last since it moves memories between users,
   that user is given other users' active messages until it holds 10% of the project
   (100,000 of 1,000,000: bench/bulk.py spreads memories evenly over 100 users, ~10,000
   each) and the context is measured again;
9. console (bench/console_phase.py), last since it adds a user: a user of 10,000
   memories bulk-inserted, an editor logged in through the console's login form, then
   the user page, the memory list's last page and the live search fragment in each
   mode, client p50/p95 over 30 requests each; target p95 < 200 ms;
10. peak RSS of the web and worker processes.

Texts are LoCoMo dialogue turns and questions read from ../shared/data (never copied
here); see bench/corpus.py. Prints tables and writes bench/results/<date>-<mode>.json
(and latest-<mode>.json); bench/results/ is git-ignored: results belong to a machine.
Other processes on the machine skew the figures: the output says how much CPU they used.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402
import psycopg  # noqa: E402

from bench.buffer_phases import ROOM_PHASES, room_messages_planned, room_phases_run  # noqa: E402
from bench.client import Api  # noqa: E402
from bench.concurrency_phase import (  # noqa: E402
    CONCURRENCY_PHASES,
    concurrency_phase,
    concurrency_phases_run,
)
from bench.console_phase import CONSOLE_PHASES, console_phase, console_phases_run  # noqa: E402
from bench.context_phase import (  # noqa: E402
    CONTEXT_PHASES,
    context_concentrated_phase,
    context_phase,
    context_phases_run,
)
from bench.corpus import Corpus, corpus_load, distinct_texts  # noqa: E402
from bench.ingestion_phase import (  # noqa: E402
    DOCUMENT_PHASES,
    document_phase,
    document_phases_run,
)
from bench.maintenance_phases import (  # noqa: E402
    MAINTENANCE_PHASES,
    fact_messages_planned,
    facts_phase,
    level_phases_run,
    maintenance_level,
    maintenance_phases_run,
)
from bench.mem0_concurrency import (  # noqa: E402
    MEM0_CONCURRENCY_PHASES,
    mem0_concurrency_phase,
    mem0_concurrency_phases_run,
)
from bench.monitor import Monitor, quiet_wait  # noqa: E402
from bench.phases import PROJECT, Bench, Plan, sql_value  # noqa: E402
from bench.report import report_print  # noqa: E402
from bench.stack import (  # noqa: E402
    REPO,
    Hub,
    free_port,
    hub_env,
    scratch_reset,
)

# the phases a try-out (--only) can name
ONLY_PHASES = (
    DOCUMENT_PHASES
    + ROOM_PHASES
    + MAINTENANCE_PHASES
    + CONTEXT_PHASES
    + CONSOLE_PHASES
    + CONCURRENCY_PHASES
    + MEM0_CONCURRENCY_PHASES
)

PLANS = {
    "quick": Plan(
        warmup_writes=20, single_writes=200, batches=20, batch_size=100,
        ingest=10_000, ingest_batch=100, raw_texts=2_000, raw_sorted=False,
        search_n=50, search_warmup=5, levels=(), recall_n=30, summary_messages=1_000,
    ),
    "full": Plan(
        warmup_writes=50, single_writes=500, batches=50, batch_size=100,
        ingest=10_000, ingest_batch=100, raw_texts=10_000, raw_sorted=True,
        search_n=150, search_warmup=10, levels=(100_000, 1_000_000), recall_n=50,
        summary_messages=2_000, fact_messages=2_000, mem0=True,
    ),
}  # fmt: skip


# --- run ------------------------------------------------------------------------------


def machine_label(mode: str) -> dict[str, Any]:
    def git(*args: str) -> str:
        result = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return result.stdout.strip()

    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    models = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
    import sentence_transformers
    import torch

    return {
        "mode": mode,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "cpu": models[0] if models else platform.processor(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        # other sessions may share this machine: how busy was it just before we started?
        "cpu_busy_cores_before_start": round(
            psutil.cpu_percent(interval=3) / 100 * (os.cpu_count() or 1), 2
        ),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "sentence_transformers": sentence_transformers.__version__,
    }


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="fewer samples, one search level (~4 min)"
    )
    parser.add_argument(
        "--locomo", type=Path, default=REPO.parent / "shared/data/locomo-dev.json",
        help="the LoCoMo JSON file (default: ../shared/data/locomo-dev.json)",
    )  # fmt: skip
    parser.add_argument(
        "--data-dir", type=Path, default=REPO / "var/bench", help="scratch folder, deleted first"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench/results")
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument(
        "--web-threads", type=int, default=int(os.environ.get("WEB_THREADS", 16)),
        help="threads per web process (the hub's WEB_THREADS; SEARCH_CONCURRENCY is "
        "passed on from the environment)",
    )  # fmt: skip
    parser.add_argument("--worker-concurrency", type=int, default=1)
    parser.add_argument(
        "--torch-threads", type=int, default=os.cpu_count() or 1,
        help="EMBEDDING_TORCH_THREADS of the hub and the bare-model run "
        "(default: one per core, as the hub does when it is unset)",
    )  # fmt: skip
    parser.add_argument(
        "--embed-batch", type=int, default=int(os.environ.get("EMBEDDING_BATCH_SIZE", 16))
    )
    parser.add_argument(
        "--no-mem0", action="store_true",
        help="the full run without mem0 beside its first concurrency phase",
    )  # fmt: skip
    parser.add_argument("--ingest", type=int, help="messages in the ingestion phase")
    parser.add_argument(
        "--levels", type=_levels, metavar="N,N",
        help="memories at the bulk-loaded search levels (full: 100000,1000000; '' for none)",
    )  # fmt: skip
    parser.add_argument("--search-n", type=int, help="measured searches per mode and filter")
    parser.add_argument(
        "--summary-messages", type=int, help="messages in the summaries phase (full: 2000)"
    )
    parser.add_argument(
        "--fact-messages", type=int, help="user messages in the facts phase (full: 2000)"
    )
    parser.add_argument(
        "--only", type=_only_phases, metavar="NAME,NAME",
        help=f"a short try-out: the warm-up, the ingestion and only these document, room, "
        f"maintenance, context, console and concurrency phases "
        f"({', '.join(ONLY_PHASES)}), "
        "the latter four at "
        "the ingested memories; no bare model, search, recall, writes or bulk levels",
    )  # fmt: skip
    parser.add_argument(
        "--embedding-model", metavar="KEY",
        help="switch the bench project to this model first (minilm-l6, mpnet-base: see "
        "GET /api/v1/embedding/); default: the configured model",
    )  # fmt: skip
    parser.add_argument(
        "--wait-quiet", type=float, default=0, metavar="SECONDS",
        help="first wait up to this long until other processes leave the CPU idle",
    )  # fmt: skip
    return parser.parse_args()


def plan_for(args: argparse.Namespace) -> Plan:
    """The quick or full plan with the command line's overrides."""
    plan = PLANS["quick" if args.quick else "full"]
    overrides = {
        "ingest": args.ingest, "levels": args.levels, "search_n": args.search_n,
        "summary_messages": args.summary_messages, "fact_messages": args.fact_messages,
    }  # fmt: skip
    plan = replace(plan, **{key: value for key, value in overrides.items() if value is not None})
    return replace(
        plan, raw_texts=min(plan.raw_texts, plan.ingest), mem0=plan.mem0 and not args.no_mem0
    )


def results_start(
    args: argparse.Namespace, plan: Plan, corpus: Corpus, mode: str
) -> dict[str, Any]:
    """The run's label and configuration, before anything is measured."""
    total_messages = (
        plan.warmup_writes + 3 * plan.batch_size + plan.ingest + 2 * plan.batches * plan.batch_size
        + room_messages_planned(plan.summary_messages) + fact_messages_planned(plan.fact_messages)
    )  # fmt: skip
    return {
        "label": machine_label(mode),
        "config": {
            **asdict(plan),
            "web_workers": args.web_workers,
            "web_threads": args.web_threads,
            "search_concurrency": os.environ.get("SEARCH_CONCURRENCY", "default"),
            "worker_concurrency": args.worker_concurrency,
            "torch_threads": args.torch_threads,
            "embed_batch": args.embed_batch,
            "locomo": str(args.locomo),
            "locomo_turns": len(corpus.turns),
            "locomo_questions": len(corpus.questions),
            # the worker embeds a text once per content hash: duplicates would flatter it
            "messages_planned": total_messages,
            "distinct_texts_planned": distinct_texts(corpus, total_messages),
            "dotenv_keys": _dotenv_keys(),
        },
    }


def phases_run(bench: Bench, plan: Plan, only: tuple[str, ...] | None = None) -> None:
    bench.warmup()
    if only is None:
        bench.raw_model()
    bench.ingestion()
    if only is not None:  # a try-out of some document, room, maintenance and context phases
        document_phases_run(bench, only)
        room_phases_run(bench, only)
        maintenance_phases_run(bench, only)
        context_phases_run(bench, only)
        console_phases_run(bench, only)
        concurrency_phases_run(bench, only)
        mem0_concurrency_phases_run(bench, only)
        return
    document_phase(bench)  # the PDF is deleted after: later phases see the same memories
    bench.search_level()
    concurrency_phase(bench)
    if plan.mem0:
        mem0_concurrency_phase(bench)  # mem0 beside the hub at this level
    context_phase(bench)
    bench.recall()
    bench.writes()
    room_phases_run(bench)
    facts_phase(bench)
    target = maintenance_level(plan.levels)
    if target is None:
        level_phases_run(bench)
    for level in plan.levels:
        if bench.bulk_load(level):
            bench.search_level()
            concurrency_phase(bench)
            context_phase(bench)
            bench.recall()
        if level == target:
            level_phases_run(bench)
    context_concentrated_phase(bench)  # it moves memories between users
    console_phase(bench)  # last: it adds a user of 10,000 memories


def model_use(api: Api, model: str) -> str:
    """Switch the (empty) bench project to ``model`` through the API and wait for the
    flip (a worker's job with nothing to embed); the model in use."""
    api.post("/api/v1/embedding/switch/", json.dumps({"model": model}).encode(), expect=202)
    deadline = time.monotonic() + 600  # the first use of mpnet assembles its files
    while time.monotonic() < deadline:
        _, shown, _ = api.call("GET", "/api/v1/embedding/")
        if shown["model"] == model:
            return model
        if shown["switch"] and shown["switch"]["status"] in ("failed", "cancelled"):
            raise RuntimeError(f"switch to {model}: {shown['switch']['error']}")
        time.sleep(0.5)
    raise RuntimeError(f"switch to {model}: not done in 600 s")


def measure(
    args: argparse.Namespace, hub: Hub, monitor: Monitor, corpus: Corpus, plan: Plan,
    results: dict[str, Any],
) -> None:  # fmt: skip
    """Start the hub and run every phase into ``results``; the hub is left running."""
    print(f"[{time.strftime('%H:%M:%S')}] starting the hub on port {hub.port}", flush=True)
    results["hub_ready_seconds"] = round(hub.start(), 1)
    key = hub.api_key_unthrottled(PROJECT, "--name", "bench")
    monitor.start()
    api = Api(hub.port, key)
    if args.embedding_model:
        results["label"]["embedding_model"] = model_use(api, args.embedding_model)
    bench: Bench | None = None
    try:
        with psycopg.connect(hub.database_conninfo(), autocommit=True) as db:
            label = results["label"]
            label["postgres"] = sql_value(db, "SHOW server_version")
            label["pgvector"] = sql_value(
                db, "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            )
            bench = Bench(
                api=api, db=db, hub=hub, monitor=monitor, corpus=corpus, plan=plan,
                threads=args.torch_threads, embed_batch=args.embed_batch, results=results,
            )  # fmt: skip
            phases_run(bench, plan, args.only)
            results["client_reconnects_after_error"] = api.reconnects_after_error
    finally:
        if bench is not None:
            bench.close()
        api.close()


def results_finish(
    results: dict[str, Any], monitor: Monitor, seconds: float, error: str | None
) -> None:
    results["rss_peak_mib"] = monitor.peaks
    results["cpu"] = {
        phase: {
            **{k: round(v, 1) for k, v in bucket.items()},
            "foreign_cores": monitor.foreign_cpu(phase),
            "roles": {
                role: round(used, 1)
                for role, used in sorted(monitor.roles_cpu.get(phase, {}).items())
                if used
            },
        }
        for phase, bucket in monitor.cpu.items()
    }
    results["seconds"] = round(seconds, 1)
    results["error"] = error


def main() -> int:
    args = arguments()
    mode = "quick" if args.quick else "full"
    plan = plan_for(args)
    if not args.locomo.exists():
        print(f"LoCoMo file not found: {args.locomo} (use --locomo PATH)", file=sys.stderr)
        return 2
    corpus = corpus_load(args.locomo)
    data_dir = args.data_dir.resolve()
    if data_dir == (REPO / "var").resolve():
        print("refusing to use the default data folder var/ as scratch", file=sys.stderr)
        return 2
    if args.wait_quiet:
        quiet_wait(args.wait_quiet)
    results = results_start(args, plan, corpus, mode)
    print(f"MemoryHub benchmark ({mode}); scratch data in {data_dir}", flush=True)
    scratch_reset(data_dir)
    hub = Hub(
        data_dir, args.port or free_port(), hub_env(data_dir, args.torch_threads, args.embed_batch),
        ["--web-workers", str(args.web_workers), "--web-threads", str(args.web_threads),
         "--worker-concurrency", str(args.worker_concurrency)],
    )  # fmt: skip
    monitor = Monitor(hub)
    error = None
    started = time.monotonic()
    try:
        measure(args, hub, monitor, corpus, plan, results)
    except BaseException as exc:  # noqa: BLE001 - reported, the hub still stopped below
        error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    finally:
        monitor.stop()
        print(f"[{time.strftime('%H:%M:%S')}] stopping the hub", flush=True)
        results["hub_stop"] = hub.stop()
    results_finish(results, monitor, time.monotonic() - started, error)
    path = results_write(results, args.out, mode)
    report_print(results)
    print(f"\nResults: {path}" + (f"\nHub log: {hub.log_path}" if error else ""))
    return 1 if error else 0


def _only_phases(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    known = ONLY_PHASES
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose among {', '.join(known)}")
    return names


def _levels(text: str) -> tuple[int, ...]:
    return tuple(sorted(int(part.replace("_", "")) for part in text.split(",") if part.strip()))


def _dotenv_keys() -> list[str]:
    """Names set by a .env in the checkout (the hub reads it for anything we do not set)."""
    path = REPO / ".env"
    if not path.exists():
        return []
    lines = [line.strip() for line in path.read_text().splitlines()]
    return sorted(
        line.split("=", 1)[0].strip()
        for line in lines
        if line and not line.startswith("#") and "=" in line
    )


def results_write(results: dict[str, Any], folder: Path, mode: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H%M%SZ")
    path = folder / f"{stamp}-{mode}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    shutil.copyfile(path, folder / f"latest-{mode}.json")
    return path


if __name__ == "__main__":
    sys.exit(main())
