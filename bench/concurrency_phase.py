"""The concurrency phase of bench/run.py: agents reading and writing at the same time.

Right after each level's searches, 1, 4 and 16 client threads, each on its own
persistent HTTP connection, each repeating a cycle of SEARCHES_PER_WRITE searches
(POST /api/v1/search/, auto mode, a random user's filter, k=10, LoCoMo questions from
the run's query stream) and one single write (POST /api/v1/memories/, the next LoCoMo
message) for a fixed time after one unmeasured cycle each. Per client count: searches
per second, search p50/p95, write p50/p95 (the HTTP round trip), the p50/p95 of the
server's search timings (the query embedding, the wait for it, any wait for a search
slot, the total), errors, and the other-CPU load and load average meanwhile. A write
is ~2 ms of work: its p95 under search load shows whether writes queue behind searches.

Figures go to ``results["concurrency"]``, one entry per level. The worker embeds the
phase's writes meanwhile, as it would in production.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench.client import Api, encode, summary
from bench.corpus import USERS
from bench.phases import Bench, K

CONCURRENCY_PHASES = ("concurrency",)
CLIENTS = (1, 4, 16)
SEARCHES_PER_WRITE = 4
# issue 16's targets at 10,000 memories with 16 clients
TARGET_SEARCHES_PER_SECOND = 62.0  # twice the 31 req/s measured at cefb49b
TARGET_SEARCH_P95_MS = 250.0
TARGET_WRITE_P95_MS = 25.0
SERVER_PARTS = ("total", "embed_query", "embed_wait", "search_wait")


def concurrency_phases_run(bench: Bench, names: tuple[str, ...] = CONCURRENCY_PHASES) -> None:
    """A try-out's --only: the phase at the memories there are."""
    if "concurrency" in names:
        concurrency_phase(bench)


def phase_seconds(search_n: int) -> float:
    """Measured seconds per client count: 10 in the quick run (search_n 50), 30 in the
    full one (150)."""
    return max(10.0, search_n / 5)


def concurrency_phase(bench: Bench, clients: tuple[int, ...] = CLIENTS) -> None:
    """Each client count in turn at the memories there are; the figures under
    results["concurrency"]."""
    bench.wait_embedded("before concurrency")
    level = bench.memories()
    seconds = phase_seconds(bench.plan.search_n)
    rows = []
    for count in clients:
        name = f"concurrency_{level}_{count}"
        bench.phase(
            name,
            f"concurrency at {level:,} memories: {count} client(s), {SEARCHES_PER_WRITE} "
            f"searches per write, {seconds:.0f} s",
        )
        load_before = os.getloadavg()
        row = clients_run(bench, count, seconds)
        row["load_average_before"] = [round(x, 2) for x in load_before]
        row["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        row["foreign_cpu_cores"] = bench.foreign(name)
        row["cores_by_role"] = bench.monitor.cores_by_role(name)
        rows.append(row)
        bench.wait_embedded("after concurrency")  # the next count starts from no backlog
    bench.results.setdefault("concurrency", []).append(
        {
            "memories": level,
            "searches_per_write": SEARCHES_PER_WRITE,
            "seconds": seconds,
            "k": K,
            "rows": rows,
            "targets": {
                "clients": 16,
                "searches_per_second": TARGET_SEARCHES_PER_SECOND,
                "search_p95_ms": TARGET_SEARCH_P95_MS,
                "write_p95_ms": TARGET_WRITE_P95_MS,
            },
        }
    )


@dataclass
class Samples:
    """One client's measured requests: (kind, finished at, milliseconds, server timings)."""

    requests: list[tuple[str, float, float, dict[str, float]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Feed:
    """The bench's query and message streams shared by client threads (a generator and a
    counter are not thread-safe)."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.lock = threading.Lock()

    def query(self) -> str:
        with self.lock:
            return next(self.bench.queries)

    def message(self) -> dict[str, Any]:
        with self.lock:
            return self.bench.take(1)[0]


def clients_run(bench: Bench, count: int, seconds: float) -> dict[str, Any]:
    """``count`` clients for ``seconds`` after a warm-up cycle each; their figures."""
    feed = Feed(bench)
    ready = threading.Barrier(count + 1)
    window: dict[str, float] = {}
    samples = [Samples() for _ in range(count)]
    threads = [
        threading.Thread(
            target=_client,
            args=(bench.api.port, bench.api.headers, feed, ready, window, samples[i], i),
            name=f"bench-client-{i}",
        )
        for i in range(count)
    ]
    for thread in threads:
        thread.start()
    ready.wait()  # every client has its connection and has done its warm-up cycle
    window["start"] = time.perf_counter()
    window["end"] = window["start"] + seconds
    ready.wait()
    for thread in threads:
        thread.join()
    return clients_figures(count, samples, window["start"], window["end"])


def _client(
    port: int, headers: dict[str, str], feed: Feed, ready: threading.Barrier,
    window: dict[str, float], samples: Samples, number: int,
) -> None:  # fmt: skip
    api = Api(port, "")
    api.headers = headers
    rng = random.Random(1000 + number)
    try:
        _cycle(api, feed, rng, None)  # warm-up: the connection, this thread's first request
        ready.wait()
        ready.wait()  # the window is set
        while time.perf_counter() < window["end"]:
            _cycle(api, feed, rng, samples)
    finally:
        api.close()


def _cycle(api: Api, feed: Feed, rng: random.Random, samples: Samples | None) -> None:
    """SEARCHES_PER_WRITE searches, then a write; each timed into ``samples``."""
    for _ in range(SEARCHES_PER_WRITE):
        user = f"user-{rng.randrange(USERS):03d}"
        body = {"query": feed.query(), "mode": "auto", "k": K, "user": user}
        _request(api, "search", "/api/v1/search/", body, (200,), samples)
    _request(api, "write", "/api/v1/memories/", feed.message(), (200, 201), samples)


def _request(
    api: Api, kind: str, path: str, body: dict[str, Any], expect: tuple[int, ...],
    samples: Samples | None,
) -> None:  # fmt: skip
    try:
        status, data, elapsed = api.call("POST", path, encode(body))
    except (OSError, ValueError) as exc:  # counted; the next request reconnects
        api.connection = None
        if samples is not None:
            samples.errors.append(f"{kind}: {type(exc).__name__}: {exc}"[:200])
        return
    if samples is None:
        return
    if status not in expect:
        samples.errors.append(f"{kind}: {status} {str(data)[:150]}")
        return
    timings: dict[str, float] = {}
    if kind == "search" and isinstance(data, dict):
        timings = data.get("timings_ms") or {}
    # the Server-Timing header: app (in the hub), db, cpu, queue (the request's thread)
    timings = {**timings, **{f"http.{name}": ms for name, ms in api.server_timing.items()}}
    samples.requests.append((kind, time.perf_counter(), elapsed, timings))


def clients_figures(count: int, samples: list[Samples], start: float, end: float) -> dict[str, Any]:
    """Rates over the window (requests finished in it) and latencies of every request."""
    requests = [request for client in samples for request in client.requests]
    searches = [r for r in requests if r[0] == "search"]
    writes = [r for r in requests if r[0] == "write"]
    seconds = end - start

    def rate(items: list[tuple[str, float, float, dict[str, float]]]) -> float:
        return round(sum(1 for r in items if r[1] <= end) / seconds, 1)

    server = {
        part: summary([r[3][part] for r in searches if part in r[3]])
        for part in SERVER_PARTS
        if any(part in r[3] for r in searches)
    }
    errors = [error for client in samples for error in client.errors]
    return {
        "clients": count,
        "seconds": round(seconds, 2),
        "searches_per_second": rate(searches),
        "writes_per_second": rate(writes),
        "search_ms": summary([r[2] for r in searches]),
        "write_ms": summary([r[2] for r in writes]),
        # the write's time inside the hub (Server-Timing): the rest of write_ms is spent
        # before the web process's thread has it (the accept queue) and on the wire
        "write_server_ms": {
            name: summary([r[3][f"http.{name}"] for r in writes if f"http.{name}" in r[3]])
            for name in ("app", "db", "cpu", "queue")
            if any(f"http.{name}" in r[3] for r in writes)
        },
        "search_server_ms": server,
        "errors": len(errors),
        "error_examples": sorted(set(errors))[:5],
    }
