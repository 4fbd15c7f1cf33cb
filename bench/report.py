"""The console report of a benchmark run (the JSON file holds the same and more)."""

from __future__ import annotations

from typing import Any


def _f(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 1 or value == 0 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers, *[[_f(cell) for cell in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for number, row in enumerate(cells):
        line = "  ".join(
            cell.rjust(width) if i and _numeric(cell) else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        lines.append("  " + line.rstrip())
        if number == 0:
            lines.append("  " + "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _numeric(cell: str) -> bool:
    return cell == "-" or cell.replace(",", "").replace(".", "").isdigit()


def _header(results: dict[str, Any]) -> None:
    label, config = results["label"], results["config"]
    commit = label["git_commit"][:10] + (" (uncommitted changes)" if label.get("git_dirty") else "")
    print(
        f"\nMemoryHub benchmark ({label['mode']}) {label['date']}, commit {commit}\n"
        f"machine: {label['cores']} cores ({label['cpu']}), {label['memory_gib']} GiB; "
        f"load average at start {label['load_average_at_start']}, "
        f"{label.get('cpu_busy_cores_before_start')} cores busy just before\n"
        f"stack: PostgreSQL {label.get('postgres', '?')} + pgvector {label.get('pgvector', '?')}, "
        f"{config['web_workers']} gunicorn workers x {config['web_threads']} threads, "
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
    raw, ingestion, fill = results.get("raw_model"), results.get("ingestion"), results.get("fill")
    if not (raw or ingestion):
        return
    print("\nIngestion: from the first write until every message is embedded by the hub's worker")
    rows = []
    for entry, batch, note in (
        (ingestion, config["ingest_batch"], ""),
        (fill, config["fill_batch"], " (fill)"),
    ):
        if entry:
            rows.append(
                [f"hub, {entry['messages']:,} messages, batches of {batch}{note}",
                 entry["per_second"], entry["seconds"], entry["ratio_to_raw_model"],
                 entry.get("foreign_cpu_cores")]
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
            f"  bare model: torch threads {raw['torch_threads']}, "
            f"mean {raw['mean_tokens']} tokens per text; one question at a time "
            f"p50 {single['p50']} ms, p95 {single['p95']} ms"
        )


def _search(results: dict[str, Any]) -> None:
    for level in results.get("search", []):
        print(
            f"\nSearch latency at {level['memories']:,} memories, ms (k={level['k']}; other CPU "
            f"{level.get('foreign_cpu_cores')})\n  client = HTTP round trip; server = "
            "timings_ms.total; embed = timings_ms.embed_query; hits = mean results; "
            "<k = searches with fewer than k results"
        )
        rows = []
        for row in level["rows"]:
            client, server = row["client_ms"], row["server_total_ms"] or {}
            embed, rest = row["embed_query_ms"] or {}, row["client_minus_embed_ms"]
            rows.append(
                [
                    row["mode"], row["filter"], client["n"], client["p50"], client["p95"],
                    server.get("p50"), server.get("p95"), embed.get("p50"), embed.get("p95"),
                    rest["p50"], rest["p95"], row["mean_results"], row["short_results"],
                ]
            )  # fmt: skip
        headers = [
            "mode", "user filter", "n", "client p50", "client p95", "server p50", "server p95",
            "embed p50", "embed p95", "client-embed p50", "client-embed p95", "hits", "<k",
        ]  # fmt: skip
        print(table(headers, rows))
        hits = sum(row["query_cache_hits"] for row in level["rows"])
        if hits:
            print(f"  {hits} searches hit the web process's query-vector cache")


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
    _search(results)
    _memory(results)
    stop = results.get("hub_stop", {})
    print(
        f"\nhub ready in {results.get('hub_ready_seconds')} s; stopped "
        f"{'cleanly' if stop.get('clean') else 'NOT cleanly'} in {stop.get('seconds')} s "
        f"(exit code {stop.get('exit_code')}); whole run {results.get('seconds')} s"
    )
    if results.get("error"):
        print(f"ERROR: {results['error']}")
