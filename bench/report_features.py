"""The console report's sections on the memory features: the buffer, working memory,
summaries and facts, then the maintenance (access tracking, importance, pruning)."""

from __future__ import annotations

from typing import Any

from bench.tables import _f, _percent, table


def features_report(results: dict[str, Any]) -> None:
    _buffer(results)
    _working(results)
    _summaries(results)
    _facts(results)


def maintenance_report(results: dict[str, Any]) -> None:
    _access_tracking(results)
    _importance(results)
    _pruning(results)


def _timed_row(title: str, figures: dict[str, Any], parts: list[str]) -> list[Any]:
    """Client p50/p95 and the p50/p95 of each named part of the server's timings_ms."""
    client, server = figures["client_ms"], figures.get("server_ms", {})
    row = [title, client["n"], client["p50"], client["p95"]]
    for name in parts:
        part = server.get(name) or {}
        row += [part.get("p50"), part.get("p95")]
    return row


def _buffer(results: dict[str, Any]) -> None:
    buffer = results.get("buffer")
    if not buffer:
        return
    settings = buffer["settings"]
    print(
        f"\nBuffer search in a room of {buffer['room_messages']} messages, ms (max_size "
        f"{settings['max_size']} x buffer_multiplier {settings['buffer_multiplier']}, "
        f"limit {buffer['limit']}; other CPU {buffer.get('foreign_cpu_cores')})\n"
        "  server = timings_ms: load (messages and vectors from PostgreSQL), embed = the "
        "query's embedding, rank = BufferMemory"
    )
    parts = ["total", "load", "embed_query", "rank"]
    rows = [
        _timed_row("search (no cache)", buffer["search"], parts),
        _timed_row("GET window", buffer["window_get"], []) + [None] * 2 * len(parts),
    ]
    headers = ["request", "n", "client p50", "client p95"] + [
        f"{name} {p}" for name in ("server", "load", "embed", "rank") for p in ("p50", "p95")
    ]
    print(table(headers, rows))
    methods = ", ".join(f"{name} {count}" for name, count in buffer["methods"].items())
    print(
        f"  cache: {buffer['cache_note']}\n  methods: {methods}; searched at least "
        f"{buffer['searched_min']} messages, at most {buffer['unembedded_max']} unembedded; "
        f"mean hits {buffer['mean_results']}; query-vector cache hits "
        f"{buffer['search']['query_cache_hits']}"
    )


def _working(results: dict[str, Any]) -> None:
    working = results.get("working_memory")
    if not working:
        return
    first = working["first_search"]
    print(
        f"\nWorking memory: {working['items']:,} items in one room ({working['bytes']:,} of "
        f"{working['max_bytes']:,} bytes), ms (limit {working['limit']}; other CPU "
        f"{working.get('foreign_cpu_cores')})\n  server = timings_ms: load (items from "
        "Redis), embed items = items without a vector embedded now, rank = FAISS"
    )
    parts = ["total", "load", "embed_items", "rank"]
    timings = first["timings_ms"]
    rows = [
        ["add an item (POST)", working["add_ms"]["n"], working["add_ms"]["p50"],
         working["add_ms"]["p95"]] + [None] * 2 * len(parts),
        ["first search", 1, first["client_ms"], None]
        + [value for name in parts for value in (timings.get(name), None)],
        _timed_row("search", working["search"], parts),
    ]  # fmt: skip
    headers = ["request", "n", "client p50", "client p95"] + [
        f"{name} {p}" for name in ("server", "load", "embed items", "rank") for p in ("p50", "p95")
    ]
    print(table(headers, rows))
    print(
        f"  the first search embedded {first['embedded']:,} items ({first['method']}); the "
        f"next {working['search']['client_ms']['n']} embedded {working['embedded_after_first']}"
    )


def _summaries(results: dict[str, Any]) -> None:
    found = results.get("summaries")
    if not found:
        return
    print(
        f"\nSummaries: {found['messages']:,} messages written into a room of capacity "
        f"{found['capacity']} (summary_batch_size {found['settings']['summary_batch_size']}), "
        "until "
        f"summarized down to it and embedded (other CPU {found.get('foreign_cpu_cores')})"
    )
    rows = [
        ["summarized, first write to last summary (database times)",
         found["messages_per_second"], found["span_seconds"], found["archived_messages"]],
        ["the summarizer alone (sum of metadata.seconds)",
         found["summarizer_messages_per_second"], found["summarizer_seconds_total"], None],
        ["embedding: the ingestion phase", found.get("embedding_per_second"), None, None],
        ["embedding: the bare model", found.get("raw_model_per_second"), None, None],
    ]  # fmt: skip
    print(table(["", "msg/s", "seconds", "messages"], rows))
    summarizers = ", ".join(f"{name} {count}" for name, count in found["summarizers"].items())
    print(
        f"  {found['summaries']} summaries ({summarizers}; {found['fallbacks']} fallbacks); "
        f"summarizer seconds per summary mean {found['summarizer_seconds_mean']}, p95 "
        f"{found['summarizer_seconds_p95']} (the summarizer busy "
        f"{_percent(found['summarizer_share_of_span'])} of the span); token_count p50 "
        f"{found['token_count_p50']}, max {found['token_count_max']}\n"
        f"  writes took {found['writes_seconds']} s (batch p50 "
        f"{found['write_batch_ms']['p50']} ms); everything summarized and embedded after "
        f"{found['seconds_until_done']} s"
    )


def _facts(results: dict[str, Any]) -> None:
    found = results.get("facts")
    if not found:
        return
    bare, backlog = found["bare_extractor"], found["backlog"]
    print(
        f"\nFacts: {found['messages']:,} LoCoMo turns written as user messages, until each is "
        f"mined (the offline extractor; other CPU {found.get('foreign_cpu_cores')})"
    )
    rows = [
        ["mined, first write to last extraction (database times)",
         found["messages_per_second"], found["span_seconds"], found["mined"]],
        ["the bare offline extractor in the bench process", bare["per_second"],
         bare["seconds"], bare["texts"]],
    ]  # fmt: skip
    print(table(["", "msg/s", "seconds", "messages"], rows))
    kinds = ", ".join(f"{kind} {count:,}" for kind, count in found["facts_created_by_kind"].items())
    statuses = ", ".join(f"{status} {count:,}" for status, count in found["statuses"].items())
    print(
        f"  facts created {found['facts_created']:,} ({kinds}); created or reinforced "
        f"{found['facts_created_or_reinforced']:,}; messages that yielded a fact "
        f"{found['messages_with_facts']:,} ({_percent(found['share_with_facts'])}); "
        f"extractions: {statuses}\n"
        f"  the bare extractor drafted {bare['drafts']:,} facts from "
        f"{bare['texts_with_drafts']:,} texts; before the phase "
        f"{backlog['unmined_at_start']:,} earlier user messages were waiting to be mined "
        f"(waited {backlog['waited_seconds']} s, {backlog['unmined_left']:,} left)"
    )


def _access_tracking(results: dict[str, Any]) -> None:
    found = results.get("access_tracking")
    if not found:
        return
    print(
        f"\nSearch with access tracking on and off at {found['memories']:,} memories, ms "
        f"({found['mode']} mode, {found['filter']} filter, interleaved blocks of "
        f"{found['block']}; other CPU {found.get('foreign_cpu_cores')})\n"
        "  client = HTTP round trip (the counting is sent after the search is timed, from a "
        "background thread); -embed = minus timings_ms.embed_query"
    )
    parts = ("client_ms", "server_total_ms", "client_minus_embed_ms")
    rows = []
    for name in ("on", "off"):
        figures = found[name]
        rows.append(
            [name, figures["client_ms"]["n"]]
            + [figures[part][stat] for part in parts for stat in ("p50", "p95")]
            + [figures["mean_results"]]
        )
    difference = found["on_minus_off"]
    rows.append(
        ["on - off", None] + [difference[f"{part}_{stat}"] for part in parts
                              for stat in ("p50", "p95")] + [None]
    )  # fmt: skip
    headers = [
        "tracking", "n", "client p50", "client p95", "server p50", "server p95",
        "client-embed p50", "client-embed p95", "hits",
    ]  # fmt: skip
    print(table(headers, rows))


def _importance(results: dict[str, Any]) -> None:
    found = results.get("importance")
    if not found:
        return
    print(
        f"\nImportance recompute of {found['memories']:,} memories ({found['active_memories']:,}"
        f" active; other CPU {found.get('foreign_cpu_cores')}): importance_recompute timed in "
        "a manage.py shell\n  process, without its start-up (Python, Django, attaching to "
        "the embedded PostgreSQL)"
    )
    rows = [
        [title, found[run]["seconds"], found[run]["memories_per_second"], found[run]["changed"]]
        for title, run in (("first run at this level", "first"),
                           ("repeat at once (nothing aged)", "repeat"))
    ]  # fmt: skip
    rows.append(["the process's start-up", found["startup_seconds"], None, None])
    print(table(["", "seconds", "memories/s", "changed"], rows))


def _pruning(results: dict[str, Any]) -> None:
    found = results.get("pruning")
    if not found:
        return
    if "skipped" in found:
        print(f"\nPruning: {found['skipped']}")
        return
    print(
        f"\nPruning at {found['memories']:,} memories: manage.py prune with fifo_per_user_kind "
        f"{found['fifo_per_user_kind']:,} (about {found['expected']:,} selected; other CPU "
        f"{found.get('foreign_cpu_cores')})\n  run = the maintenance run's own times; "
        f"command = the process (start-up ~{_f(found.get('startup_seconds'))} s)"
    )
    rows = []
    for title, run in (("dry run", "dry_run"), ("real run", "real_run")):
        figures = found.get(run)
        if figures:
            counts = figures.get("counts")
            rows.append(
                [title, figures.get("run_seconds"), figures["command_seconds"],
                 figures["removed"], figures.get("run_status"),
                 ", ".join(f"{k} {_f(v)}" for k, v in counts.items()) if counts else "-"]
            )  # fmt: skip
    print(table(["", "run seconds", "command seconds", "removed", "status", "counts"], rows))
    if found.get("error"):
        print(f"  ERROR: {found['error']}")
