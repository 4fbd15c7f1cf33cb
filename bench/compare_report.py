"""The figures of a bench/compare_mem0.py run (its JSON file) and their console report;
bench/hindsight_report.py builds the three-system report of bench/compare_hindsight.py on
them."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from bench.compare_workload import recall

# phases whose timings the report uses, and how much CPU other processes may use during
# one (cores, averaged over the phase) before the report calls its figures skewed
TIMED_PHASES = (
    "raw model (before)", "MemoryHub ingest", "MemoryHub search", "mem0 add", "mem0 search",
    "Hindsight retain", "Hindsight recall", "raw model (after)",
)  # fmt: skip
SKEW_CORES = 0.25
CATEGORY_ROWS = ("multi-hop", "temporal", "open-domain", "single-hop", "adversarial")


def say(message: str = "") -> None:
    print(message, flush=True)


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _percent(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


# --- figures ------------------------------------------------------------------------------


def raw_ceiling(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The model's ceiling: the better of the raw runs (other processes on the machine
    only ever slow a run down), so the targets are judged against the harder figure."""
    return {
        "runtime": runs[0].get("runtime", "torch"),
        "threads": runs[0].get("threads", runs[0].get("torch_threads")),
        "batch_size": runs[0]["batch_size"],
        "mean_tokens": runs[0]["mean_tokens"],
        "per_second": max(run["per_second"] for run in runs),
        "query_embed_ms": min((run["query_embed_ms"] for run in runs), key=lambda q: q["p50"]),
        "runs": runs,
    }


def ours_figures(
    workload: dict[str, Any], ingest: dict[str, Any], search: dict[str, Any],
    raw: dict[str, Any], k: int, ks: Sequence[int] = (),
) -> dict[str, Any]:  # fmt: skip
    queries = search["queries"]
    return {
        "ingest": ingest,
        "search": {
            **{name: value for name, value in search.items() if name != "queries"},
            "short_percent": _percent(search["short"], len(workload["queries"])),
        },
        "recall": recall(workload, {q["qid"]: q["ranked"] for q in queries}, ks or (k,)),
        "search_overhead_ms": round(search["latency_ms"]["p50"] - raw["query_embed_ms"]["p50"], 2),
        "wrong_user_hits": sum(q["wrong_user"] for q in queries),
    }


def _mem0_short_searches(mem0: dict[str, Any], k: int) -> dict[str, Any]:
    """Searches that returned fewer than k results, and how many rows mem0's vector
    store gave it to choose from for them."""
    short = [q for q in mem0["queries"] if q["count"] < k]
    return {
        "count": len(short),
        "results_returned_mean": round(statistics.fmean(q["count"] for q in short), 2)
        if short
        else None,
        "vector_candidates_mean": round(
            statistics.fmean(q.get("vector_candidates", 0) for q in short), 2
        )
        if short
        else None,
        "candidate_limit": mem0["internal_candidate_limit"],
    }


def mem0_figures(
    workload: dict[str, Any], mem0: dict[str, Any], k: int, ks: Sequence[int] = ()
) -> dict[str, Any]:
    queries = mem0["queries"]
    return {
        "add": mem0["add"],
        "search": {
            **mem0["search"],
            "short_percent": _percent(mem0["search"]["short"], len(workload["queries"])),
        },
        "recall": recall(workload, {q["qid"]: q["ranked"] for q in queries}, ks or (k,)),
        "query_embed_ms": mem0["query_embed_ms"],
        "search_overhead_ms": round(
            mem0["search"]["latency_ms"]["p50"] - mem0["query_embed_ms"]["p50"], 2
        ),
        "wrong_user_hits": sum(q["wrong_user"] for q in queries),
        "short_searches": _mem0_short_searches(mem0, k),
        "rows_per_user": mem0["rows_per_user"],
        "startup_seconds": mem0["startup_seconds"],
        "vector_query_plan": mem0.get("vector_query_plan", ""),
        "config": mem0["config"],
        "search_options": mem0["search_options"],
    }


def ratios(ours: dict[str, Any], mem0: dict[str, Any], k: int) -> dict[str, float | None]:
    """Ours over mem0's, measured in the same run."""
    search, search_mem0 = ours["search"]["latency_ms"], mem0["search"]["latency_ms"]
    recall_all = [side["recall"]["all"][f"recall@{k}"] for side in (ours, mem0)]
    recall_1_4 = [side["recall"]["cat1-4"][f"recall@{k}"] for side in (ours, mem0)]
    return {
        "ingest_per_second": ratio(ours["ingest"]["per_second"], mem0["add"]["per_second"]),
        "search_p50": ratio(search["p50"], search_mem0["p50"]),
        "search_p95": ratio(search["p95"], search_mem0["p95"]),
        f"recall@{k}_all": ratio(*recall_all),
        f"recall@{k}_cat1-4": ratio(*recall_1_4),
    }


def targets(
    ours: dict[str, Any], mem0: dict[str, Any], raw: dict[str, Any], k: int, questions: int
) -> dict[str, Any]:
    """The issue's targets, each met or not, with the figures that say so."""
    ingest, search, short = ours["ingest"], ours["search"], ours["search"]["short"]
    share = ingest["per_second"] / raw["per_second"]
    recall_ours = ours["recall"]["all"][f"recall@{k}"]
    recall_mem0 = mem0["recall"]["all"][f"recall@{k}"]
    checks = {
        "ingestion >= 90% of the raw batch throughput": {
            "met": share >= 0.9,
            "detail": f"{ingest['per_second']:.1f}/s vs {raw['per_second']:.1f}/s = {share:.0%}",
        },
        "search p50 within 3 ms of the query embedding": {
            "met": ours["search_overhead_ms"] <= 3.0,
            "detail": f"{search['latency_ms']['p50']:.1f} ms - "
            f"{raw['query_embed_ms']['p50']:.1f} ms = {ours['search_overhead_ms']:.1f} ms "
            "(client-side, HTTP included)",
        },
        f"always {k} results when {k} exist": {
            "met": short == 0,
            "detail": f"{short} of {questions} searches short "
            f"(mem0: {mem0['short_searches']['count']})",
        },
        f"higher recall@{k} than mem0": {
            "met": recall_ours > recall_mem0,
            "detail": f"{recall_ours} vs {recall_mem0}",
        },
    }
    return {"ingest_share_of_raw": round(share, 3), "checks": checks}


def _cpu_per_1000(phase: dict[str, float] | None, messages: int) -> float | None:
    if not phase or not messages:
        return None
    return round(1000 * phase["ours_cpu_seconds"] / messages, 1)


def figures(
    workload: dict[str, Any], measured: dict[str, Any], cpu: dict[str, dict[str, float]], k: int
) -> dict[str, Any]:
    """The run's figures from what each phase measured and the CPU used per phase."""
    raw = raw_ceiling(measured["raw_runs"])
    ours = ours_figures(workload, measured["ingest"], measured["search"], raw, k)
    mem0 = mem0_figures(workload, measured["mem0"], k)
    messages = len(workload["messages"])
    return {
        "raw_model": raw,
        "memoryhub": ours,
        "mem0": mem0,
        "ratios": ratios(ours, mem0, k),
        "targets": targets(ours, mem0, raw, k, len(workload["queries"])),
        "cpu": cpu,
        "skewed_phases": [
            phase
            for phase, used in cpu.items()
            if phase in TIMED_PHASES and used["foreign_cores"] > SKEW_CORES
        ],
        "cpu_per_1000_messages": {
            "memoryhub": _cpu_per_1000(cpu.get("MemoryHub ingest"), messages),
            "mem0": _cpu_per_1000(cpu.get("mem0 add"), messages),
        },
    }


# --- the console report -------------------------------------------------------------------

Row = tuple[str, Any, Any, Any, str]


def _latency_rows(result: dict[str, Any], k: int) -> list[Row]:
    ours, mem0, ratios = result["memoryhub"], result["mem0"], result["ratios"]
    search, search_mem0 = ours["search"], mem0["search"]
    return [
        ("add / ingest, messages/s", ours["ingest"]["per_second"], mem0["add"]["per_second"],
         ratios["ingest_per_second"], "higher is better"),
        ("search p50, ms", search["latency_ms"]["p50"], search_mem0["latency_ms"]["p50"],
         ratios["search_p50"], "lower is better"),
        ("search p95, ms", search["latency_ms"]["p95"], search_mem0["latency_ms"]["p95"],
         ratios["search_p95"], "lower is better"),
        (f"searches with < {k} results, %", search["short_percent"],
         search_mem0["short_percent"], None, ""),
    ]  # fmt: skip


def _recall_rows(result: dict[str, Any], k: int) -> list[Row]:
    ours, mem0, name = result["memoryhub"]["recall"], result["mem0"]["recall"], f"recall@{k}"
    rows: list[Row] = []
    for bucket in ("all", "cat1-4"):
        o, m = ours.get(bucket, {}), mem0.get(bucket, {})
        rows.append(
            (f"{name} {bucket} (n={o.get('questions', 0)})", o.get(name), m.get(name),
             ratio(o.get(name), m.get(name)), "higher is better")
        )  # fmt: skip
    for bucket in CATEGORY_ROWS:
        o, m = ours.get(bucket), mem0.get(bucket)
        if o and m:
            rows.append(
                (f"  {bucket} (n={o['questions']})", o[name], m[name], ratio(o[name], m[name]), "")
            )
    return rows


def _embedding_rows(result: dict[str, Any]) -> list[Row]:
    ours, mem0, raw = result["memoryhub"], result["mem0"], result["raw_model"]
    return [
        ("query embedding alone p50, ms", raw["query_embed_ms"]["p50"],
         mem0["query_embed_ms"]["p50"], None, "fresh, each system's process"),
        ("search p50 - query embedding p50, ms", ours["search_overhead_ms"],
         mem0["search_overhead_ms"], None, ""),
    ]  # fmt: skip


def _comparison_print(result: dict[str, Any]) -> None:
    k = result["workload"]["k"]
    rows = _latency_rows(result, k) + _recall_rows(result, k) + _embedding_rows(result)
    say()
    say(f"{'':40} {'MemoryHub':>10} {'mem0':>10} {'ours/mem0':>10}")
    for name, a, b, c, note in rows:
        say(f"{name:40} {fmt(a):>10} {fmt(b):>10} {fmt(c, 2):>10}  {note}")
    say()


def _raw_model_print(raw: dict[str, Any]) -> None:
    runs = " and ".join(f"{run['per_second']:.1f}" for run in raw["runs"])
    say(
        f"raw model (this process, {raw['runtime']}, batches of {raw['batch_size']}, "
        f"{raw['threads']} thread(s), {raw['mean_tokens']} tokens per turn): {runs} turns/s "
        f"before and after the two systems ran; the better, {raw['per_second']:.1f}/s, is the "
        "ceiling "
        f"(all turns in one length-sorted call: {fmt(raw['runs'][0]['one_call_sorted_per_second'])}"
        "/s)"
    )


def _memoryhub_print(result: dict[str, Any]) -> None:
    ours = result["memoryhub"]
    ingest, search = ours["ingest"], ours["search"]
    say(
        f"MemoryHub ingestion: {ingest['per_second']:.1f}/s = "
        f"{100 * result['targets']['ingest_share_of_raw']:.0f}% of the raw model; writes "
        f"acknowledged at {ingest['writes_per_second']:.0f}/s (batch request p50 "
        f"{ingest['batch_request_ms']['p50']:.0f} ms), all embedded "
        f"{ingest['embedding_lag_after_last_write_s']:.1f} s after the last write"
    )
    parts = ", ".join(
        f"{name} {value:.1f}"
        for name, value in search["server_timings_p50_ms"].items()
        if value is not None
    )
    say(
        f"MemoryHub search: client p50 {fmt(search['latency_ms']['p50'])} ms = HTTP + "
        f"Django floor (GET /health/) p50 {fmt(search['http_floor_ms']['p50'])} ms + "
        f"search view; server timings p50 (ms): {parts}"
    )


def _cpu_print(result: dict[str, Any]) -> None:
    cpu = result["cpu_per_1000_messages"]
    say(
        f"CPU seconds per 1000 messages stored and embedded (the system's processes and "
        f"PostgreSQL): MemoryHub {fmt(cpu['memoryhub'])}, mem0 {fmt(cpu['mem0'])}"
    )
    plan = result["mem0"]["vector_query_plan"]
    say(
        "mem0's filtered vector query: "
        + ("HNSW index scan" if "hnsw" in plan.lower() else "no HNSW index (exact scan + sort)")
        + f" for {result['workload']['messages']} rows"
    )


def _targets_print(result: dict[str, Any]) -> None:
    say()
    say("targets:")
    for name, target in result["targets"]["checks"].items():
        say(f"  {'met    ' if target['met'] else 'NOT MET'}  {name}: {target['detail']}")


def _phases_print(result: dict[str, Any]) -> None:
    say()
    say("CPU during each phase (cores; 'foreign' = other processes on this machine):")
    for phase, cpu in result["cpu"].items():
        say(
            f"  {phase:24} {cpu['seconds']:5.0f} s  busy {cpu['busy_cores']:.2f}  "
            f"ours {cpu['ours_cores']:.2f}  foreign {cpu['foreign_cores']:.2f}"
            + ("  <- skewed" if phase in result["skewed_phases"] else "")
        )
    if result["skewed_phases"]:
        say(
            f"WARNING: other processes used over {SKEW_CORES} cores during "
            f"{', '.join(result['skewed_phases'])}: those figures are slower than this machine "
            "gives when quiet, and the ratios between phases are unreliable; run again on a "
            "quiet machine"
        )


def report_print(result: dict[str, Any]) -> None:
    _comparison_print(result)
    _raw_model_print(result["raw_model"])
    _memoryhub_print(result)
    _cpu_print(result)
    _targets_print(result)
    _phases_print(result)
