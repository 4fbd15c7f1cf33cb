"""The maintenance phases of bench/run.py: how fast the worker mines users' messages for
facts (the offline extractor: the bench hub has no LLM_BASE_URL), what access tracking
costs a search, and how long the importance recompute and pruning take. Facts run after
the room phases; the other three at the maintenance level (100,000 memories in the full
run, the ingested ones in the quick run), pruning last since it removes memories. Each
adds its figures to the run's results: ``facts``, ``access_tracking``, ``importance``
and ``pruning``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from typing import Any

import psutil

from bench.client import ApiError, encode, summary
from bench.corpus import USERS
from bench.phases import PROJECT, Bench
from bench.stack import REPO

MAINTENANCE_PHASES = ("facts", "access", "importance", "pruning")
LEVEL_PHASES = ("access", "importance", "pruning")  # at the maintenance level, in this order
MAINTENANCE_LEVEL = 100_000
FACTS_WRITE_BATCH = 100
FACT_KINDS = ("fact", "relationship", "goal")
ACCESS_BLOCK = 10  # searches in a row with tracking on, or off
PRUNE_SHARE = 0.10  # the FIFO cap is chosen so that about this share of memories goes
MANAGE_TIMEOUT = 1800.0
STALL_TIMEOUT = 240.0
PRUNE_COMMAND = REPO / "memories/management/commands/prune.py"
NOT_AVAILABLE = "skipped: pruning not available (no manage.py prune in this checkout)"
IMPORTANCE_CODE = """
import json, time
from memories.models import Project
from memories.services.importance import importance_recompute, importance_recompute_total
project = Project.objects.get(name={project!r})
out = {{"memories": importance_recompute_total(project=project)}}
for run in ("first", "repeat"):
    started = time.perf_counter()
    changed = importance_recompute(project=project)
    out[run] = {{"seconds": round(time.perf_counter() - started, 3), "changed": changed}}
print(json.dumps(out))
"""


def maintenance_level(levels: tuple[int, ...]) -> int | None:
    """The bulk level at which access tracking, importance and pruning are timed:
    MAINTENANCE_LEVEL if the run has it, else its smallest; None: the ingested memories."""
    if not levels:
        return None
    return MAINTENANCE_LEVEL if MAINTENANCE_LEVEL in levels else min(levels)


def maintenance_phases_run(bench: Bench, names: tuple[str, ...] = MAINTENANCE_PHASES) -> None:
    """The named maintenance phases, facts first, here and now (a try-out's --only)."""
    if "facts" in names:
        facts_phase(bench)
    level_phases_run(bench, names)


def level_phases_run(bench: Bench, names: tuple[str, ...] = LEVEL_PHASES) -> None:
    """Access tracking, importance and pruning (those named), in that order."""
    phases = {"access": access_phase, "importance": importance_phase, "pruning": pruning_phase}
    for name in LEVEL_PHASES:
        if name in names:
            phases[name](bench)


def fact_messages_planned(fact_messages: int) -> int:
    return fact_messages - fact_messages % FACTS_WRITE_BATCH


# --- facts ------------------------------------------------------------------------------


def facts_phase(bench: Bench) -> None:
    """Write N LoCoMo turns as user messages, poll until each has its FactExtraction row,
    and read the throughput from the database's times; the bare extractor beside it."""
    count = fact_messages_planned(bench.plan.fact_messages)
    bench.wait_embedded("before facts")
    bench.phase("facts_backlog", "facts: until the earlier phases' user messages are mined")
    backlog = unmined_wait(bench)
    messages = [{**message, "role": "user"} for message in bench.take(count)]
    bench.phase("facts_bare", f"facts: the bare offline extractor on {count:,} texts")
    bare = extractor_rate([message["content"] for message in messages])
    bodies = [
        encode({"memories": messages[start : start + FACTS_WRITE_BATCH]})
        for start in range(0, count, FACTS_WRITE_BATCH)
    ]
    name = "facts"
    bench.phase(
        name,
        f"facts: {count:,} user messages in batches of {FACTS_WRITE_BATCH}, until each is mined",
    )
    started = time.perf_counter()
    ids: list[str] = []
    for body in bodies:
        data, _ = bench.api.post("/api/v1/memories/batch/", body)
        ids += [result["memory"]["id"] for result in data["results"]]
    written = time.perf_counter()
    done = extractions_wait(bench, ids)
    figures = facts_figures(
        first_write=bench.sql(
            "SELECT min(created_at) FROM memories_memory WHERE id = ANY(%s::uuid[])", ids
        ),
        rows=extraction_rows(bench, ids),
        created=facts_created(bench, ids),
        messages=len(ids),
    )
    bench.results["facts"] = {
        "messages": len(ids),
        **figures,
        "writes_seconds": round(written - started, 2),
        "seconds_until_mined": round(done - started, 2),
        "bare_extractor": bare,
        "backlog": backlog,
        "foreign_cpu_cores": bench.foreign(name),
    }
    bench.wait_embedded("after facts")  # later phases start with an idle worker


def unmined_wait(bench: Bench, stall_timeout: float = 120) -> dict[str, Any]:
    """Wait until the user messages earlier phases wrote are mined (a backlog on the
    derived queue would be counted against the facts phase); gives up, without error,
    when the count stops moving (messages only the beat sweep will reach)."""
    query = (
        "SELECT count(*) FROM memories_memory m WHERE m.project_id = "
        "(SELECT id FROM memories_project WHERE name = %s) AND m.kind = 'message' "
        "AND m.role = 'user' AND m.end_user_id IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM synopsis_factextraction f WHERE f.message_id = m.id)"
    )
    started = last_change = last_print = time.monotonic()
    first = last = int(bench.sql(query, PROJECT))
    while last and time.monotonic() - last_change < stall_timeout:
        time.sleep(0.5)
        now = int(bench.sql(query, PROJECT))
        if now != last:
            last, last_change = now, time.monotonic()
        if time.monotonic() - last_print > 30:
            print(f"    facts backlog: {now:,} user messages not mined yet", flush=True)
            last_print = time.monotonic()
    return {"unmined_at_start": first, "unmined_left": last, "waited_seconds": _since(started)}


def extractions_wait(bench: Bench, ids: list[str]) -> float:
    """Poll until every message of ``ids`` has its FactExtraction row; returns the
    perf_counter time it was seen."""
    query = "SELECT count(*) FROM synopsis_factextraction WHERE message_id = ANY(%s::uuid[])"
    last, last_change, last_print = -1, time.monotonic(), time.monotonic()
    while True:
        now = int(bench.sql(query, ids))
        if now >= len(ids):
            return time.perf_counter()
        if now != last:
            last, last_change = now, time.monotonic()
        if time.monotonic() - last_change > STALL_TIMEOUT:
            raise RuntimeError(
                f"facts: {now} of {len(ids)} messages mined, unchanged for {STALL_TIMEOUT:.0f} s;"
                f" see {bench.hub.log_path}"
            )
        if time.monotonic() - last_print > 30:
            print(f"    facts: {now:,} of {len(ids):,} messages mined", flush=True)
            last_print = time.monotonic()
        time.sleep(0.25)


def extraction_rows(bench: Bench, ids: list[str]) -> list[tuple[str, int, datetime]]:
    """(status, facts created or reinforced, created_at) of each message's extraction."""
    cursor = bench.db.execute(
        "SELECT status, facts, created_at FROM synopsis_factextraction "
        "WHERE message_id = ANY(%s::uuid[])",
        (ids,),
    )
    return [(status, int(facts), created_at) for status, facts, created_at in cursor]


def facts_created(bench: Bench, ids: list[str]) -> dict[str, int]:
    """Memories of the fact kinds extracted from these messages, by kind."""
    cursor = bench.db.execute(
        "SELECT kind, count(*) FROM memories_memory WHERE kind = ANY(%s) "
        "AND metadata->>'extracted_from' = ANY(%s) GROUP BY kind",
        (list(FACT_KINDS), ids),
    )
    return {kind: int(number) for kind, number in cursor}


def facts_figures(
    *, first_write: datetime | None, rows: list[tuple[str, int, datetime]],
    created: dict[str, int], messages: int,
) -> dict[str, Any]:  # fmt: skip
    """Messages mined per second from the first write to the last extraction row, the
    facts created (by kind) and the share of messages that yielded one."""
    span = None
    if rows and first_write is not None:
        span = (max(row[2] for row in rows) - first_write).total_seconds()
    yielding = sum(1 for _, facts, _ in rows if facts > 0)
    return {
        "mined": len(rows),
        "statuses": dict(Counter(status for status, _, _ in rows)),
        "span_seconds": None if span is None else round(span, 2),
        "messages_per_second": round(len(rows) / span, 1) if span else None,
        "facts_created": sum(created.values()),
        "facts_created_by_kind": {kind: created.get(kind, 0) for kind in FACT_KINDS},
        "facts_created_or_reinforced": sum(facts for _, facts, _ in rows),
        "messages_with_facts": yielding,
        "share_with_facts": round(yielding / messages, 3) if messages else None,
    }


def extractor_rate(texts: list[str]) -> dict[str, Any]:
    """The offline extractor alone in this process (pure Python, no Django)."""
    from synopsis.extraction_offline import facts_draft_offline

    started = time.perf_counter()
    drafts = [facts_draft_offline(text) for text in texts]
    seconds = time.perf_counter() - started
    return {
        "texts": len(texts),
        "seconds": round(seconds, 3),
        "per_second": round(len(texts) / seconds, 1) if seconds else None,
        "drafts": sum(len(found) for found in drafts),
        "texts_with_drafts": sum(1 for found in drafts if found),
    }


# --- access tracking --------------------------------------------------------------------


def access_phase(bench: Bench) -> None:
    """Auto-mode searches with a user filter, in blocks of ACCESS_BLOCK with the
    project's importance.track_access on and off (ABBA order: drifts hit both alike);
    left on afterwards, the default."""
    plan = bench.plan
    bench.wait_embedded("before access tracking")
    level = bench.memories()
    blocks = -(-plan.search_n // ACCESS_BLOCK)
    name = f"access_{level}"
    bench.phase(
        name,
        f"access tracking at {level:,} memories: {blocks} blocks of {ACCESS_BLOCK} searches "
        "with tracking on and as many off, interleaved",
    )
    samples: dict[bool, list[tuple[float, dict[str, Any]]]] = {True: [], False: []}

    def search() -> tuple[float, dict[str, Any]]:
        return bench.search("auto", f"user-{bench.rng.randrange(USERS):03d}")

    try:
        for _ in range(plan.search_warmup):
            search()
        for on in access_block_order(blocks):
            settings_patch(bench, {"importance": {"track_access": on}})
            samples[on] += [search() for _ in range(ACCESS_BLOCK)]
    finally:
        settings_patch(bench, {"importance": {"track_access": None}})  # the default: on
    bench.results["access_tracking"] = {
        "memories": level,
        "mode": "auto",
        "filter": "user",
        "block": ACCESS_BLOCK,
        **access_figures(samples[True], samples[False]),
        "foreign_cpu_cores": bench.foreign(name),
    }


def access_block_order(blocks: int) -> list[bool]:
    """``blocks`` blocks each way (True: tracking on), ABBA: on, off, off, on, on, ..."""
    order: list[bool] = []
    for pair in range(blocks):
        order += [True, False] if pair % 2 == 0 else [False, True]
    return order


def access_figures(
    on: list[tuple[float, dict[str, Any]]], off: list[tuple[float, dict[str, Any]]]
) -> dict[str, Any]:
    """Latency with tracking on and off from (client ms, response) samples, and on - off."""

    def figures(measured: list[tuple[float, dict[str, Any]]]) -> dict[str, Any]:
        client = [elapsed for elapsed, _ in measured]
        timings = [data.get("timings_ms") or {} for _, data in measured]
        hits = [len(data["results"]) for _, data in measured]
        return {
            "client_ms": summary(client),
            "server_total_ms": summary([t["total"] for t in timings if "total" in t]),
            # the search's own work: the query's embedding varies far more than tracking
            "client_minus_embed_ms": summary(
                [ms - t.get("embed_query", 0.0) for ms, t in zip(client, timings, strict=True)]
            ),
            "mean_results": round(sum(hits) / len(hits), 2) if hits else None,
        }

    both = {"on": figures(on), "off": figures(off)}
    difference = {}
    for part in ("client_ms", "server_total_ms", "client_minus_embed_ms"):
        for stat in ("p50", "p95"):
            high, low = both["on"][part][stat], both["off"][part][stat]
            difference[f"{part}_{stat}"] = (
                None if high is None or low is None else round(high - low, 2)
            )
    return {**both, "on_minus_off": difference}


def settings_patch(bench: Bench, changes: dict[str, Any]) -> None:
    status, data, _ = bench.api.call("PATCH", "/api/v1/settings/", encode(changes))
    if status != 200:
        raise ApiError(f"PATCH /api/v1/settings/ {changes}: {status} {str(data)[:500]}")


# --- importance -------------------------------------------------------------------------


def importance_phase(bench: Bench) -> None:
    """importance_recompute of the project, timed in a `manage.py shell` process (the
    service the command and beat call, without the process's start-up): right after the
    level was reached (the bulk-loaded memories, older, get new scores; fresh unread ones
    keep the default 0.5) and at once again (nothing moved: the cost of reading them)."""
    bench.wait_embedded("before importance")
    level = bench.memories()
    name = f"importance_{level}"
    bench.phase(name, f"importance recompute at {level:,} memories, twice")
    code = IMPORTANCE_CODE.format(project=PROJECT)
    output, seconds = manage_timed(bench, "shell", "--no-imports", "-c", code)
    measured = json.loads(output.strip().splitlines()[-1])
    bench.results["importance"] = importance_figures(measured, seconds) | {
        "active_memories": level,
        "foreign_cpu_cores": bench.foreign(name),
    }


def importance_figures(measured: dict[str, Any], process_seconds: float) -> dict[str, Any]:
    """Rates of both runs, and what the process spent around them (start-up)."""
    memories = measured["memories"]
    runs = {
        run: {
            **measured[run],
            "memories_per_second": (
                round(memories / measured[run]["seconds"]) if measured[run]["seconds"] else None
            ),
        }
        for run in ("first", "repeat")
    }
    inside = measured["first"]["seconds"] + measured["repeat"]["seconds"]
    return {
        "memories": memories,
        **runs,
        "process_seconds": round(process_seconds, 2),
        "startup_seconds": round(max(0.0, process_seconds - inside), 2),
    }


# --- pruning ----------------------------------------------------------------------------


def pruning_phase(bench: Bench) -> None:
    """A dry run and a real run of `manage.py prune` with a FIFO cap per user and kind
    that selects about PRUNE_SHARE of the memories; the policy is reset afterwards."""
    if not PRUNE_COMMAND.exists():
        print(f"  pruning {NOT_AVAILABLE}", flush=True)
        bench.results["pruning"] = {"skipped": NOT_AVAILABLE}
        return
    bench.wait_embedded("before pruning")
    level = bench.memories()
    cap, expected = fifo_cap(group_counts(bench), round(PRUNE_SHARE * level))
    name = f"pruning_{level}"
    bench.phase(
        name,
        f"pruning at {level:,} memories: fifo_per_user_kind {cap:,} (about {expected:,} go), "
        "a dry run then a real one",
    )
    figures: dict[str, Any] = {"memories": level, "fifo_per_user_kind": cap, "expected": expected}
    try:
        settings_patch(bench, {"pruning": {"fifo_per_user_kind": cap}})
        figures["dry_run"] = prune_timed(bench, dry_run=True)
        figures["real_run"] = prune_timed(bench, dry_run=False)
    except (RuntimeError, ApiError, subprocess.TimeoutExpired) as error:
        # an interface still settling must not cost the rest of the run
        figures["error"] = f"{type(error).__name__}: {str(error)[:2000]}"
        print(f"  pruning failed: {figures['error']}", flush=True)
    finally:
        settings_patch(bench, {"pruning": {"fifo_per_user_kind": None}})
    figures["startup_seconds"] = bench.results.get("importance", {}).get("startup_seconds")
    figures["foreign_cpu_cores"] = bench.foreign(name)
    bench.results["pruning"] = figures


def group_counts(bench: Bench) -> list[int]:
    """Active memories per user and kind of the project (those without a user are one
    more user, as pruning counts them)."""
    cursor = bench.db.execute(
        "SELECT count(*) FROM memories_memory WHERE project_id = "
        "(SELECT id FROM memories_project WHERE name = %s) AND status = 'active' "
        "GROUP BY end_user_id, kind",
        (PROJECT,),
    )
    return [int(row[0]) for row in cursor]


def fifo_cap(counts: list[int], target: int) -> tuple[int, int]:
    """The cap N >= 1 whose FIFO (keep N per group) selects closest to ``target`` of the
    groups' ``counts``, and how many it selects."""

    def selected(cap: int) -> int:
        return sum(max(0, count - cap) for count in counts)

    low, high = 1, max(counts, default=1)
    while low < high:  # the smallest cap selecting at most target (selected() decreases)
        middle = (low + high) // 2
        if selected(middle) <= target:
            high = middle
        else:
            low = middle + 1
    if low > 1 and abs(selected(low - 1) - target) < abs(selected(low) - target):
        low -= 1
    return low, selected(low)


def prune_timed(bench: Bench, *, dry_run: bool) -> dict[str, Any]:
    """One `manage.py prune` run: its process's seconds, the maintenance run it recorded
    (its own seconds and counts) and how many active memories it removed."""
    last = bench.sql("SELECT coalesce(max(id), 0) FROM memories_maintenancerun")
    active = bench.memories()
    command = ["prune", "--project", PROJECT, *(["--dry-run"] if dry_run else [])]
    output, seconds = manage_timed(bench, *command)
    row = bench.db.execute(
        "SELECT status, started_at, finished_at, counts, error FROM memories_maintenancerun "
        "WHERE task = 'prune' AND id > %s ORDER BY id DESC LIMIT 1",
        (last,),
    ).fetchone()
    figures: dict[str, Any] = {
        "command_seconds": round(seconds, 2),
        # its summary line (a dry run lists the ids after it)
        "output": output.strip().splitlines()[0][:300] if output.strip() else "",
        "removed": active - bench.memories(),
    }
    if row is not None:
        status, started_at, finished_at, counts, error = row
        figures.update(
            run_status=status,
            run_seconds=(
                round((finished_at - started_at).total_seconds(), 2) if finished_at else None
            ),
            counts=counts,
            error=error or None,
        )
    return figures


# --- helpers ----------------------------------------------------------------------------


def manage_timed(bench: Bench, *command: str) -> tuple[str, float]:
    """Run a management command in the hub's environment (its CPU counted as ours);
    its stdout and wall seconds."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "manage.py", *command],
        cwd=REPO,
        env=bench.hub.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    bench.monitor.runner = psutil.Process(process.pid)
    try:
        stdout, stderr = process.communicate(timeout=MANAGE_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    finally:
        bench.monitor.runner = None
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(f"manage.py {command[0]} failed ({process.returncode}):\n{stderr}")
    return stdout, seconds


def _since(started: float) -> float:
    return round(time.monotonic() - started, 1)
