"""The room phases of bench/run.py: a room's buffer search, its working memory, and how
fast the worker summarizes an overflowing room (the offline summarizer when the hub has
no LLM_BASE_URL, as here). Each runs in a room of its own, named below, and adds its
figures to the run's results: ``buffer``, ``working_memory`` and ``summaries``."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bench.client import ApiError, encode, percentile, summary
from bench.phases import Bench, K

ROOM_PHASES = ("buffer", "working", "summaries")
BUFFER_ROOM = "bench-buffer"
WORKING_ROOM = "bench-working"
SUMMARY_ROOM = "bench-summaries"
BUFFER_MESSAGES = 100
# capacity 10 x 10 = 100: the room holds exactly its capacity, so nothing is summarized
BUFFER_SETTINGS = {"max_size": 10, "buffer_multiplier": 10, "summary_batch_size": 10}
WORKING_ITEMS = 1_000
WORKING_SETTINGS = {"max_memory_mb": 50}  # 1,000 turns take ~2 MB: none is dropped (FIFO)
# capacity 10: every 10 messages past the first 10 make one summary
SUMMARY_SETTINGS = {
    "max_size": 10, "buffer_multiplier": 1, "summary_batch_size": 10, "summarize": True,
}  # fmt: skip
SUMMARY_WRITE_BATCH = 100
NO_CACHE = (
    "none: each search reads the room's messages and their vectors from PostgreSQL and "
    "ranks them in a new BufferMemory (only query vectors are cached, and the query "
    "texts here are all new to that cache)"
)


def room_phases_run(bench: Bench, names: tuple[str, ...] = ROOM_PHASES) -> None:
    """The named room phases, in the order of ROOM_PHASES."""
    phases = {"buffer": buffer_phase, "working": working_phase, "summaries": summaries_phase}
    for name in ROOM_PHASES:
        if name in names:
            phases[name](bench)


def room_messages_planned(summary_messages: int) -> int:
    """Messages the room phases write (working-memory items are not memories)."""
    return BUFFER_MESSAGES + summary_messages - summary_messages % SUMMARY_WRITE_BATCH


# --- buffer -----------------------------------------------------------------------------


def buffer_phase(bench: Bench) -> None:
    """Buffer search p50/p95 in a room of exactly 100 embedded messages, and the window."""
    plan = bench.plan
    bench.wait_embedded("before buffer")
    bench.phase("buffer_setup", f"buffer: a room of {BUFFER_MESSAGES} messages, until embedded")
    room_prepare(bench, BUFFER_ROOM, {"buffer": BUFFER_SETTINGS})
    messages = messages_for(bench, BUFFER_ROOM, BUFFER_MESSAGES)
    bench.api.post("/api/v1/memories/batch/", encode({"memories": messages}))
    bench.wait_embedded("buffer room")
    held = room_counts(bench, BUFFER_ROOM)
    name = "buffer"
    bench.phase(
        name,
        f"buffer search in a room of {held['active_messages']} messages: "
        f"{plan.search_n} searches, then {plan.search_n} window reads",
    )
    path = f"/api/v1/rooms/{BUFFER_ROOM}/buffer/"
    measured = []
    for round_ in range(plan.search_warmup + plan.search_n):
        payload = {"query": next(bench.queries), "limit": K}
        data, elapsed = bench.api.post(path + "search/", encode(payload), expect=200)
        if round_ >= plan.search_warmup:
            measured.append((elapsed, data))
    windows = [bench.api.get_timed(path)[1] for _ in range(plan.search_n)]
    answers = [data for _, data in measured]
    bench.results["buffer"] = {
        "room_messages": held["active_messages"],
        "room_summaries": held["summaries"],
        "settings": BUFFER_SETTINGS,
        "capacity": BUFFER_SETTINGS["max_size"] * BUFFER_SETTINGS["buffer_multiplier"],
        "limit": K,
        "cache": None,
        "cache_note": NO_CACHE,
        "search": timed_figures(measured),
        "methods": dict(Counter(data["method"] for data in answers)),
        "searched_min": min(data["searched"] for data in answers),
        "unembedded_max": max(data["unembedded"] for data in answers),
        "mean_results": round(sum(len(data["results"]) for data in answers) / len(answers), 2),
        "window_get": {"client_ms": summary(windows)},
        "foreign_cpu_cores": bench.foreign(name),
    }


# --- working memory ---------------------------------------------------------------------


def working_phase(bench: Bench) -> None:
    """1,000 items written one by one, the first search (it embeds them all) timed
    apart, then the steady-state search p50/p95."""
    plan = bench.plan
    bench.wait_embedded("before working memory")
    room_prepare(bench, WORKING_ROOM, {"working": WORKING_SETTINGS})
    path = f"/api/v1/rooms/{WORKING_ROOM}/working/"
    bodies = [
        encode({"content": message["content"], "metadata": {"role": message["role"]}})
        for message in bench.take(WORKING_ITEMS)
    ]
    bench.phase("working_add", f"working memory: {WORKING_ITEMS:,} items, one POST each")
    adds = [bench.api.post(path, body)[1] for body in bodies]
    listed = bench.api.get(path)
    name = "working_search"
    bench.phase(
        name,
        f"working memory search over {listed['count']:,} items: the first (embeds them), "
        f"then {plan.search_n}",
    )

    def search() -> tuple[Any, float]:
        payload = {"query": next(bench.queries), "limit": K}
        return bench.api.post(path + "search/", encode(payload), expect=200)

    first, first_ms = search()
    measured = []
    for round_ in range(plan.search_warmup + plan.search_n):
        data, elapsed = search()
        if round_ >= plan.search_warmup:
            measured.append((elapsed, data))
    answers = [data for _, data in measured]
    bench.results["working_memory"] = {
        "items": listed["count"],
        "bytes": listed["bytes"],
        "max_bytes": listed["max_bytes"],
        "limit": K,
        "add_ms": summary(adds),
        "first_search": {
            "client_ms": round(first_ms, 2),
            "timings_ms": first["timings_ms"],
            "embedded": first["embedded"],
            "searched": first["searched"],
            "method": first["method"],
        },
        "search": timed_figures(measured),
        "embedded_after_first": sum(data["embedded"] for data in answers),
        "methods": dict(Counter(data["method"] for data in answers)),
        "mean_results": round(sum(len(data["results"]) for data in answers) / len(answers), 2),
        "foreign_cpu_cores": bench.foreign(name),
    }


# --- summaries --------------------------------------------------------------------------


@dataclass(frozen=True)
class SummaryRow:
    """One summary memory as the database holds it."""

    created_at: datetime
    seconds: float | None  # metadata.seconds: the summarizer's own time
    token_count: int | None
    messages: int | None
    summarizer: str | None
    fallback: bool


def summaries_phase(bench: Bench) -> None:
    """Write M messages into a room of capacity 10 as fast as the API takes them, wait
    until the worker has summarized it down to capacity and embedded everything, and
    read the throughput from the database's times."""
    plan = bench.plan
    count = plan.summary_messages - plan.summary_messages % SUMMARY_WRITE_BATCH
    capacity = SUMMARY_SETTINGS["max_size"] * SUMMARY_SETTINGS["buffer_multiplier"]
    bench.wait_embedded("before summaries")
    room_prepare(bench, SUMMARY_ROOM, {"buffer": SUMMARY_SETTINGS})
    bodies = [
        encode({"memories": messages_for(bench, SUMMARY_ROOM, SUMMARY_WRITE_BATCH)})
        for _ in range(count // SUMMARY_WRITE_BATCH)
    ]
    name = "summaries"
    bench.phase(
        name,
        f"summaries: {count:,} messages in batches of {SUMMARY_WRITE_BATCH} into a room of "
        f"capacity {capacity}, until summarized down to it and embedded",
    )
    started = time.perf_counter()
    latencies = [bench.api.post("/api/v1/memories/batch/", body)[1] for body in bodies]
    written = time.perf_counter()
    done = summaries_wait(bench, SUMMARY_ROOM, capacity)
    figures = summaries_figures(
        first_write=bench.sql(
            "SELECT min(m.created_at) FROM memories_memory m JOIN memories_room r "
            "ON r.id = m.room_id WHERE r.external_id = %s AND m.kind = 'message'",
            SUMMARY_ROOM,
        ),
        rows=summary_rows(bench, SUMMARY_ROOM),
        archived=room_counts(bench, SUMMARY_ROOM)["archived_messages"],
    )
    ingestion = bench.results.get("ingestion", {})
    bench.results["summaries"] = {
        "messages": count,
        "settings": SUMMARY_SETTINGS,
        "capacity": capacity,
        **figures,
        "writes_seconds": round(written - started, 2),
        "write_batch_ms": summary(latencies),
        "seconds_until_done": round(done - started, 2),
        "embedding_per_second": ingestion.get("per_second"),
        "raw_model_per_second": ingestion.get("raw_model_per_second"),
        "foreign_cpu_cores": bench.foreign(name),
    }


def summaries_wait(bench: Bench, room: str, capacity: int, stall_timeout: float = 240) -> float:
    """Poll until the room holds at most ``capacity`` active messages and nothing is
    pending embedding; returns the perf_counter time it was seen."""
    last_change = last_print = time.monotonic()
    last: tuple[int, ...] = ()
    while True:
        counts = room_counts(bench, room)
        now = (counts["active_messages"], counts["summaries"], bench.pending())
        if now[0] <= capacity and not now[2]:
            return time.perf_counter()
        if now != last:
            last, last_change = now, time.monotonic()
        if time.monotonic() - last_change > stall_timeout:
            raise RuntimeError(
                f"summaries: {now[0]} active messages, {now[1]} summaries and {now[2]} "
                f"pending memories unchanged for {stall_timeout} s; see {bench.hub.log_path}"
            )
        if time.monotonic() - last_print > 30:
            print(
                f"    summaries: {now[0]} active messages, {now[1]} summaries, {now[2]} pending",
                flush=True,
            )
            last_print = time.monotonic()
        time.sleep(0.25)


def summaries_figures(
    *, first_write: datetime | None, rows: list[SummaryRow], archived: int
) -> dict[str, Any]:
    """Throughput of the summaries (messages archived per second from the first write to
    the last summary), the summarizer's own time, and the summaries' token counts."""
    span = None
    if rows and first_write is not None:
        span = (max(row.created_at for row in rows) - first_write).total_seconds()
    seconds = [row.seconds for row in rows if row.seconds is not None]
    summarized = sum(row.messages or 0 for row in rows if row.seconds is not None)
    tokens = [float(row.token_count) for row in rows if row.token_count is not None]
    return {
        "summaries": len(rows),
        "archived_messages": archived,
        "span_seconds": None if span is None else round(span, 2),
        "messages_per_second": round(archived / span, 1) if span else None,
        "summarizer_seconds_total": round(sum(seconds), 2),
        "summarizer_seconds_mean": round(sum(seconds) / len(seconds), 3) if seconds else None,
        "summarizer_seconds_p95": _round(percentile(seconds, 0.95), 3),
        # the summarizer alone, as if nothing else (embedding, the queue) took time
        "summarizer_messages_per_second": (
            round(summarized / sum(seconds), 1) if seconds and sum(seconds) else None
        ),
        "summarizer_share_of_span": round(sum(seconds) / span, 3) if span else None,
        "token_count_p50": _round(percentile(tokens, 0.5), 1),
        "token_count_max": int(max(tokens)) if tokens else None,
        "summarizers": dict(Counter(row.summarizer or "?" for row in rows)),
        "fallbacks": sum(1 for row in rows if row.fallback),
    }


def summary_rows(bench: Bench, room: str) -> list[SummaryRow]:
    cursor = bench.db.execute(
        "SELECT m.created_at, (m.metadata->>'seconds')::float, "
        "(m.metadata->>'token_count')::int, (m.metadata->>'messages')::int, "
        "m.metadata->>'summarizer', m.metadata ? 'fallback_reason' "
        "FROM memories_memory m JOIN memories_room r ON r.id = m.room_id "
        "WHERE r.external_id = %s AND m.kind = 'summary' ORDER BY m.created_at",
        (room,),
    )
    return [SummaryRow(*row) for row in cursor.fetchall()]


# --- helpers ----------------------------------------------------------------------------


def room_prepare(bench: Bench, room: str, settings: dict[str, Any]) -> None:
    """Create the room and give it its own settings."""
    bench.api.call("POST", "/api/v1/rooms/", encode({"external_id": room}))
    status, data, _ = bench.api.call(
        "PATCH", f"/api/v1/rooms/{room}/", encode({"settings": settings})
    )
    if status != 200:
        raise ApiError(f"PATCH /api/v1/rooms/{room}/: {status} {str(data)[:500]}")


def messages_for(bench: Bench, room: str, count: int) -> list[dict[str, Any]]:
    """The next ``count`` LoCoMo turns of the stream, all in ``room`` from one user."""
    return [{**message, "room": room, "user": f"{room}-user"} for message in bench.take(count)]


def room_counts(bench: Bench, room: str) -> dict[str, int]:
    row = bench.db.execute(
        "SELECT count(*) FILTER (WHERE m.kind = 'message' AND m.status = 'active'), "
        "count(*) FILTER (WHERE m.kind = 'message' AND m.status = 'archived'), "
        "count(*) FILTER (WHERE m.kind = 'summary') "
        "FROM memories_memory m JOIN memories_room r ON r.id = m.room_id "
        "WHERE r.external_id = %s",
        (room,),
    ).fetchone()
    assert row is not None
    return dict(zip(("active_messages", "archived_messages", "summaries"), row, strict=True))


def timed_figures(measured: list[tuple[float, dict[str, Any]]]) -> dict[str, Any]:
    """Client latency and each part of the server's timings_ms from (ms, response) pairs."""
    timings = [data.get("timings_ms") or {} for _, data in measured]
    names = list(dict.fromkeys(name for t in timings for name in t))
    return {
        "client_ms": summary([elapsed for elapsed, _ in measured]),
        "server_ms": {name: summary([t[name] for t in timings if name in t]) for name in names},
        "query_cache_hits": sum(1 for t in timings if t.get("embed_query", 1.0) < 0.5),
    }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
