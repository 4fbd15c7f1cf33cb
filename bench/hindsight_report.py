"""The figures of a bench/compare_hindsight.py run and their report: MemoryHub, mem0 and
Hindsight in one table, built on bench/compare_report.py's figures of the first two."""

from __future__ import annotations

from typing import Any

from bench.compare_report import (
    SKEW_CORES,
    TIMED_PHASES,
    _phases_print,
    fmt,
    mem0_figures,
    ours_figures,
    ratio,
    raw_ceiling,
)
from bench.compare_workload import recall

KS = (5, 10, 20)
SYSTEMS = {"memoryhub": "MemoryHub", "mem0": "mem0", "hindsight": "Hindsight"}
HUB_ROLES = ("hub", "web_master", "web", "worker_main", "worker_pool", "beat", "redis", "postgres")
# per system: the monitor's roles (bench/monitor.py) and the phases they are measured in
RSS_ROLES = {
    "memoryhub": (HUB_ROLES, ("MemoryHub ingest", "MemoryHub search")),
    "mem0": (("runner",), ("mem0 add", "mem0 search")),
    "hindsight": (("hindsight", "hindsight_postgres"), ("Hindsight retain", "Hindsight recall")),
}
CATEGORY_ROWS = ("multi-hop", "temporal", "open-domain", "single-hop", "adversarial")


def say(message: str = "") -> None:
    print(message, flush=True)


def hindsight_figures(workload: dict[str, Any], hindsight: dict[str, Any]) -> dict[str, Any]:
    def recalled(run: dict[str, Any]) -> dict[str, Any]:
        queries = run["queries"]
        return {
            **{name: value for name, value in run.items() if name != "queries"},
            "short_percent": round(100 * run["short"] / max(1, len(queries)), 1),
            "wrong_user_hits": sum(q["wrong_user"] for q in queries),
            "recall": recall(workload, {q["qid"]: q["ranked"] for q in queries}, KS),
        }

    search = recalled(hindsight["recall"])
    return {
        "ingest": hindsight["retain"],
        "search": search,
        "recall": search.pop("recall"),
        "budget_run": recalled(hindsight["budget_recall"])
        if hindsight.get("budget_recall")
        else None,
        **{
            name: hindsight[name]
            for name in ("startup_seconds", "versions", "postgres", "settings", "download_attempts")
        },
    }


def peak_rss_mib(peaks: dict[str, dict[str, float]]) -> dict[str, float | None]:
    """Each system's peak memory: the sum of its processes' RSS (the highest sample per
    role, summed over roles) during its own phases. The hub's PostgreSQL also holds
    mem0's database (mem0's figure is its Python process alone)."""
    out: dict[str, float | None] = {}
    for system, (roles, phases) in RSS_ROLES.items():
        sums: list[float] = [
            sum(peaks[phase].get(f"{role}_sum_mib", 0.0) for role in roles)
            for phase in phases
            if phase in peaks
        ]
        peak = max(sums, default=0.0)
        out[system] = round(peak, 1) if peak else None
    return out


def _cpu_per_1000(cpu: dict[str, Any], messages: int) -> dict[str, float | None]:
    """CPU seconds per 1000 turns stored and embedded: each system's processes (and
    this process's client) during its ingestion phase."""

    def seconds(phase: str, roles: tuple[str, ...] | None = None) -> float | None:
        used = cpu.get(phase)
        if not used or not messages:
            return None
        total = (
            used["ours_cpu_seconds"]
            if roles is None
            else sum(used["roles_cpu_seconds"].get(role, 0.0) for role in roles)
        )
        return round(1000 * total / messages, 1)

    return {
        "memoryhub": seconds("MemoryHub ingest"),
        "mem0": seconds("mem0 add"),
        "hindsight": seconds("Hindsight retain", ("hindsight", "hindsight_postgres", "bench")),
    }


def figures(
    workload: dict[str, Any],
    measured: dict[str, Any],
    cpu: dict[str, Any],
    peaks: dict[str, dict[str, float]],
    k: int,
) -> dict[str, Any]:
    raw = raw_ceiling(measured["raw_runs"])
    out: dict[str, Any] = {
        "raw_model": raw,
        "memoryhub": ours_figures(workload, measured["ingest"], measured["search"], raw, k, KS),
    }
    if measured.get("mem0"):
        out["mem0"] = mem0_figures(workload, measured["mem0"], k, KS)
    out["hindsight"] = hindsight_figures(workload, measured["hindsight"])
    out["cpu"] = cpu
    out["skewed_phases"] = [
        phase
        for phase, used in cpu.items()
        if phase in TIMED_PHASES and used["foreign_cores"] > SKEW_CORES
    ]
    out["cpu_per_1000_messages"] = _cpu_per_1000(cpu, len(workload["messages"]))
    out["peak_rss_mib"] = peak_rss_mib(peaks)
    return out


# --- the table ----------------------------------------------------------------------------


def _other_cpu(result: dict[str, Any], phase: str) -> float | None:
    used = result["cpu"].get(phase)
    return used["foreign_cores"] if used else None


def rows(result: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    """The table's rows: a name and one value per system present."""
    systems = [s for s in SYSTEMS if s in result]
    k = result["workload"]["k"]

    def each(get: Any) -> list[Any]:
        return [get(result[s], s) for s in systems]

    ingest_phase = {
        "memoryhub": "MemoryHub ingest",
        "mem0": "mem0 add",
        "hindsight": "Hindsight retain",
    }
    search_phase = {
        "memoryhub": "MemoryHub search",
        "mem0": "mem0 search",
        "hindsight": "Hindsight recall",
    }
    table = [
        (
            "ingestion until searchable, turns/s",
            each(lambda f, s: (f.get("ingest") or f.get("add"))["per_second"]),
        ),
        ("search p50, ms", each(lambda f, s: f["search"]["latency_ms"]["p50"])),
        ("search p95, ms", each(lambda f, s: f["search"]["latency_ms"]["p95"])),
        (f"searches with < {k} results, %", each(lambda f, s: f["search"]["short_percent"])),
    ]
    for bucket in ("all", "cat1-4"):
        for at in KS:
            table.append(
                (
                    f"recall@{at} {bucket}, %",
                    each(lambda f, s, b=bucket, a=at: f["recall"][b][f"recall@{a}"]),
                )
            )
    for bucket in CATEGORY_ROWS:
        if bucket in result["memoryhub"]["recall"]:
            n = result["memoryhub"]["recall"][bucket]["questions"]
            table.append(
                (
                    f"  recall@10 {bucket} (n={n})",
                    each(lambda f, s, b=bucket: f["recall"][b]["recall@10"]),
                )
            )
    table += [
        ("CPU s per 1000 turns ingested", each(lambda f, s: result["cpu_per_1000_messages"][s])),
        ("peak memory (RSS), MiB", each(lambda f, s: result["peak_rss_mib"][s])),
        (
            "other CPU during ingestion, cores",
            each(lambda f, s: _other_cpu(result, ingest_phase[s])),
        ),
        ("other CPU during search, cores", each(lambda f, s: _other_cpu(result, search_phase[s]))),
    ]
    return table


def markdown(result: dict[str, Any]) -> str:
    systems = [SYSTEMS[s] for s in SYSTEMS if s in result]
    lines = ["| | " + " | ".join(systems) + " |", "| --- |" + " --- |" * len(systems)]
    for name, values in rows(result):
        lines.append(
            f"| {name.strip()} | "
            + " | ".join(fmt(v, 2 if "cores" in name else 1) for v in values)
            + " |"
        )
    return "\n".join(lines)


def report_print(result: dict[str, Any]) -> None:
    systems = [SYSTEMS[s] for s in SYSTEMS if s in result]
    say()
    say(f"{'':42}" + "".join(f"{name:>11}" for name in systems))
    for name, values in rows(result):
        say(f"{name:42}" + "".join(f"{fmt(v, 2 if 'cores' in name else 1):>11}" for v in values))
    hindsight, ours = result["hindsight"], result["memoryhub"]
    ours_over = {
        name: fmt(ratio(get(ours), get(hindsight)), 2)
        for name, get in (
            ("ingestion", lambda f: f["ingest"]["per_second"]),
            ("search p50", lambda f: f["search"]["latency_ms"]["p50"]),
            ("recall@10 all", lambda f: f["recall"]["all"]["recall@10"]),
        )
    }
    say()
    say("ours/Hindsight: " + ", ".join(f"{name} {value}x" for name, value in ours_over.items()))
    say(
        f"Hindsight returned {hindsight['search']['results_mean']} facts a recall on average "
        "(its defaults: budget mid, 4096 tokens)"
    )
    budget = hindsight.get("budget_run")
    if budget:
        say(
            f"Hindsight at budget {budget['budget']}: p50 {fmt(budget['latency_ms']['p50'])} ms, "
            f"recall@10 all {fmt(budget['recall']['all']['recall@10'])}"
        )
    attempts = hindsight["download_attempts"]
    say(
        f"Hindsight's download attempts (its log): {len(attempts)}"
        + (f": {attempts[:3]}" if attempts else "")
    )
    _phases_print(result)
    say()
    say(markdown(result))
