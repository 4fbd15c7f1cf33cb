"""The context phase's arithmetic and table (bench/context_phase.py, bench/report.py); the
measuring itself is the benchmark's, not a test's."""

import argparse
from typing import Any

import pytest

from bench.context_phase import (
    MAX_TOKENS,
    STAGES,
    TARGET_P95_MS,
    concentrated_missing,
    context_figures,
)
from bench.report import report_print
from bench.run import _only_phases


def response(
    total: float, *, embed: float = 10.0, tokens: int = 1_900, notes: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A context answer as the endpoint gives it, every stage 1 ms but the query's embedding."""
    timings = dict.fromkeys(STAGES, 1.0) | {"embed_query": embed, "total": total}
    return {
        "total_tokens": tokens,
        "sections": [
            {"name": "synopsis", "items": [{}]},
            {"name": "history", "items": [{}, {}, {}]},
            {"name": "retrieved", "items": [{}] * 10},
        ],
        "notes": list(notes),
        "timings_ms": timings,
    }


def calls(client: list[float], **options: Any) -> list[tuple[float, dict[str, Any]]]:
    return [(ms, response(ms - 2.0, **options)) for ms in client]


@pytest.mark.parametrize(
    "held, project, missing",
    [
        (10_000, 1_000_000, 90_000),  # the target: 100,000 of 1,000,000
        (150_000, 1_000_000, 0),  # holds more already
        (25, 620, 37),
        (0, 0, 0),
    ],
)
def test_concentrated_missing_tops_the_user_up_to_a_tenth(held, project, missing) -> None:
    assert concentrated_missing(held, project) == missing


def test_context_figures_give_client_server_and_every_stage() -> None:
    figures = context_figures(calls([20.0, 30.0, 40.0, 50.0, 100.0]))
    assert figures["n"] == 5
    assert figures["max_tokens"] == MAX_TOKENS
    assert figures["client_ms"]["p50"] == 40.0
    assert figures["client_ms"]["p95"] == 90.0
    assert figures["server_ms"]["total"]["p50"] == 38.0
    assert set(figures["server_ms"]) == {"total", *STAGES}
    assert figures["server_ms"]["embed_query"]["p50"] == 10.0
    assert figures["server_ms"]["rendering"]["n"] == 5
    assert figures["target_p95_ms"] == TARGET_P95_MS
    assert figures["meets_target"] is False  # p95 90 ms
    assert figures["total_tokens"]["p50"] == 1_900.0
    assert figures["mean_items"] == {"history": 3.0, "retrieved": 10.0, "synopsis": 1.0}


def test_context_figures_meet_the_target_below_60_ms() -> None:
    assert context_figures(calls([20.0] * 19 + [59.0]))["meets_target"] is True


def test_context_figures_count_cache_hits_notes_and_missing_stages() -> None:
    measured = calls([20.0, 21.0], embed=0.1, notes=("keyword search and recency only",))
    del measured[0][1]["timings_ms"]["working"]  # a server without that stage
    figures = context_figures(measured)
    assert figures["query_cache_hits"] == 2
    assert figures["notes"] == {"keyword search and recency only": 2}
    assert figures["server_ms"]["working"]["n"] == 1


def test_no_calls_give_no_figures() -> None:
    figures = context_figures([])
    assert figures["n"] == 0
    assert figures["client_ms"]["p95"] is None
    assert figures["meets_target"] is None


def test_only_takes_the_context_phase() -> None:
    assert _only_phases("context") == ("context",)
    with pytest.raises(argparse.ArgumentTypeError, match="context"):
        _only_phases("contexts")


FIRST_CALL = {"total": 880.0, "token_counting": 800.0, "accounting": 60.0, "facts": 2.0}


def entry(memories: int, user_memories: int, client: list[float], **extra: Any) -> dict:
    return {
        "memories": memories, "user": "user-007", "user_memories": user_memories,
        "concentrated": False, "moved": None, "warmup": 10, **context_figures(calls(client)),
        "first_call_ms": 900.0, "first_call_timings_ms": FIRST_CALL, "foreign_cpu_cores": 0.1,
        **extra,
    }  # fmt: skip


def label() -> dict:
    return {
        "label": {
            "mode": "full", "date": "2025-01-01", "git_commit": "0123456789ab", "cores": 2,
            "cpu": "cpu", "memory_gib": 8, "load_average_at_start": [0.1],
        },
        "config": {"web_workers": 2, "web_threads": 4, "worker_concurrency": 1,
                   "torch_threads": 2, "embed_batch": 64},
    }  # fmt: skip


def test_report_prints_the_context_table(capsys: pytest.CaptureFixture[str]) -> None:
    results = {
        **label(),
        "context": {
            "100000": entry(100_000, 1_000, [30.0, 40.0]),
            "1000000": entry(1_000_000, 10_000, [35.0, 45.0]),
            "1000000 concentrated": entry(
                1_000_000, 100_000, [50.0, 80.0], concentrated=True, moved=90_000
            ),
        },
    }
    report_print(results)
    out = capsys.readouterr().out
    assert "Context build (POST /api/v1/context/, no room, max_tokens 2,000)" in out
    assert "target p95 < 60.0 ms" in out
    assert "1,000,000 (concentrated)" in out
    assert "at 1,000,000: user-007 holds the most, 10,000 (1%); no user reaches 100,000" in out
    assert "given other users' rooms holding 90,000 active messages, holds 100,000 (10%)" in out
    assert (
        "at 100,000: user-007 holds the most, 1,000 (1%)\n    first call 900.0 ms "
        "(token_counting 800.0, accounting 60.0, one-off loads and the whole history's tokens); "
        "total_tokens p50 1,900.0, max 1,900.0; mean items: history 3.0, retrieved 10.0, "
        "synopsis 1.0; query-cache hits 0; other CPU 0.10" in out
    )
    lines = [line for line in out.splitlines() if line.startswith("  1,000,000")]
    assert lines[0].rstrip().endswith("yes")  # p95 44.5 ms
    assert lines[1].rstrip().endswith("NO")  # p95 78.5 ms
