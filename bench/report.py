"""The console report of a benchmark run (the JSON file holds the same and more)."""

from __future__ import annotations

from typing import Any

from bench.ingestion_phase import documents_report
from bench.mem0_concurrency import mem0_concurrency_report
from bench.report_features import features_report, maintenance_report
from bench.tables import _f, _percent, table

__all__ = ["_f", "report_print", "table"]


def _header(results: dict[str, Any]) -> None:
    label, config = results["label"], results["config"]
    commit = label["git_commit"][:10] + (" (uncommitted changes)" if label.get("git_dirty") else "")
    print(
        f"\nMemoryHub benchmark ({label['mode']}) {label['date']}, commit {commit}\n"
        f"machine: {label['cores']} cores ({label['cpu']}), {label['memory_gib']} GiB; "
        f"load average at start {label['load_average_at_start']}, "
        f"{label.get('cpu_busy_cores_before_start')} cores busy just before\n"
        f"stack: PostgreSQL {label.get('postgres', '?')} + pgvector {label.get('pgvector', '?')}, "
        f"{config['web_workers']} gunicorn workers x {config['web_threads']} threads "
        f"(searches at once per worker: {config.get('search_concurrency', '-')}), "
        f"{config['worker_concurrency']} Celery worker process, "
        f"torch threads {config['torch_threads']}, embedding batch {config['embed_batch']}\n"
        "'other CPU': cores' worth of CPU that processes outside the benchmark used meanwhile"
    )
    if config.get("dotenv_keys"):
        print(f"note: the checkout's .env sets {', '.join(config['dotenv_keys'])} for the hub")


def _writes(results: dict[str, Any]) -> None:
    writes = results.get("writes", {})
    if not writes:
        return
    print("\nWrite latency, ms (HTTP round trip, one client, one persistent connection)")
    rows = []
    for entry in writes.values():
        request, message = entry["per_request_ms"], entry.get("per_message_ms") or {}
        rows.append(
            [
                entry["condition"], entry["request"], request["n"],
                request["p50"], request["p95"], request["p99"], request["max"],
                message.get("p50"), message.get("p95"), entry.get("foreign_cpu_cores"),
            ]
        )  # fmt: skip
    headers = [
        "condition", "request", "n", "p50", "p95", "p99", "max", "msg p50", "msg p95", "other CPU",
    ]  # fmt: skip
    print(table(headers, rows))


def _ingestion(results: dict[str, Any]) -> None:
    config = results["config"]
    raw, ingestion = results.get("raw_model"), results.get("ingestion")
    if not (raw or ingestion):
        return
    print("\nIngestion: from the first write until every message is embedded by the hub's worker")
    rows = []
    if ingestion:
        rows.append(
            [f"hub, {ingestion['messages']:,} messages, batches of {config['ingest_batch']}",
             ingestion["per_second"], ingestion["seconds"], ingestion["ratio_to_raw_model"],
             ingestion.get("foreign_cpu_cores")]
        )  # fmt: skip
    if raw:
        rows.append(
            [f"bare model, {raw['texts']:,} of those texts, {raw['batch_size']} per call",
             raw["per_second"], raw["seconds"], 1.0, raw.get("foreign_cpu_cores")]
        )  # fmt: skip
        if raw.get("one_call_sorted"):
            one_call = raw["one_call_sorted"]
            rows.append(
                [f"bare model, {one_call['texts']:,} of them in one call (sorted by length)",
                 one_call["per_second"], None, None, None]
            )  # fmt: skip
    print(table(["", "msg/s", "seconds", "x bare model", "other CPU"], rows))
    if raw:
        single = raw["single_query_ms"]
        print(
            f"  bare model: {raw.get('runtime', 'torch')}, "
            f"threads {raw.get('threads', raw.get('torch_threads'))}, "
            f"mean {raw['mean_tokens']} tokens per text; one question at a time "
            f"p50 {single['p50']} ms, p95 {single['p95']} ms"
        )


def _search(results: dict[str, Any]) -> None:
    for level in results.get("search", []):
        print(
            f"\nSearch latency at {level['memories']:,} memories, ms (k={level['k']}; other CPU "
            f"{level.get('foreign_cpu_cores')})\n  client = HTTP round trip; server = "
            "timings_ms.total; embed = timings_ms.embed_query (on a thread, while the keyword "
            "query runs); hits = mean results; "
            "<k = searches with fewer than k results"
        )
        rows = []
        for row in level["rows"]:
            client, server = row["client_ms"], row["server_total_ms"] or {}
            embed, rest = row["embed_query_ms"] or {}, row["client_minus_embed_ms"]
            beyond = row.get("server_minus_embed_ms") or {}
            rows.append(
                [
                    row["mode"], row["filter"], client["n"], client["p50"], client["p95"],
                    server.get("p50"), server.get("p95"), embed.get("p50"), embed.get("p95"),
                    beyond.get("p50"), beyond.get("p95"), rest["p50"], rest["p95"],
                    row["mean_results"], row["short_results"],
                ]
            )  # fmt: skip
        headers = [
            "mode", "user filter", "n", "client p50", "client p95", "server p50", "server p95",
            "embed p50", "embed p95", "server-embed p50", "server-embed p95",
            "client-embed p50", "client-embed p95", "hits", "<k",
        ]  # fmt: skip
        print(table(headers, rows))
        hits = sum(row["query_cache_hits"] for row in level["rows"])
        if hits:
            print(f"  {hits} searches hit the web process's query-vector cache")


def _concurrency(results: dict[str, Any]) -> None:
    for level in results.get("concurrency", []):
        targets = level["targets"]
        print(
            f"\nUnder concurrency at {level['memories']:,} memories: each client on its own "
            f"connection, {level['searches_per_write']} searches (auto, user filter, "
            f"k={level['k']}) per single write, {_f(level['seconds'])} s per row\n"
            f"  ms = HTTP round trip; write in hub = the writes' Server-Timing app (the "
            "rest of the round trip is before a web thread takes it), of it db = in its "
            "database calls, cpu = its thread's CPU time, core wait = its thread ready to run "
            "but waiting for a core (the rest waits: GIL, locks); "
            "server = the searches' timings_ms (embed = the query's "
            "embedding, embed wait = the search waiting for it, slot wait = for a search "
            f"slot); targets at 10,000 with {targets['clients']} clients: >= "
            f"{_f(targets['searches_per_second'])} searches/s, search p95 < "
            f"{_f(targets['search_p95_ms'])}, write p95 < {_f(targets['write_p95_ms'])}"
        )
        rows = []
        for row in level["rows"]:
            search, write = row["search_ms"], row["write_ms"]
            server = {name: part or {} for name, part in row["search_server_ms"].items()}
            p95 = [
                server.get(name, {}).get("p95")
                for name in ("total", "embed_query", "embed_wait", "search_wait")
            ]
            rows.append(
                [
                    row["clients"], row["searches_per_second"], search["p50"], search["p95"],
                    row["writes_per_second"], write["p50"], write["p95"], write["max"],
                    *[
                        ((row.get("write_server_ms") or {}).get(name) or {}).get("p95")
                        for name in ("app", "db", "cpu", "queue")
                    ],
                    server.get("total", {}).get("p50"), *p95, row["errors"],
                    row.get("foreign_cpu_cores"), row["load_average_before"][0],
                ]
            )  # fmt: skip
        headers = [
            "clients", "searches/s", "search p50", "search p95", "writes/s", "write p50",
            "write p95", "write max", "write in hub p95", "its db p95", "its cpu p95",
            "its core wait p95",
            "server p50", "server p95", "embed p95",
            "embed wait p95", "slot wait p95", "errors", "other CPU", "load avg",
        ]  # fmt: skip
        print(table(headers, rows))
        for row in level["rows"]:
            if row.get("cores_by_role"):
                roles = row["cores_by_role"].items()
                used = ", ".join(f"{role} {_f(cores)}" for role, cores in roles)
                print(f"  {row['clients']} client(s), cores used by: {used}")
        for row in level["rows"]:
            for example in row.get("error_examples", []):
                print(f"  {row['clients']} clients, error: {example}")
        if level is results["concurrency"][0]:
            mem0_concurrency_report(results, table, _f)


def _bulk(results: dict[str, Any]) -> None:
    loads = results.get("bulk", [])
    if not loads:
        return
    print(
        "\nBulk loads (bench/bulk.py): COPY of synthetic memories (pairs of real ones), then\n"
        "  VACUUM, the dropped indexes rebuilt, ANALYZE; seconds"
    )
    rows = []
    for load in loads:
        indexes = load["index_seconds"]
        hnsw = next((value for name, value in indexes.items() if "hnsw" in name), None)
        keyword = next((value for name, value in indexes.items() if "hnsw" not in name), None)
        rows.append(
            [load["level"], load["rows"], load["copy_seconds"], load["copy_rows_per_second"],
             load["vacuum_seconds"], keyword, hnsw, load["analyze_seconds"], load["seconds"],
             load.get("foreign_cpu_cores")]
        )  # fmt: skip
    headers = [
        "level", "rows", "COPY", "rows/s", "VACUUM", "keyword index", "HNSW index", "ANALYZE",
        "total", "other CPU",
    ]  # fmt: skip
    print(table(headers, rows))
    settings = ", ".join(f"{k} {v}" for k, v in loads[0].get("maintenance", {}).items())
    print(f"  index builds with {settings}; pairs drawn from {loads[0]['sources']:,} real memories")
    approximation = results.get("bulk_approximation")
    if approximation:
        print(
            f"  synthetic vectors: cosine between the model's embedding of a joined text and "
            f"the normalized sum of its parts' vectors, {approximation['pairs']} pairs: mean "
            f"{approximation['cosine_mean']}, 5th percentile {approximation['cosine_p05']}, "
            f"min {approximation['cosine_min']} (the better part alone: mean "
            f"{approximation['best_part_cosine_mean']})"
        )


def _recall(results: dict[str, Any]) -> None:
    levels = results.get("recall", [])
    if not levels:
        return
    print(
        "\nHNSW recall@k: the hub's vector search (raw query vector) against an exact scan in\n"
        "  SQL over the same rows; the hub scans exactly when the filtered set has at most\n"
        f"  {levels[0]['filters'][0]['exact_scan_max_rows']:,} rows (index = searches that "
        "went through the HNSW index)"
    )
    rows = []
    for level in levels:
        for entry in level["filters"]:
            low, high = entry["filtered_rows_min"], entry["filtered_rows_max"]
            rows.append(
                [level["memories"], entry["filter"], entry["n"],
                 _f(low) if low == high else f"{_f(low)}-{_f(high)}",
                 entry["searches_through_index"], entry["recall_mean"], entry["recall_min"],
                 entry["searches_below_1"], entry["api_ms"]["p50"],
                 entry["exact_query_ms"]["p50"], entry["exact_query_ms"]["p95"]]
            )  # fmt: skip
    headers = [
        "memories", "user filter", "n", "filtered rows", "index", "recall@10", "min", "<1",
        "hub ms p50", "exact ms p50", "exact ms p95",
    ]  # fmt: skip
    print(table(headers, rows))


CONTEXT_STAGES = (
    ("embed_query", "embed"), ("synopsis", "synopsis"), ("facts", "facts"),
    ("history", "history"), ("working", "working"), ("retrieval", "retrieval"),
    ("ranking", "ranking"), ("token_counting", "tokens"), ("rendering", "render"),
    ("accounting", "account"),
)  # fmt: skip


def _context(results: dict[str, Any]) -> None:
    entries = list(results.get("context", {}).values())
    if not entries:
        return
    first = entries[0]
    print(
        f"\nContext build (POST /api/v1/context/, no room, max_tokens {first['max_tokens']:,}) "
        f"for the user with the most memories, ms; target p95 < {_f(first['target_p95_ms'])} ms\n"
        "  client = HTTP round trip; server = timings_ms.total; then the p50 of each stage of "
        "timings_ms\n  (embed = the query's embedding, tokens = token counting, account = "
        "the full history's tokens and the savings)"
    )
    rows = []
    for entry in entries:
        client, server = entry["client_ms"], entry["server_ms"]
        level = _f(entry["memories"]) + (" (concentrated)" if entry.get("concentrated") else "")
        rows.append(
            [level, entry["user"], entry["user_memories"], entry["n"], client["p50"],
             client["p95"], server["total"]["p50"], server["total"]["p95"]]
            + [server[stage]["p50"] for stage, _ in CONTEXT_STAGES]
            + [{True: "yes", False: "NO"}.get(entry["meets_target"], "-")]
        )  # fmt: skip
    headers = [
        "memories", "user", "its memories", "n", "client p50", "client p95", "server p50",
        "server p95", *(title for _, title in CONTEXT_STAGES), "p95 < target",
    ]  # fmt: skip
    print(table(headers, rows))
    for entry in entries:
        print("  " + _context_note(entry))


def _context_note(entry: dict[str, Any]) -> str:
    """Which user, how it got its memories, and what the calls served."""
    share = entry["user_memories"] / entry["memories"] if entry["memories"] else None
    where = f"at {entry['memories']:,}"
    if entry.get("concentrated"):
        who = (
            f"{where} (concentrated, at the end of the run): {entry['user']} given "
            f"other users' rooms holding {entry['moved']:,} active messages, holds "
            f"{entry['user_memories']:,}"
            f" ({_percent(share)})"
        )
    else:
        held = f"{entry['user_memories']:,} ({_percent(share)})"
        who = f"{where}: {entry['user']} holds the most, {held}"
        if entry["memories"] >= 1_000_000 and entry["user_memories"] < 100_000:
            who += "; no user reaches 100,000 (bench/bulk.py spreads memories over 100 users)"
    tokens = entry["total_tokens"]
    items = ", ".join(f"{name} {_f(count)}" for name, count in entry["mean_items"].items())
    notes = "; ".join(f"{note} ({count})" for note, count in entry["notes"].items())
    stages = entry.get("first_call_timings_ms") or {}
    slowest = sorted((name for name in stages if name != "total"), key=lambda n: -stages[n])[:2]
    costs = "".join(f"{name} {_f(stages[name])}, " for name in slowest)
    return (
        f"{who}\n    first call {_f(entry['first_call_ms'])} ms ({costs}one-off loads and the "
        f"whole history's tokens); total_tokens p50 {_f(tokens['p50'])}, max "
        f"{_f(tokens['max'])}; mean items: {items or '-'}; query-cache hits "
        f"{entry['query_cache_hits']}; other CPU {_f(entry.get('foreign_cpu_cores'))}"
        + (f"; notes: {notes}" if notes else "")
    )


def _phases(results: dict[str, Any]) -> None:
    phases = results.get("cpu", {})
    if not phases:
        return
    print("\nPhases: wall seconds (sampled every second), other CPU in cores")
    rows = [
        [name, bucket.get("wall"), bucket.get("foreign_cores")] for name, bucket in phases.items()
    ]
    print(table(["phase", "seconds", "other CPU"], rows))


def _memory(results: dict[str, Any]) -> None:
    peaks = results.get("rss_peak_mib", {}).get("all", {})
    if not peaks:
        return
    print("\nPeak RSS over the run, MiB (sampled every second)")
    names = [
        ("web (gunicorn workers)", "web"), ("web (gunicorn master)", "web_master"),
        ("worker (Celery pool process)", "worker_pool"),
        ("worker (Celery main process)", "worker_main"),
        ("beat", "beat"), ("hub launcher", "hub"), ("redis", "redis"),
        ("postgres (RSS counts shared buffers in each process)", "postgres"),
    ]  # fmt: skip
    rows = [
        [title, peaks.get(f"{role}_max_mib"), peaks.get(f"{role}_sum_mib")]
        for title, role in names
        if f"{role}_max_mib" in peaks
    ]
    print(table(["process", "largest one", "all of them"], rows))


def report_print(results: dict[str, Any]) -> None:
    _header(results)
    _writes(results)
    _ingestion(results)
    documents_report(results)
    _search(results)
    _concurrency(results)
    features_report(results)
    _bulk(results)
    _recall(results)
    _context(results)
    maintenance_report(results)
    _memory(results)
    _phases(results)
    stop = results.get("hub_stop", {})
    print(
        f"\nhub ready in {results.get('hub_ready_seconds')} s; stopped "
        f"{'cleanly' if stop.get('clean') else 'NOT cleanly'} in {stop.get('seconds')} s "
        f"(exit code {stop.get('exit_code')}); whole run {results.get('seconds')} s"
    )
    if results.get("error"):
        print(f"ERROR: {results['error']}")
