"""MemoryHub's side of bench/compare_mem0.py, over HTTP as an agent would use it: the
turns written in batches until all are embedded, then every question searched."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import psycopg

from bench.client import Api, encode, summary

WRITE_BATCH = 100


def pending_count(db: psycopg.Connection[Any]) -> int:
    row = db.execute(
        "SELECT count(*) FROM memories_memory WHERE embedding_status = 'pending'"
    ).fetchone()
    return int(row[0]) if row else 0


def wait_embedded(db: psycopg.Connection[Any], timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while pending_count(db):
        if time.monotonic() > deadline:
            raise RuntimeError(f"memories still pending embedding after {timeout:.0f} s")
        time.sleep(0.05)
    return time.perf_counter()


def ours_batch(messages: list[dict[str, Any]]) -> bytes:
    """The body of a POST /api/v1/memories/batch/ writing ``messages``."""
    items = [
        {
            "user": message["user_id"],
            "room": message["room"],
            "role": "user",
            "content": message["content"],
            "metadata": message["metadata"],
            "created_at": message["created_at"],
        }
        for message in messages
    ]
    return encode({"memories": items})


def ours_search_call(api: Api, text: str, user: str, k: int) -> tuple[Any, float]:
    return api.post("/api/v1/search/", encode({"query": text, "user": user, "k": k}), expect=200)


def ours_warmup(api: Api, db: psycopg.Connection[Any], workload: dict[str, Any], k: int) -> None:
    warmup = workload["warmup"]
    api.post("/api/v1/memories/batch/", ours_batch(warmup["messages"]))
    wait_embedded(db)
    for text in warmup["queries"]:
        ours_search_call(api, text, warmup["user_id"], k)


def ours_ingest(api: Api, db: psycopg.Connection[Any], workload: dict[str, Any]) -> dict[str, Any]:
    """Every turn written WRITE_BATCH a request, timed until all are embedded."""
    messages = workload["messages"]
    request_ms = []
    started = time.perf_counter()
    for i in range(0, len(messages), WRITE_BATCH):
        chunk = messages[i : i + WRITE_BATCH]
        data, elapsed = api.post("/api/v1/memories/batch/", ours_batch(chunk))
        if len(data["results"]) != len(chunk):
            raise RuntimeError(f"batch wrote {len(data['results'])} of {len(chunk)}")
        request_ms.append(elapsed)
    written = time.perf_counter()
    embedded = wait_embedded(db)
    seconds = embedded - started
    return {
        "messages": len(messages),
        "batch_size": WRITE_BATCH,
        "seconds": round(seconds, 3),
        "per_second": round(len(messages) / seconds, 2),
        "writes_seconds": round(written - started, 3),
        "writes_per_second": round(len(messages) / (written - started), 2),
        "embedding_lag_after_last_write_s": round(embedded - written, 3),
        "batch_request_ms": summary(request_ms),
    }


def ours_search(api: Api, workload: dict[str, Any], k: int) -> dict[str, Any]:
    """Every question with its user's filter: client and server timings, ranked dia_ids."""
    latencies: list[float] = []
    parts: dict[str, list[float]] = defaultdict(list)
    queries = []
    # the cost of HTTP and Django alone: a view that does nothing, same connection
    floor = [api.get_timed("/health/")[1] for _ in range(100)]
    data: dict[str, Any] = {}
    for query in workload["queries"]:
        data, elapsed = ours_search_call(api, query["text"], query["user_id"], k)
        latencies.append(elapsed)
        for name, value in data.get("timings_ms", {}).items():
            parts[name].append(value)
        hits = data["results"]
        queries.append(
            {
                "qid": query["qid"],
                "count": len(hits),
                "ranked": [hit["memory"]["metadata"].get("dia_id") for hit in hits],
                "wrong_user": sum(1 for hit in hits if hit["memory"]["user"] != query["user_id"]),
            }
        )
    return {
        "mode": data.get("mode") if workload["queries"] else None,
        "latency_ms": summary(latencies),
        "server_total_ms": summary(parts.get("total", [])),
        "server_embed_query_ms": summary(parts.get("embed_query", [])),
        "server_timings_p50_ms": {name: summary(v)["p50"] for name, v in parts.items()},
        "http_floor_ms": summary(floor),
        "short": sum(1 for q in queries if q["count"] < k),
        "queries": queries,
    }
