"""The measured phases of bench/run.py against a running hub: writes, ingestion beside
the bare model, searches per mode and filter, bulk loads and HNSW recall. Each phase
adds its figures to the run's results."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

import psycopg

from bench.bulk import BulkLoader
from bench.client import Api, encode, summary
from bench.corpus import USERS, Corpus, query_stream
from bench.model import model_load, model_throughput
from bench.monitor import Monitor
from bench.recall import hnsw_recall
from bench.stack import Hub

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
    summary_messages: int = 1_000  # written into a room of capacity 10 (bench/buffer_phases.py)
    fact_messages: int = 1_000  # user messages mined for facts (bench/maintenance_phases.py)
    mem0: bool = False  # mem0 beside the first concurrency phase (bench/mem0_concurrency.py)


def sql_value(db: psycopg.Connection[Any], query: str, *params: Any) -> Any:
    """The first column of the query's first row."""
    row = db.execute(query, params).fetchone()
    assert row is not None
    return row[0]


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
        return sql_value(self.db, query, *params)

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
            data_dir=self.hub.data_dir,
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
            self._model = model_load(self.threads, self.hub.data_dir)
        return self._model.encode(texts, batch_size=self.embed_batch)

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
