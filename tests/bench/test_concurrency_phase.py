"""The concurrency phase's figures and table (bench/concurrency_phase.py, bench/report.py);
the measuring itself is the benchmark's, not a test's."""

import pytest

from bench.concurrency_phase import Samples, clients_figures, phase_seconds
from bench.mem0_concurrency import mem0_concurrency_report
from bench.mem0_side import _runner_phase
from bench.report import _f, report_print, table
from bench.run import _only_phases

START = 100.0


def client(searches: list[float], writes: list[float], *, late: int = 0) -> Samples:
    """Requests finished one per 10 ms from START; ``late`` more searches after 10 s."""
    samples = Samples()
    at = START
    for ms in searches:
        at += 0.01
        samples.requests.append(("search", at, ms, {"total": ms - 1, "search_wait": 2.0}))
    for ms in writes:
        at += 0.01
        samples.requests.append(("write", at, ms, {}))
    for _ in range(late):
        samples.requests.append(("search", START + 10.5, 500.0, {"total": 499.0}))
    return samples


def test_rates_count_what_finished_in_the_window_latencies_everything() -> None:
    samples = [client([10.0] * 40, [2.0] * 10, late=3), client([30.0] * 40, [4.0] * 10)]
    samples[1].errors.append("write: 500 boom")

    figures = clients_figures(2, samples, START, START + 10)

    assert figures["searches_per_second"] == 8.0  # 80 in 10 s; the 3 late ones not
    assert figures["writes_per_second"] == 2.0
    assert figures["search_ms"]["n"] == 83
    assert figures["search_ms"]["p50"] == 30.0
    assert figures["write_ms"]["p95"] == 4.0
    assert figures["search_server_ms"]["search_wait"]["p50"] == 2.0
    assert "embed_query" not in figures["search_server_ms"]
    assert figures["errors"] == 1
    assert figures["error_examples"] == ["write: 500 boom"]


def test_the_window_is_10_s_quick_and_30_s_full() -> None:
    assert phase_seconds(50) == 10.0
    assert phase_seconds(150) == 30.0


def test_only_takes_the_concurrency_phase() -> None:
    assert _only_phases("concurrency") == ("concurrency",)


def test_report_prints_the_concurrency_table(capsys: pytest.CaptureFixture[str]) -> None:
    row = clients_figures(2, [client([10.0] * 40, [2.0] * 10)], START, START + 10)
    row |= {"foreign_cpu_cores": 0.4, "load_average_before": [1.5, 1.0, 1.0]}
    results = {
        "label": {
            "mode": "quick", "date": "2026-11-23", "git_commit": "0123456789ab", "cores": 2,
            "cpu": "cpu", "memory_gib": 8, "load_average_at_start": [0.1],
        },
        "config": {"web_workers": 2, "web_threads": 16, "worker_concurrency": 1,
                   "torch_threads": 2, "embed_batch": 64},
        "concurrency": [
            {"memories": 10_000, "searches_per_write": 4, "seconds": 10.0, "k": 10,
             "rows": [row],
             "targets": {"clients": 16, "searches_per_second": 62.0, "search_p95_ms": 250.0,
                         "write_p95_ms": 25.0}},
        ],
    }  # fmt: skip
    report_print(results)
    out = capsys.readouterr().out

    assert "Under concurrency at 10,000 memories" in out
    assert "write p95 < 25" in out
    line = next(line for line in out.splitlines() if line.strip().startswith("2 "))
    assert line.split()[:4] == ["2", "4.0", "10.0", "10.0"]  # clients, searches/s, p50, p95


def test_only_takes_mem0_beside_it() -> None:
    assert _only_phases("concurrency,mem0_concurrency") == ("concurrency", "mem0_concurrency")


def test_the_runners_progress_lines_name_the_monitors_phases() -> None:
    line = "  mem0 | phase mem0_concurrency_16: 16 client(s), 30 s\n"
    assert _runner_phase(line, concurrency=True) == "mem0_concurrency_16"
    assert _runner_phase("  mem0 | adding 10 messages\n", concurrency=True) is None
    assert _runner_phase("  mem0 | adding 10 messages\n", concurrency=False) == "mem0 add"


def test_report_prints_mem0_beside_the_first_level(capsys: pytest.CaptureFixture[str]) -> None:
    mem0_row = {
        "clients": 16, "seconds": 10.0, "searches_per_second": 56.0, "writes_per_second": 12.8,
        "search_ms": {"n": 560, "p50": 224.5, "p95": 273.9, "max": 300.0},
        "write_ms": {"n": 128, "p50": 248.8, "p95": 325.5, "max": 348.9},
        "errors": 1, "error_examples": ["write: OperationalError: boom"],
        "foreign_cpu_cores": 0.01,
    }  # fmt: skip
    results = {
        "concurrency": [{"memories": 10_000}],
        "mem0_concurrency": {
            "memories": 10_250, "mem0_version": "2.2.1", "maxconn": 16, "torch_threads": 2,
            "load": {"per_second": 84.3}, "rows": [mem0_row],
        },
    }  # fmt: skip
    mem0_concurrency_report(results, table, _f)
    out = capsys.readouterr().out

    assert "mem0 2.2.1 beside it" in out
    assert "10,250 memories added first at 84.3/s" in out
    line = next(line for line in out.splitlines() if line.strip().startswith("16 "))
    assert line.split()[:8] == ["16", "56.0", "224.5", "273.9", "12.8", "248.8", "325.5", "348.9"]
    assert "mem0, 16 clients, error: write: OperationalError: boom" in out


def test_report_says_why_mem0_was_not_measured(capsys: pytest.CaptureFixture[str]) -> None:
    mem0_concurrency_report({"mem0_concurrency": {"error": "RuntimeError: pip failed"}}, table, _f)
    assert "mem0 beside it: not measured (RuntimeError: pip failed)" in capsys.readouterr().out
