#!/usr/bin/env python
"""MemoryHub side by side with Hindsight (PyPI hindsight-api-slim, MIT) and mem0, in one run.

    .venv/bin/python bench/compare_hindsight.py --quick      # 2 conversations
    .venv/bin/python bench/compare_hindsight.py              # all 5 (2,760 turns)
    .venv/bin/python bench/compare_hindsight.py --no-mem0    # MemoryHub and Hindsight only
    make compare                                             # the same as the second

(the first time also a couple of minutes to build Hindsight's virtualenv, and mem0's
when bench/compare_mem0.py has not built it yet).

The workload, the LoCoMo loader, the hub's phases and mem0's side are
bench/compare_mem0.py's (bench/compare_workload.py, bench/hub_side.py,
bench/mem0_side.py); Hindsight's are bench/hindsight_server.py (its virtualenv under
<scratch>/venv, default var/hindsight-bench/, git-ignored; its own embedded PostgreSQL,
pg0; its server on 127.0.0.1, offline, no LLM, the same MiniLM, reranking off) and
bench/hindsight_side.py (its HTTP API); the report is bench/hindsight_report.py's.

In order, on one hub (`manage.py hub --no-demo`) started on <scratch>/hub: the bare
model (before), MemoryHub ingestion until all embedded then every question (HTTP, k =
20, default mode), mem0 (bench/mem0_runner.py in its venv, top_k 20, in process), then
Hindsight started (pg0 and its server), a warm-up, every turn retained (HTTP, 100 a
request, synchronous, so searchable when answered), ANALYZE (the hub gets one too),
every question recalled (HTTP, its defaults: budget mid, 4096 tokens), optionally again
at --hindsight-budget, then the bare model (after). recall@5/10/20 are bench/locomo.py's
on the first 5/10/20 of each answer, as bench/evaluate.py counts them; the other CPU
(cores other processes used) is measured in every phase, and each timed phase first
waits up to --quiet-wait s for it to drop.

Prints the table (and its Markdown) and writes bench/results/hindsight-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.compare_mem0 import (  # noqa: E402
    MODEL_BATCH,
    label,
    memoryhub_phases,
    raw_phase,
    result_write,
)
from bench.compare_report import SKEW_CORES  # noqa: E402
from bench.compare_workload import (  # noqa: E402
    locomo_conversations,
    repeated_questions,
    workload_build,
)
from bench.hindsight_report import figures, report_print  # noqa: E402
from bench.hindsight_server import (  # noqa: E402
    HINDSIGHT_VERSION,
    Hindsight,
    HubBeside,
    hindsight_venv,
)
from bench.hindsight_side import (  # noqa: E402
    hindsight_api,
    hindsight_recall,
    hindsight_retain,
    hindsight_warmup,
)
from bench.mem0_side import mem0_database, mem0_run, mem0_settings, mem0_venv  # noqa: E402
from bench.monitor import Monitor  # noqa: E402
from bench.stack import REPO, free_port, hub_env, scratch_reset, servers_stop  # noqa: E402

K = 20  # each system's answer is read to 20; recall@5 and @10 are its first 5 and 10


def say(message: str = "") -> None:
    print(message, flush=True)


def _hindsight_timed(
    args: argparse.Namespace, monitor: Monitor, hindsight: Hindsight, workload: dict[str, Any]
) -> dict[str, Any]:
    api = hindsight_api(hindsight.port)
    monitor.phase = "Hindsight warm-up"
    hindsight_warmup(api, workload)
    monitor.quiet_wait(args.quiet_wait, SKEW_CORES)
    monitor.phase = "Hindsight retain"
    say(f"  Hindsight: retaining {len(workload['messages'])} turns, 100 a request ...")
    retain = hindsight_retain(api, workload)
    say(f"    {retain['per_second']:.1f}/s until searchable ({retain['seconds']:.1f} s)")
    with psycopg.connect(hindsight.pg.url, autocommit=True) as db:
        db.execute("ANALYZE")  # as the hub's searches get (compare_mem0.py)
    monitor.quiet_wait(args.quiet_wait, SKEW_CORES)
    monitor.phase = "Hindsight recall"
    say(f"  Hindsight: {len(workload['queries'])} recalls ...")
    recall = hindsight_recall(api, workload, K)
    say(f"    p50 {recall['latency_ms']['p50']:.1f} ms, {recall['results_mean']} facts a recall")
    budget_recall = None
    if args.hindsight_budget:
        monitor.phase = f"Hindsight recall ({args.hindsight_budget})"
        budget_recall = hindsight_recall(api, workload, K, args.hindsight_budget)
        say(f"    budget {args.hindsight_budget}: p50 {budget_recall['latency_ms']['p50']:.1f} ms")
    api.close()
    return {"retain": retain, "recall": recall, "budget_recall": budget_recall}


def hindsight_phases(
    args: argparse.Namespace,
    hub: HubBeside,
    monitor: Monitor,
    workload: dict[str, Any],
    scratch: Path,
) -> dict[str, Any]:
    """Hindsight started beside the hub, its timed phases, stopped."""
    hindsight = Hindsight(scratch / "venv", scratch / "hindsight", args.threads)
    hub.hindsight = hindsight  # the monitor counts its processes as ours
    monitor.phase = "Hindsight start-up"
    say(f"  Hindsight: starting its PostgreSQL (pg0) and server (log {hindsight.log_path}) ...")
    try:
        startup = hindsight.start()
        say(f"    ready: pg0 {startup['pg0']} s, server {startup['server']} s")
        measured = _hindsight_timed(args, monitor, hindsight, workload)
        postgres = hindsight.pg.version()
    finally:
        monitor.phase = "Hindsight stop"
        hindsight.stop()
    return {
        **measured,
        "startup_seconds": startup,
        "postgres": postgres,
        "versions": {},
        "settings": {"retain": "sync, 100 items a request", "recall": "defaults (budget mid)"},
        "download_attempts": hindsight.download_attempts(),
    }


def measure(
    args: argparse.Namespace,
    hub: HubBeside,
    monitor: Monitor,
    workload: dict[str, Any],
    scratch: Path,
) -> dict[str, Any]:
    """Every phase on the started hub, in order; what each measured."""
    server = mem0_database(hub)
    measured = memoryhub_phases(args, hub, monitor, workload, k=K, project="hindsight-compare")
    if not args.no_mem0:
        monitor.quiet_wait(args.quiet_wait, SKEW_CORES)
        say("  mem0: adding and searching in its venv ...")
        measured["mem0"] = mem0_run(
            scratch=scratch,
            workload=workload,
            settings=mem0_settings(threads=args.threads, k=K, hub=hub, scratch=scratch),
            monitor=monitor,
            venv=args.mem0_venv,
        )
    measured["hindsight"] = hindsight_phases(args, hub, monitor, workload, scratch)
    measured["raw_runs"].append(
        raw_phase("raw model (after)", workload, args, monitor, data_dir=hub.data_dir)
    )
    monitor.phase = "stop"
    return {**measured, "server": server}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="MemoryHub, mem0 and Hindsight on LoCoMo (see the module docstring)."
    )
    parser.add_argument("--quick", action="store_true", help="the first 2 conversations only")
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument(
        "--locomo", type=Path, default=REPO.parent / "shared" / "data" / "locomo-dev.json"
    )
    parser.add_argument("--scratch", type=Path, default=REPO / "var" / "hindsight-bench")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--fresh-venv", action="store_true", help="rebuild Hindsight's venv")
    parser.add_argument("--no-mem0", action="store_true", help="MemoryHub and Hindsight only")
    parser.add_argument(
        "--mem0-venv",
        type=Path,
        default=REPO / "var" / "mem0-bench" / "venv",
        help="mem0's venv (built there when missing: compare_mem0.py's)",
    )
    parser.add_argument(
        "--hindsight-budget",
        choices=("low", "mid", "high"),
        default=None,
        help="recall every question again at this budget (not timed against the others)",
    )
    parser.add_argument("--quiet-wait", type=float, default=30.0)
    args = parser.parse_args()
    args.scratch = args.scratch.resolve()
    if args.scratch == REPO or args.scratch in REPO.parents or args.scratch == REPO / "var":
        parser.error(f"refusing to use {args.scratch} as the scratch folder (it is deleted)")
    return args


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Leftovers of a crashed run stopped, the scratch folder emptied but the venv, the
    venvs built or reused; their versions."""
    scratch = args.scratch
    servers_stop(scratch / "hub")
    servers_stop(scratch / "hindsight" / "pg0")  # its data folder is <that>/pg
    scratch_reset(scratch, keep=("venv",))
    versions = {"hindsight": hindsight_venv(scratch / "venv", fresh=args.fresh_venv)}
    if not args.no_mem0:
        versions["mem0"] = mem0_venv(args.mem0_venv, fresh=False)
    return versions


def measured_keep(measured: dict[str, Any], monitor: Monitor, started_at: datetime) -> None:
    """What the run measured, before the report is computed from it (a long run is
    not lost to a fault in the report): ranked dia_ids and timings, no LoCoMo text."""
    folder = REPO / "bench" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = started_at.strftime("%Y-%m-%dT%H%M%SZ")
    raw = {"measured": measured, "cpu": monitor.report(), "peaks": monitor.peaks}
    (folder / f"hindsight-{stamp}-measured.json").write_text(json.dumps(raw))


def hub_start(hub: HubBeside, attempts: int = 3) -> float:
    """The hub started; again when it gave up (its web server must answer within 60 s,
    which a machine busy with other work can miss)."""
    for attempt in range(1, attempts + 1):
        try:
            return hub.start()
        except RuntimeError as error:
            if attempt == attempts:
                raise
            say(f"  the hub did not start ({str(error).splitlines()[0]}); again")
            servers_stop(hub.data_dir)
    raise AssertionError("unreachable")


def main() -> int:
    args = arguments()
    scratch, started_at = args.scratch, datetime.now(UTC)
    say(f"MemoryHub vs Hindsight {HINDSIGHT_VERSION}: scratch {scratch}, threads {args.threads}")
    venvs = prepare(args)
    count = args.conversations or (2 if args.quick else None)
    conversations = locomo_conversations(args.locomo, count)
    workload = workload_build(conversations)
    say(
        f"  workload: {len(conversations)} conversations, {len(workload['messages'])} turns, "
        f"{len(workload['queries'])} questions ({repeated_questions(workload)} repeated)"
    )
    env = hub_env(scratch / "hub", args.threads, MODEL_BATCH)
    hub = HubBeside(scratch / "hub", free_port(), env, [])
    monitor = Monitor(hub, roles_every=1.0)
    try:
        say(f"  starting the hub on port {hub.port} (log {hub.log_path}) ...")
        say(f"  hub ready in {hub_start(hub):.1f} s")
        measured = measure(args, hub, monitor, workload, scratch)
    finally:
        monitor.stop()
        say(f"  hub stopped ({'cleanly' if hub.stop()['clean'] else 'not cleanly'})")
    measured["hindsight"]["versions"] = venvs["hindsight"]
    measured_keep(measured, monitor, started_at)
    result = {
        "label": {
            **label(
                args,
                started_at,
                venvs.get("mem0", {}),
                {"mem0": measured.get("mem0") or {"versions": {}}, "server": measured["server"]},
            ),
            "hindsight_version": HINDSIGHT_VERSION,
            "hindsight_postgres": measured["hindsight"]["postgres"],
        },
        "workload": {
            "locomo": str(args.locomo),
            "conversations": [c.sample_id for c in conversations],
            "messages": len(workload["messages"]),
            "questions": len(workload["queries"]),
            "repeated_questions": repeated_questions(workload),
            "k": K,
        },
        **figures(workload, measured, monitor.report(), monitor.peaks, K),
    }
    report_print(result)
    say(f"\nwrote {result_write(result, started_at, args.quick, 'hindsight').relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
