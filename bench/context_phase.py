"""The context phase of bench/run.py: what building an agent's context costs
(POST /api/v1/context/, no room: the user's whole history; max_tokens 2,000) for the
user with the most memories, right after each search level's searches; the client's
round trip and the server's timings_ms per stage (query embedding, synopsis, facts,
history, working notes, retrieval, ranking, token counting, rendering, accounting).

bench/bulk.py spreads memories evenly over the bench's 100 users, so at 1,000,000
memories the largest user holds about 10,000. The target is a user with 100,000 in a
project of 1,000,000, so at the end of the run (nothing is measured after it) the
largest user is given other users' rooms, whole (one UPDATE of end_user_id, then VACUUM
ANALYZE), until it holds CONCENTRATED_SHARE of the project's active memories, and
the context is measured again for it. Figures go to ``results["context"]``, keyed by
level (the concentrated one by "<level> concentrated")."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import psycopg

from bench.client import encode, summary
from bench.phases import PROJECT, Bench

CONTEXT_PHASES = ("context",)
MAX_TOKENS = 2_000
TARGET_P95_MS = 60.0
TARGET_USER_MEMORIES = 100_000  # ... in a project of 1,000,000
CONCENTRATED_SHARE = 0.10  # the target's ratio
CACHE_HIT_MS = 0.5  # an embed_query this short came from the web process's query cache
STAGES = (
    "embed_query", "embed_wait", "synopsis", "facts", "history", "working", "retrieval",
    "ranking", "token_counting", "rendering", "accounting",
    # the retrieval's search, step by step (the vector step may run beside the keyword
    # step and the neighbours: they overlap)
    "retrieval.count", "retrieval.keyword", "retrieval.neighbours", "retrieval.vector",
    "retrieval.distances", "retrieval.rank", "retrieval.load", "retrieval.more",
    "retrieval.search_wait",
)  # fmt: skip

PROJECT_SQL = "(SELECT id FROM memories_project WHERE name = %s)"
LARGEST_USER_SQL = f"""
    SELECT u.external_id, count(*) FROM memories_memory m
    JOIN memories_enduser u ON u.id = m.end_user_id
    WHERE m.project_id = {PROJECT_SQL} AND m.status = 'active'
    GROUP BY u.external_id ORDER BY count(*) DESC, u.external_id LIMIT 1
"""
PROJECT_MEMORIES_SQL = (
    f"SELECT count(*) FROM memories_memory WHERE project_id = {PROJECT_SQL} AND status = 'active'"
)
# other users' rooms, whole (every row of a room moves, so a room keeps one user, as the
# rooms the hub's clients make), first by id (bulk.py's rooms: 25 turns each) until
# enough active messages move; never a room holding a `unique` row (its uniqueness is
# per user). Moving single messages instead (before 2026-11-24) left the user ~3 turns
# in each of ~36,000 rooms of 25 shared with another user: each neighbouring-turn
# lookup then stepped over the other user's turns
CONCENTRATE_SQL = f"""
    WITH heavy AS (
        SELECT id FROM memories_enduser WHERE project_id = {PROJECT_SQL} AND external_id = %s
    ), rooms AS (
        SELECT m.room_id, count(*) FILTER (WHERE m.status = 'active' AND m.kind = 'message') AS n
        FROM memories_memory m
        WHERE m.project_id = {PROJECT_SQL} AND m.room_id IS NOT NULL
        GROUP BY m.room_id
        HAVING NOT bool_or(m.is_unique) AND NOT bool_or(m.end_user_id IS NULL)
           AND NOT bool_or(m.end_user_id = (SELECT id FROM heavy))
    ), chosen AS (
        SELECT room_id FROM (
            SELECT room_id, n, sum(n) OVER (ORDER BY room_id) AS running FROM rooms
        ) counted WHERE running - n < %s
    ), moved AS (
        UPDATE memories_memory SET end_user_id = (SELECT id FROM heavy)
        WHERE project_id = {PROJECT_SQL} AND room_id IN (SELECT room_id FROM chosen)
        RETURNING status, kind
    )
    SELECT count(*) FILTER (WHERE status = 'active' AND kind = 'message') FROM moved
"""


def context_phases_run(bench: Bench, names: tuple[str, ...] = CONTEXT_PHASES) -> None:
    """A try-out's --only: the context at the memories there are, then concentrated."""
    if "context" in names:
        context_phase(bench)
        context_concentrated_phase(bench)


def context_phase(bench: Bench, *, key: str | None = None, moved: int | None = None) -> None:
    """search_warmup + search_n context calls for the user with the most memories, with
    queries from the query stream; the measured ones' figures under results["context"]."""
    plan = bench.plan
    bench.wait_embedded("before context")
    project_memories = int(bench.sql(PROJECT_MEMORIES_SQL, PROJECT))
    user, held = largest_user(bench)
    name = f"context_{project_memories}" + ("_concentrated" if moved is not None else "")
    bench.phase(
        name,
        f"context at {project_memories:,} memories for {user} ({held:,} memories): "
        f"{plan.search_warmup} warm-up and {plan.search_n} measured calls, "
        f"max_tokens {MAX_TOKENS:,}",
    )
    calls: list[tuple[float, dict[str, Any]]] = []
    for _ in range(plan.search_warmup + plan.search_n):
        calls.append(context_call(bench, user))
    bench.results.setdefault("context", {})[key or str(project_memories)] = {
        "memories": project_memories,
        "user": user,
        "user_memories": held,
        "concentrated": moved is not None,
        "moved": moved,
        "warmup": plan.search_warmup,
        **context_figures(calls[plan.search_warmup :]),
        # the first call counts the user's whole history's tokens (cached after it)
        "first_call_ms": round(calls[0][0], 2) if calls else None,
        "first_call_timings_ms": calls[0][1].get("timings_ms") if calls else None,
        "foreign_cpu_cores": bench.foreign(name),
    }


def context_concentrated_phase(bench: Bench) -> None:
    """At the end of the run: the largest user given other users' rooms, whole, until it
    holds CONCENTRATED_SHARE of the project's active messages, then the context
    measured for it."""
    bench.wait_embedded("before concentrating")
    project_memories = int(bench.sql(PROJECT_MEMORIES_SQL, PROJECT))
    user, held = largest_user(bench)
    missing = concentrated_missing(held, project_memories)
    name = "context_concentrate"
    bench.phase(
        name,
        f"context: other users' rooms holding {missing:,} active messages given to {user} "
        f"({held:,} -> {held + missing:,} of {project_memories:,}), then VACUUM ANALYZE",
    )
    moved = 0
    if missing:
        moved = concentrate(bench, user, missing)
        bench.db.execute("VACUUM (ANALYZE) memories_memory")
    context_phase(bench, key=f"{project_memories} concentrated", moved=moved)


def concentrate(bench: Bench, user: str, missing: int, attempts: int = 3) -> int:
    """CONCENTRATE_SQL, tried again when PostgreSQL aborts it in a deadlock: the hub's
    access flush (a beat task, every 30 s) updates the rows the previous context calls
    read, in its own order (a full run at a220ed2 lost its last phase to one)."""
    for attempt in range(1, attempts + 1):
        try:
            cursor = bench.db.execute(CONCENTRATE_SQL, (PROJECT, user, PROJECT, missing, PROJECT))
            return int(cursor.fetchone()[0])
        except psycopg.errors.DeadlockDetected:
            if attempt == attempts:
                raise
            time.sleep(1)
    return 0


def largest_user(bench: Bench) -> tuple[str, int]:
    """The external id of the project's user with the most active memories, and how many."""
    row = bench.db.execute(LARGEST_USER_SQL, (PROJECT,)).fetchone()
    if row is None:
        raise RuntimeError("context: the project has no user with memories")
    return str(row[0]), int(row[1])


def concentrated_missing(held: int, project_memories: int) -> int:
    """How many memories to give a user holding ``held`` so that it holds
    CONCENTRATED_SHARE of ``project_memories`` (none if it does already)."""
    return max(0, round(CONCENTRATED_SHARE * project_memories) - held)


def context_call(bench: Bench, user: str) -> tuple[float, dict[str, Any]]:
    payload = {"user": user, "query": next(bench.queries), "max_tokens": MAX_TOKENS}
    data, elapsed = bench.api.post("/api/v1/context/", encode(payload), expect=200)
    return elapsed, data


def context_figures(measured: list[tuple[float, dict[str, Any]]]) -> dict[str, Any]:
    """Client and per-stage server latency from (client ms, response) samples, the tokens
    served, the items per section and the notes (what was degraded)."""
    timings = [data.get("timings_ms") or {} for _, data in measured]
    client = [elapsed for elapsed, _ in measured]
    tokens = [int(data["total_tokens"]) for _, data in measured]
    items: Counter[str] = Counter()
    for _, data in measured:
        for section in data.get("sections", []):
            items[section["name"]] += len(section["items"])
    notes = Counter(note for _, data in measured for note in data.get("notes", []))
    client_summary = summary(client)
    p95 = client_summary["p95"]
    return {
        "n": len(measured),
        "max_tokens": MAX_TOKENS,
        "client_ms": client_summary,
        "server_ms": {
            stage: summary([t[stage] for t in timings if stage in t])
            for stage in ("total", *STAGES)
        },
        "target_p95_ms": TARGET_P95_MS,
        "meets_target": None if p95 is None else p95 < TARGET_P95_MS,
        "total_tokens": summary([float(value) for value in tokens]),
        "mean_items": {
            name: round(count / len(measured), 2) for name, count in sorted(items.items())
        },
        "query_cache_hits": sum(1 for t in timings if t.get("embed_query", 1.0) < CACHE_HIT_MS),
        "notes": dict(notes),
    }
