"""The concurrency workload of bench/mem0_runner.py --concurrency (in mem0's venv:
standard library and mem0 only): the hub's memories added, then 1, 4 and 16 threads
each repeating searches of a random user and one add, as the hub's clients do in
make bench (bench/mem0_concurrency.py)."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from mem0_runner import add, adds, cpu_seconds, log, summary, versions


class Feed:
    """The workload's query texts and messages, handed out in order to client threads
    (wrapping around)."""

    def __init__(self, queries: list[str], messages: list[dict[str, Any]]) -> None:
        self.queries, self.messages = queries, messages
        self.next_query = self.next_message = 0
        self.lock = threading.Lock()

    def query(self) -> str:
        with self.lock:
            self.next_query += 1
            return self.queries[(self.next_query - 1) % len(self.queries)]

    def message(self) -> dict[str, Any]:
        with self.lock:
            self.next_message += 1
            return self.messages[(self.next_message - 1) % len(self.messages)]


def clients_run(memory: Any, feed: Feed, settings: dict[str, Any], count: int) -> dict[str, Any]:
    """``count`` threads for ``settings["seconds"]`` after an unmeasured cycle each, each
    cycle ``searches_per_write`` searches then one add, as the hub's clients do."""
    k, threshold = int(settings["k"]), float(settings["threshold"])
    seconds, users = float(settings["seconds"]), int(settings["users"])
    ready = threading.Barrier(count + 1)
    window: dict[str, float] = {}
    samples: list[list[tuple[str, float, float]]] = [[] for _ in range(count)]
    errors: list[str] = []

    def cycle(rng: random.Random, out: list[tuple[str, float, float]] | None) -> None:
        for _ in range(int(settings["searches_per_write"])):
            user = f"user-{rng.randrange(users):03d}"
            timed(out, "search", memory.search, feed.query(), top_k=k,
                  filters={"user_id": user}, threshold=threshold)  # fmt: skip
        timed(out, "write", add, memory, feed.message())

    def timed(
        out: list[tuple[str, float, float]] | None, kind: str, call: Any, *args: Any,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        started = time.perf_counter()
        try:
            call(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - counted, as the hub's errors are
            if out is not None:
                errors.append(f"{kind}: {type(exc).__name__}: {exc}"[:200])
            return
        if out is not None:
            now = time.perf_counter()
            out.append((kind, now, (now - started) * 1000))

    def client(number: int) -> None:
        rng = random.Random(1000 + number)  # the hub's clients' seeds
        cycle(rng, None)
        ready.wait()
        ready.wait()
        while time.perf_counter() < window["end"]:
            cycle(rng, samples[number])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    ready.wait()
    cpu = cpu_seconds()
    window["start"] = time.perf_counter()
    window["end"] = window["start"] + seconds
    ready.wait()
    for thread in threads:
        thread.join()
    done = [sample for client_samples in samples for sample in client_samples]
    return {
        "clients": count,
        **_figures(done, window["end"], seconds),
        "cpu_seconds_runner": round(cpu_seconds() - cpu, 2),
        "errors": len(errors),
        "error_examples": sorted(set(errors))[:5],
    }


def _figures(done: list[tuple[str, float, float]], end: float, seconds: float) -> dict[str, Any]:
    """Rates over the window (what finished in it) and latencies of every call."""
    searches_ms = [ms for kind, _, ms in done if kind == "search"]
    writes_ms = [ms for kind, _, ms in done if kind == "write"]

    def rate(kind: str) -> float:
        return round(sum(1 for k_, at, _ in done if k_ == kind and at <= end) / seconds, 1)

    return {
        "seconds": seconds,
        "searches_per_second": rate("search"),
        "writes_per_second": rate("write"),
        "search_ms": summary(searches_ms),
        "write_ms": summary(writes_ms),
    }


def concurrency(memory: Any, workload: dict[str, Any]) -> dict[str, Any]:
    """The hub's concurrency phase against mem0: its memories added, then each client
    count in turn (a progress line "phase <name>" starts each part)."""
    settings = workload["settings"]
    log(f"phase mem0_load: adding {len(workload['memories'])} memories, one per call ...")
    loaded = adds(memory, workload["memories"])
    feed = Feed(workload["queries"], workload["messages"])
    rows = []
    for count in settings["clients"]:
        log(f"phase mem0_concurrency_{count}: {count} client(s), {settings['seconds']:.0f} s")
        rows.append(clients_run(memory, feed, settings, count))
        row = rows[-1]
        log(
            f"{count} client(s): {row['searches_per_second']} searches/s, search p95 "
            f"{row['search_ms']['p95']} ms, write p95 {row['write_ms']['p95']} ms, "
            f"{row['errors']} errors"
        )
    import torch

    return {
        "versions": versions(),
        "torch_threads": torch.get_num_threads(),
        "maxconn": settings.get("maxconn"),
        "load": loaded,
        "rows": rows,
    }
