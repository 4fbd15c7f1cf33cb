#!/usr/bin/env python
"""MemoryHub benchmarks against the real stack: write latency, ingestion throughput,
search latency, peak memory.

    make bench          # full: searches at 10,000, 100,000 and 1,000,000 memories
    make bench-quick    # quick: searches at 10,000 memories
    .venv/bin/python bench/run.py --quick --torch-threads 1 --wait-quiet 300
    .venv/bin/python bench/run.py --levels 30000 --search-n 10 --ingest 2000  # try-out

On a quiet 2-core machine the full run takes about 15 minutes (the 1M bulk load ~5 of
them, most of it the HNSW index build; the bare model and ingestion ~4; searches and
recall at 1M ~3) and the quick one about 3; other work on the machine stretches them.

Starts its own hub (`manage.py hub --no-demo` on a free port) on a scratch data
folder (var/bench/, deleted at the start of each run, never the user's var/), makes
an API key with `manage.py create_api_key --project bench`, and measures over real
HTTP from one client thread on one persistent connection:

1. writes: single (POST /api/v1/memories/) and batches of 100 (…/batch/), p50/p95,
   while the Celery worker embeds them (the normal case) and with the worker's pool
   process paused (SIGSTOP: as if embedding ran on another machine);
2. ingestion: from the first write until 10,000 messages are all embedded by the
   worker (messages/s), beside the bare model's batch throughput on the same texts in
   this process with the worker's torch thread count, and the ratio;
3. search: p50/p95 per mode (auto, vector, keyword, hybrid), with and without a user
   filter, with the server's own timings (query embedding apart), at each level: 10,000
   memories (the ingested ones) and (full) 100,000 and 1,000,000, bulk-loaded straight
   into PostgreSQL by bench/bulk.py (pairs of real memories, the normalized sum of their
   real vectors; the run measures how close that is to the model's embedding of the
   joined text), with the HNSW and keyword indexes rebuilt after each load;
4. HNSW recall@10 at each level: the hub's vector search (a raw query vector through
   the API) against an exact scan in SQL, with and without a user filter (bench/recall.py);
5. peak RSS of the web and worker processes.

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
import random
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402
import psycopg  # noqa: E402

from bench.bulk import BulkLoader  # noqa: E402
from bench.client import Api, encode, summary  # noqa: E402
from bench.corpus import USERS, Corpus, corpus_load, distinct_texts, query_stream  # noqa: E402
from bench.model import ENCODE_OPTIONS, model_load, model_throughput  # noqa: E402
from bench.recall import hnsw_recall  # noqa: E402
from bench.report import report_print  # noqa: E402
from bench.stack import REPO, Hub, Monitor, free_port, quiet_wait, scratch_reset  # noqa: E402

MODES = ("auto", "vector", "keyword", "hybrid")
K = 10
PROJECT = "bench"


@dataclass(frozen=True)
class Plan:
    warmup_writes: int
    single_writes: int
    batches: int
    batch_size: int
    ingest: int
    ingest_batch: int
    raw_texts: int  # how many of the ingested texts the bare model encodes
    raw_sorted: bool  # also encode them in one length-sorted call
    search_n: int  # measured searches per mode and filter
    search_warmup: int
    levels: tuple[int, ...]  # memories at the bulk-loaded search levels after the first
    recall_n: int  # HNSW recall queries per filter and level


PLANS = {
    "quick": Plan(
        warmup_writes=20, single_writes=200, batches=20, batch_size=100,
        ingest=10_000, ingest_batch=100, raw_texts=2_000, raw_sorted=False,
        search_n=50, search_warmup=5, levels=(), recall_n=30,
    ),
    "full": Plan(
        warmup_writes=50, single_writes=500, batches=50, batch_size=100,
        ingest=10_000, ingest_batch=100, raw_texts=10_000, raw_sorted=True,
        search_n=150, search_warmup=10, levels=(100_000, 1_000_000), recall_n=50,
    ),
}  # fmt: skip


class Bench:
    def __init__(
        self, *, api: Api, db: psycopg.Connection, hub: Hub, monitor: Monitor, corpus: Corpus,
        plan: Plan, threads: int, embed_batch: int, results: dict[str, Any],
    ) -> None:  # fmt: skip
        self.api, self.db, self.hub, self.monitor = api, db, hub, monitor
        self.corpus, self.plan, self.results = corpus, plan, results
        self.threads, self.embed_batch = threads, embed_batch
        self.next_message = 0
        self.queries = query_stream(corpus)
        self.rng = random.Random(11)
        self._model: Any = None
        self._loader: BulkLoader | None = None
        self._recall_queries: tuple[Any, list[str]] | None = None

    # --- helpers -----------------------------------------------------------------

    def phase(self, name: str, text: str) -> None:
        self.monitor.phase = name
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    def take(self, count: int) -> list[dict[str, Any]]:
        messages = self.corpus.messages(self.next_message, count)
        self.next_message += count
        return messages

    def sql(self, query: str, *params: Any) -> Any:
        return self.db.execute(query, params).fetchone()[0]

    def pending(self) -> int:
        return int(
            self.sql("SELECT count(*) FROM memories_memory WHERE embedding_status = 'pending'")
        )

    def memories(self) -> int:
        return int(self.sql("SELECT count(*) FROM memories_memory WHERE status = 'active'"))

    def wait_embedded(self, label: str, stall_timeout: float = 240) -> float:
        """Poll until no memory is pending; returns the perf_counter time it was seen."""
        last, last_change, last_print = self.pending(), time.monotonic(), time.monotonic()
        while last:
            time.sleep(0.1)
            now = self.pending()
            if now != last:
                last, last_change = now, time.monotonic()
            if time.monotonic() - last_change > stall_timeout:
                raise RuntimeError(f"{label}: {now} memories stayed pending for {stall_timeout} s")
            if time.monotonic() - last_print > 30:
                print(f"    {label}: {now} pending", flush=True)
                last_print = time.monotonic()
        failed = self.sql("SELECT count(*) FROM memories_memory WHERE embedding_status = 'failed'")
        if failed:
            raise RuntimeError(
                f"{label}: {failed} memories failed to embed; see {self.hub.log_path}"
            )
        return time.perf_counter()

    def write_singles(self, count: int) -> list[float]:
        bodies = [encode(message) for message in self.take(count)]
        return [self.api.post("/api/v1/memories/", body)[1] for body in bodies]

    def write_batches(self, count: int, size: int) -> list[float]:
        bodies = [encode({"memories": self.take(size)}) for _ in range(count)]
        return [self.api.post("/api/v1/memories/batch/", body)[1] for body in bodies]

    # --- phases ------------------------------------------------------------------

    def warmup(self) -> None:
        self.phase("warmup", "warm-up writes and searches (not measured)")
        self.write_singles(self.plan.warmup_writes)
        self.write_batches(3, self.plan.batch_size)
        self.wait_embedded("warm-up")
        for mode in MODES:
            for _ in range(3):
                self.search(mode, None)

    def raw_model(self) -> None:
        """The bare model in this process, on the texts the ingestion phase will write."""
        plan = self.plan
        text = f"bare model: {plan.raw_texts:,} texts in batches of {self.embed_batch}"
        self.phase("raw_model", text)
        messages = self.corpus.messages(self.next_message, plan.raw_texts)
        self.results["raw_model"] = model_throughput(
            texts=[message["content"] for message in messages],
            questions=[next(self.queries) for _ in range(100)],
            threads=self.threads,
            batch_size=self.embed_batch,
            sorted_too=plan.raw_sorted,
        )
        self.results["raw_model"]["foreign_cpu_cores"] = self.foreign("raw_model")

    def ingestion(self) -> None:
        plan = self.plan
        count = plan.ingest - plan.ingest % plan.ingest_batch
        self.wait_embedded("before ingestion")
        bodies = [
            encode({"memories": self.take(plan.ingest_batch)})
            for _ in range(count // plan.ingest_batch)
        ]
        self.phase(
            "ingestion",
            f"ingestion: {count:,} messages in batches of {plan.ingest_batch}, until all embedded",
        )
        started = time.perf_counter()
        latencies = [self.api.post("/api/v1/memories/batch/", body)[1] for body in bodies]
        written = time.perf_counter()
        done = self.wait_embedded("ingestion")
        seconds = done - started
        raw = self.results.get("raw_model", {}).get("per_second")
        rate = count / seconds
        self.results["ingestion"] = {
            "messages": count,
            "writes_seconds": round(written - started, 2),
            "seconds": round(seconds, 2),
            "per_second": round(rate, 1),
            "raw_model_per_second": raw,
            "ratio_to_raw_model": round(rate / raw, 3) if raw else None,
            "foreign_cpu_cores": self.foreign("ingestion"),
        }
        self.results.setdefault("writes", {})[f"ingestion_batch_{plan.ingest_batch}"] = (
            self.write_figures(
                "ingestion (worker embedding)", latencies, plan.ingest_batch, "ingestion"
            )
        )

    def write_figures(
        self, condition: str, latencies: list[float], size: int, phase: str
    ) -> dict[str, Any]:
        """Latency figures of one kind of write; the samples too, in order, to look for spikes."""
        return {
            "condition": condition,
            "request": f"batch of {size}" if size > 1 else "single",
            "per_request_ms": summary(latencies),
            "per_message_ms": summary([value / size for value in latencies]) if size > 1 else None,
            "foreign_cpu_cores": self.foreign(phase),
            "samples_ms": [round(value, 2) for value in latencies],
        }

    def writes(self) -> None:
        plan = self.plan
        writes = self.results.setdefault("writes", {})
        for paused in (False, True):
            self.wait_embedded("before writes")
            name = "writes_paused" if paused else "writes"
            condition = "worker paused" if paused else "worker embedding"
            pool = self.hub.role_processes()["worker_pool"] if paused else []
            for process in pool:
                process.suspend()
            try:
                counts = f"{plan.single_writes} single, {plan.batches} batches of {plan.batch_size}"
                self.phase(name, f"writes ({condition}): {counts}")
                singles = self.write_singles(plan.single_writes)
                batches = self.write_batches(plan.batches, plan.batch_size)
            finally:
                for process in pool:
                    process.resume()
            prefix = "paused" if paused else "live"
            writes[f"{prefix}_single"] = self.write_figures(condition, singles, 1, name)
            writes[f"{prefix}_batch_{plan.batch_size}"] = self.write_figures(
                condition, batches, plan.batch_size, name
            )
        self.phase("catch_up", "waiting for the worker to embed the writes")
        self.wait_embedded("after writes")

    def embed(self, texts: list[str]) -> Any:
        """Vectors of ``texts`` by the hub's model, loaded in this process on first use."""
        if self._model is None:
            self._model = model_load(self.threads)
        return self._model.encode(texts, batch_size=self.embed_batch, **ENCODE_OPTIONS)

    def bulk_load(self, level: int) -> bool:
        """Grow the project to ``level`` memories with bulk-loaded ones (bench/bulk.py);
        False if it has that many already."""
        self.wait_embedded("before bulk load")
        missing = level - self.memories()
        if missing <= 0:
            print(f"  level {level:,} skipped: {self.memories():,} memories already", flush=True)
            return False
        if self._loader is None:
            self._loader = BulkLoader(conninfo=self.hub.database_conninfo(), project=PROJECT)
            self.phase("bulk_approximation", "bulk load: how close are summed vectors?")
            self.results["bulk_approximation"] = self._loader.approximation(self.embed)
        name = f"bulk_{level}"
        self.phase(name, f"bulk load: {missing:,} memories, then rebuild the indexes")
        started = time.perf_counter()
        figures = self._loader.load(missing)
        figures["seconds"] = round(time.perf_counter() - started, 2)
        figures["level"] = level
        figures["foreign_cpu_cores"] = self.foreign(name)
        self.results.setdefault("bulk", []).append(figures)
        return True

    def recall(self) -> None:
        """HNSW recall@k of the hub's vector search against exact search (bench/recall.py)."""
        level = self.memories()
        name = f"recall_{level}"
        self.phase(name, f"HNSW recall@{K} at {level:,} memories: {self.plan.recall_n} per filter")
        if self._recall_queries is None:  # the same questions and users at every level
            texts = [next(self.queries) for _ in range(self.plan.recall_n)]
            rng = random.Random(13)
            users = [f"user-{rng.randrange(USERS):03d}" for _ in texts]
            self._recall_queries = (self.embed(texts), users)
        vectors, users = self._recall_queries
        filters = hnsw_recall(
            api=self.api, db=self.db, project=PROJECT, vectors=vectors, users=users, k=K
        )
        self.results.setdefault("recall", []).append(
            {"memories": level, "filters": filters, "foreign_cpu_cores": self.foreign(name)}
        )

    def close(self) -> None:
        if self._loader is not None:
            self._loader.close()

    def search(self, mode: str, user: str | None) -> tuple[float, dict[str, Any]]:
        payload: dict[str, Any] = {"query": next(self.queries), "mode": mode, "k": K}
        if user is not None:
            payload["user"] = user
        data, elapsed = self.api.post("/api/v1/search/", encode(payload), expect=200)
        return elapsed, data

    def search_level(self) -> None:
        plan = self.plan
        self.wait_embedded("before search")
        self.db.execute("ANALYZE")  # as autovacuum would soon: plans on current statistics
        level = self.memories()
        name = f"search_{level}"
        self.phase(name, f"search at {level:,} memories: {plan.search_n} per mode and filter")
        combos = [(mode, filtered) for mode in MODES for filtered in (False, True)]
        samples: dict[tuple[str, bool], list[tuple[float, dict[str, Any]]]] = {
            c: [] for c in combos
        }
        for round_ in range(plan.search_warmup + plan.search_n):
            for mode, filtered in combos:  # interleaved: drifts hit every mode alike
                user = f"user-{self.rng.randrange(USERS):03d}" if filtered else None
                sample = self.search(mode, user)
                if round_ >= plan.search_warmup:
                    samples[(mode, filtered)].append(sample)
        rows = []
        for (mode, filtered), measured in samples.items():
            # a user with no memories gets an empty answer without timings (none here once
            # every user has memories, but such a sample must not break the run)
            answered = [sample for sample in measured if "total" in sample[1]["timings_ms"]]
            if answered:
                rows.append(search_row(mode, filtered, answered))
        self.results.setdefault("search", []).append(
            {"memories": level, "k": K, "rows": rows, "foreign_cpu_cores": self.foreign(name)}
        )

    def foreign(self, phase: str) -> float | None:
        value = self.monitor.foreign_cpu(phase)
        return None if value is None else round(value, 2)


def search_row(mode: str, filtered: bool, measured: list[tuple[float, Any]]) -> dict[str, Any]:
    """Latency figures of one mode and filter from (client ms, response) samples."""
    timings = [data["timings_ms"] for _, data in measured]
    client = [elapsed for elapsed, _ in measured]
    embed = [t["embed_query"] for t in timings if "embed_query" in t]
    results = [len(data["results"]) for _, data in measured]

    def part(name: str) -> dict[str, Any] | None:
        values = [t[name] for t in timings if name in t]
        return summary(values) if values else None

    return {
        "mode": mode,
        "filter": "user" if filtered else "none",
        "client_ms": summary(client),
        "server_total_ms": part("total"),
        "embed_query_ms": part("embed_query"),
        "client_minus_embed_ms": summary(
            [ms - t.get("embed_query", 0.0) for ms, t in zip(client, timings, strict=True)]
        ),
        # the search's own cost beyond embedding the query (the keyword query and the
        # count run while the query is embedded)
        "server_minus_embed_ms": part_difference(timings, "total", "embed_query"),
        "vector_ms": part("vector"),
        "keyword_ms": part("keyword"),
        "query_cache_hits": sum(1 for value in embed if value < 0.5),
        "mean_results": round(sum(results) / len(results), 2),
        "short_results": sum(1 for count in results if count < K),
    }


def part_difference(
    timings: list[dict[str, float]], total: str, part: str
) -> dict[str, Any] | None:
    values = [t[total] - t.get(part, 0.0) for t in timings if total in t]
    return summary(values) if values else None


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


def hub_env(data_dir: Path, threads: int, embed_batch: int) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTEST_VERSION", "ACCESS_LOG")
    }
    env.update(
        MEMORYHUB_DATA_DIR=str(data_dir),
        DATABASE_URL="",  # empty, not unset: a developer's .env cannot point us elsewhere
        REDIS_URL="",
        EMBEDDING_PROVIDER="local",
        EMBEDDING_MODEL="all-MiniLM-L6-v2",
        EMBEDDING_DIMENSION="384",
        EMBEDDING_TORCH_THREADS=str(threads),
        EMBEDDING_BATCH_SIZE=str(embed_batch),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    return env


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
    parser.add_argument("--worker-concurrency", type=int, default=1)
    parser.add_argument(
        "--torch-threads", type=int, default=os.cpu_count() or 1,
        help="EMBEDDING_TORCH_THREADS of the hub and the bare-model run "
        "(default: one per core, as the hub does when it is unset)",
    )  # fmt: skip
    parser.add_argument(
        "--embed-batch", type=int, default=int(os.environ.get("EMBEDDING_BATCH_SIZE", 64))
    )
    parser.add_argument("--ingest", type=int, help="messages in the ingestion phase")
    parser.add_argument(
        "--levels", type=_levels, metavar="N,N",
        help="memories at the bulk-loaded search levels (full: 100000,1000000; '' for none)",
    )  # fmt: skip
    parser.add_argument("--search-n", type=int, help="measured searches per mode and filter")
    parser.add_argument(
        "--wait-quiet", type=float, default=0, metavar="SECONDS",
        help="first wait up to this long until other processes leave the CPU idle",
    )  # fmt: skip
    return parser.parse_args()


def main() -> int:
    args = arguments()
    mode = "quick" if args.quick else "full"
    plan = PLANS[mode]
    overrides = {"ingest": args.ingest, "levels": args.levels, "search_n": args.search_n}
    plan = replace(plan, **{key: value for key, value in overrides.items() if value is not None})
    plan = replace(plan, raw_texts=min(plan.raw_texts, plan.ingest))
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
    label = machine_label(mode)
    total_messages = (
        plan.warmup_writes + 3 * plan.batch_size + plan.ingest + 2 * plan.batches * plan.batch_size
    )
    results: dict[str, Any] = {
        "label": label,
        "config": {
            **asdict(plan),
            "web_workers": args.web_workers,
            "web_threads": 4,
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
    print(f"MemoryHub benchmark ({mode}); scratch data in {data_dir}", flush=True)
    scratch_reset(data_dir)
    port = args.port or free_port()
    hub = Hub(
        data_dir, port, hub_env(data_dir, args.torch_threads, args.embed_batch),
        ["--web-workers", str(args.web_workers),
         "--worker-concurrency", str(args.worker_concurrency)],
    )  # fmt: skip
    monitor = Monitor(hub)
    api: Api | None = None
    db: psycopg.Connection | None = None
    bench: Bench | None = None
    error = None
    started = time.monotonic()
    try:
        print(f"[{time.strftime('%H:%M:%S')}] starting the hub on port {port}", flush=True)
        results["hub_ready_seconds"] = round(hub.start(), 1)
        key = hub.manage("create_api_key", "--project", PROJECT, "--name", "bench").strip()
        monitor.start()
        api = Api(port, key)
        db = psycopg.connect(hub.database_conninfo(), autocommit=True)
        label["postgres"] = db.execute("SHOW server_version").fetchone()[0]
        label["pgvector"] = db.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()[0]
        bench = Bench(
            api=api, db=db, hub=hub, monitor=monitor, corpus=corpus, plan=plan,
            threads=args.torch_threads, embed_batch=args.embed_batch, results=results,
        )  # fmt: skip
        bench.warmup()
        bench.raw_model()
        bench.ingestion()
        bench.search_level()
        bench.recall()
        bench.writes()
        for level in plan.levels:
            if bench.bulk_load(level):
                bench.search_level()
                bench.recall()
        results["client_reconnects_after_error"] = api.reconnects_after_error
    except BaseException as exc:  # noqa: BLE001 - reported, the hub still stopped below
        error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    finally:
        monitor.stop()
        if bench is not None:
            bench.close()
        if api is not None:
            api.close()
        if db is not None:
            db.close()
        print(f"[{time.strftime('%H:%M:%S')}] stopping the hub", flush=True)
        results["hub_stop"] = hub.stop()
    results["rss_peak_mib"] = monitor.peaks
    results["cpu"] = {
        phase: {
            **{k: round(v, 1) for k, v in bucket.items()},
            "foreign_cores": monitor.foreign_cpu(phase),
        }
        for phase, bucket in monitor.cpu.items()
    }
    results["seconds"] = round(time.monotonic() - started, 1)
    results["error"] = error
    path = results_write(results, args.out, mode)
    report_print(results)
    print(f"\nResults: {path}" + (f"\nHub log: {hub.log_path}" if error else ""))
    return 1 if error else 0


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
