"""A model switch of a large project under searches: the re-embedding throughput, and the
searches' latency before the switch, while its job runs and after it is cancelled.

    .venv/bin/python bench/switch_load.py [--memories 100000] [--minutes 10] [--to mpnet-base]

A hub of its own (`manage.py hub` on a scratch folder, the local ONNX model, the worker
pools as `make run` starts them). The project gets SOURCES real LoCoMo turns through the
batch API, embedded by the worker, then bulk rows up to MEMORIES (bench/bulk.py: each
joins two real turns, its vector their normalized sum; the indexes rebuilt after), spread
over 100 users. Then one client searches without pause (auto mode, k 10, a random user's
memories, LoCoMo questions): SEARCH_SECONDS before the switch; then the switch to TO is
started through the API and the client searches for MINUTES while the job embeds, the
switch's progress read every 10 s; then the switch is cancelled and the client searches
SEARCH_SECONDS more. The throughput is the memories the job embedded per second after its
first minute (the new model's first load and ONNX session are in that minute), beside the
rate and ETA the API reports; the CPU share is the cores the worker processes used while
the job ran (they run EMBEDDING_WORKER_NICE below searches). A switch of 100,000 to the
slower model takes hours on 2 cores: the bench measures its rate, it does not wait for it.
Not part of the tests; BENCHMARKS.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bulk import BulkLoader  # noqa: E402
from bench.client import Api, encode, percentile  # noqa: E402
from bench.corpus import USERS, corpus_load, query_stream  # noqa: E402
from bench.phases import sql_value  # noqa: E402
from bench.stack import REPO, Hub, free_port, hub_env, scratch_reset  # noqa: E402
from bench.worker_pools import models_copy  # noqa: E402

PROJECT = "switch"
BATCH = 100
PROGRESS_EVERY = 10.0  # seconds between two reads of the switch's progress
WARM_UP = 60.0  # seconds of the job left out of its throughput (the new model loads)


def sources_write(api: Api, db: psycopg.Connection, args: argparse.Namespace) -> float:
    """SOURCES LoCoMo turns through the batch API, spread over the users; the seconds
    until all are embedded."""
    messages = corpus_load(args.locomo).messages(0, args.sources)
    started = time.monotonic()
    for start in range(0, len(messages), BATCH):
        api.post("/api/v1/memories/batch/", encode({"memories": messages[start : start + BATCH]}))
    while sql_value(db, "SELECT count(*) FROM memories_memory WHERE embedding_status = 'pending'"):
        time.sleep(0.5)
        if time.monotonic() - started > 1800:
            raise RuntimeError("the sources were not embedded within 30 minutes")
    return time.monotonic() - started


class Searcher:
    """One client searching without pause; its latencies per phase."""

    def __init__(self, api: Api, args: argparse.Namespace) -> None:
        self.api = api
        self.queries = query_stream(corpus_load(args.locomo))
        self.rng = random.Random(40)

    def one(self) -> float:
        payload = {
            "query": next(self.queries),
            "k": 10,
            "user": f"user-{self.rng.randrange(USERS):03d}",
        }
        return self.api.post("/api/v1/search/", encode(payload), expect=200)[1]

    def run(self, seconds: float, tick: Any = None) -> dict[str, Any]:
        """Searches for ``seconds``; ``tick()`` is called every PROGRESS_EVERY seconds."""
        latencies: list[float] = []
        end, next_tick = time.monotonic() + seconds, time.monotonic()
        while time.monotonic() < end:
            latencies.append(self.one())
            if tick is not None and time.monotonic() >= next_tick:
                tick()
                next_tick += PROGRESS_EVERY
        return {
            "searches": len(latencies),
            "p50_ms": percentile(latencies, 0.5),
            "p95_ms": percentile(latencies, 0.95),
            "p99_ms": percentile(latencies, 0.99),
        }


def worker_cpu(hub: Hub) -> float:
    """CPU seconds (user + system) the worker processes, main and pool, used so far."""
    roles = hub.role_processes()
    total = 0.0
    for process in roles["worker_main"] + roles["worker_pool"]:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def switch_measure(hub: Hub, api: Api, searcher: Searcher, args: argparse.Namespace) -> Any:
    """The switch started, searched under for MINUTES, its progress sampled; cancelled."""
    api.post("/api/v1/embedding/switch/", encode({"model": args.to}), expect=202)
    samples: list[dict[str, Any]] = []
    started, cpu_before = time.monotonic(), worker_cpu(hub)

    def progress() -> None:
        switch = api.get("/api/v1/embedding/")["switch"]
        samples.append({"t": round(time.monotonic() - started, 1), **switch})
        print(
            f"  {samples[-1]['t']:7.1f} s: {switch['done']:,}/{switch['total']:,} embedded, "
            f"API rate {switch['rate_per_second']}/s, ETA {switch['eta_seconds']} s",
            flush=True,
        )

    searched = searcher.run(args.minutes * 60, tick=progress)
    progress()
    cpu = (worker_cpu(hub) - cpu_before) / (time.monotonic() - started)
    api.post("/api/v1/embedding/switch/cancel/", b"{}", expect=200)
    warm = [s for s in samples if s["t"] >= WARM_UP]
    rate = (
        (warm[-1]["done"] - warm[0]["done"]) / (warm[-1]["t"] - warm[0]["t"])
        if len(warm) > 1
        else None
    )
    return searched, samples, {"rate_per_second": rate, "worker_cores": round(cpu, 2)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    scratch_reset(args.data_dir)
    args.data_dir.mkdir(parents=True)
    models_copy(args.data_dir)
    hub = Hub(args.data_dir, free_port(), hub_env(args.data_dir, 0, 16), [])
    print(f"starting a hub in {args.data_dir}", flush=True)
    print(f"  ready in {hub.start(timeout=300):.0f} s", flush=True)
    try:
        api = Api(hub.port, hub.api_key_unthrottled(PROJECT))
        db = psycopg.connect(hub.database_conninfo(), autocommit=True)
        result: dict[str, Any] = {"sources_seconds": round(sources_write(api, db, args), 1)}
        print(f"  {args.sources:,} sources embedded in {result['sources_seconds']} s", flush=True)
        loader = BulkLoader(conninfo=hub.database_conninfo(), project=PROJECT)
        result["bulk"] = loader.load(args.memories - args.sources)
        loader.close()
        searcher = Searcher(api, args)
        searcher.run(20)  # warm-up, not measured
        result["before"] = searcher.run(args.search_seconds)
        print(f"  before: {result['before']}", flush=True)
        result["during"], result["progress"], result["switch"] = switch_measure(
            hub, api, searcher, args
        )
        print(f"  during: {result['during']}\n  switch: {result['switch']}", flush=True)
        result["after"] = searcher.run(args.search_seconds)
        print(f"  after cancel: {result['after']}", flush=True)
        return result
    finally:
        print(f"  stopped: {hub.stop()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--sources", type=int, default=2_000, help="real turns written first")
    parser.add_argument("--minutes", type=float, default=10.0, help="searched under the switch")
    parser.add_argument("--search-seconds", type=float, default=120.0, help="before and after")
    parser.add_argument("--to", default="mpnet-base", help="the model switched to")
    parser.add_argument("--locomo", type=Path, default=REPO.parent / "shared/data/locomo-dev.json")
    parser.add_argument("--data-dir", type=Path, default=REPO / "var" / "bench-switch")
    parser.add_argument("--json", type=Path, help="write the figures there too")
    args = parser.parse_args()
    started = time.monotonic()
    result = run(args)
    result["seconds"] = round(time.monotonic() - started)
    print(json.dumps({k: v for k, v in result.items() if k != "progress"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
