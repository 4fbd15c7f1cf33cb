"""The maintenance phases' arithmetic and tables (bench/maintenance_phases.py,
bench/report.py); the measuring itself is the benchmark's, not a test's."""

from datetime import UTC, datetime, timedelta

import pytest

from bench.maintenance_phases import (
    NOT_AVAILABLE,
    access_block_order,
    access_figures,
    extractor_rate,
    fact_messages_planned,
    facts_figures,
    fifo_cap,
    importance_figures,
    maintenance_level,
)
from bench.report import report_print

START = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def extraction(status: str, facts: int, seconds: float) -> tuple[str, int, datetime]:
    return status, facts, START + timedelta(seconds=seconds)


def searches(client: list[float], embed: float = 5.0) -> list[tuple[float, dict]]:
    return [
        (ms, {"timings_ms": {"total": ms - 1.0, "embed_query": embed}, "results": [1] * 10})
        for ms in client
    ]


@pytest.mark.parametrize(
    "levels, level",
    [((), None), ((100_000, 1_000_000), 100_000), ((30_000,), 30_000), ((5, 200_000), 5)],
)
def test_maintenance_level_is_100000_when_the_run_has_it(levels, level) -> None:
    assert maintenance_level(levels) == level


def test_fact_messages_planned_in_whole_write_batches() -> None:
    assert fact_messages_planned(2_000) == 2_000
    assert fact_messages_planned(1_050) == 1_000


def test_access_blocks_alternate_abba_and_come_out_even() -> None:
    order = access_block_order(3)
    assert order == [True, False, False, True, True, False]
    assert order.count(True) == order.count(False) == 3


def test_facts_per_second_run_from_the_first_write_to_the_last_extraction() -> None:
    rows = [
        extraction("done", 2, 4.0),
        extraction("done", 0, 10.0),  # the last one, out of order
        extraction("skipped", 0, 1.0),
        extraction("done", 1, 6.0),
    ]
    figures = facts_figures(
        first_write=START, rows=rows, created={"fact": 2, "goal": 1}, messages=4
    )
    assert figures["span_seconds"] == 10.0
    assert figures["messages_per_second"] == 0.4
    assert figures["statuses"] == {"done": 3, "skipped": 1}
    assert figures["facts_created"] == 3
    assert figures["facts_created_by_kind"] == {"fact": 2, "relationship": 0, "goal": 1}
    assert figures["facts_created_or_reinforced"] == 3
    assert figures["messages_with_facts"] == 2
    assert figures["share_with_facts"] == 0.5


def test_no_extractions_give_no_rate() -> None:
    figures = facts_figures(first_write=START, rows=[], created={}, messages=10)
    assert figures["messages_per_second"] is None
    assert figures["share_with_facts"] == 0.0


def test_the_bare_extractor_counts_what_it_drafts() -> None:
    figures = extractor_rate(["I live in Lisbon and I work at Acme.", "Is it raining?"])
    assert figures["texts"] == 2
    assert figures["drafts"] == 2
    assert figures["texts_with_drafts"] == 1
    assert figures["per_second"] > 0


def test_access_figures_compare_tracking_on_with_off() -> None:
    figures = access_figures(searches([10.0, 12.0, 14.0]), searches([9.0, 11.0, 13.0]))
    assert figures["on"]["client_ms"]["p50"] == 12.0
    assert figures["off"]["client_ms"]["p50"] == 11.0
    assert figures["on"]["client_minus_embed_ms"]["p50"] == 7.0
    assert figures["on"]["mean_results"] == 10.0
    assert figures["on_minus_off"]["client_ms_p50"] == 1.0
    assert figures["on_minus_off"]["server_total_ms_p50"] == 1.0


@pytest.mark.parametrize(
    "counts, target, cap, selected",
    [
        ([100, 100, 100, 100], 40, 90, 40),  # 10 of each group
        ([1_000, 10, 10], 102, 898, 102),  # only the large group is over the cap
        ([5, 5], 0, 5, 0),  # nothing to select: the largest count
        ([50, 40], 1_000, 1, 88),  # more than there is: the cap cannot go below 1
        ([], 10, 1, 0),
    ],
)
def test_fifo_cap_selects_closest_to_the_target(counts, target, cap, selected) -> None:
    assert fifo_cap(counts, target) == (cap, selected)


def test_fifo_cap_takes_the_closer_of_the_two_caps_around_the_target() -> None:
    # cap 2 selects 3 (of 9 in three groups of 3), cap 1 selects 6: target 5 is closer to 6
    assert fifo_cap([3, 3, 3], 5) == (1, 6)
    assert fifo_cap([3, 3, 3], 4) == (2, 3)


def test_importance_figures_give_rates_and_the_start_up() -> None:
    measured = {
        "memories": 100_000,
        "first": {"seconds": 4.0, "changed": 99_000},
        "repeat": {"seconds": 1.0, "changed": 10},
    }
    figures = importance_figures(measured, process_seconds=8.0)
    assert figures["first"]["memories_per_second"] == 25_000
    assert figures["repeat"]["changed"] == 10
    assert figures["startup_seconds"] == 3.0


def label() -> dict:
    return {
        "label": {
            "mode": "quick", "date": "2025-01-01", "git_commit": "0123456789ab", "cores": 2,
            "cpu": "cpu", "memory_gib": 8, "load_average_at_start": [0.1],
        },
        "config": {"web_workers": 2, "web_threads": 4, "worker_concurrency": 1,
                   "torch_threads": 2, "embed_batch": 64},
    }  # fmt: skip


def test_report_prints_the_maintenance_tables(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [extraction("done", 1, 5.0), extraction("done", 0, 10.0)]
    importance = {
        "memories": 100_000,
        "first": {"seconds": 4.0, "changed": 99_000},
        "repeat": {"seconds": 1.0, "changed": 10},
    }
    run = {"command_seconds": 5.0, "run_seconds": 2.5, "removed": 0, "run_status": "ok",
           "counts": {"fifo": 10_000}}  # fmt: skip
    results = {
        **label(),
        "facts": {
            "messages": 2, **facts_figures(first_write=START, rows=rows, created={"fact": 1},
                                           messages=2),
            "bare_extractor": extractor_rate(["I live in Lisbon."]),
            "backlog": {"unmined_at_start": 5, "unmined_left": 0, "waited_seconds": 1.0},
        },
        "access_tracking": {
            "memories": 100_000, "mode": "auto", "filter": "user", "block": 10,
            **access_figures(searches([10.0]), searches([9.0])),
        },
        "importance": {**importance_figures(importance, 8.0), "active_memories": 100_000},
        "pruning": {
            "memories": 100_000, "fifo_per_user_kind": 900, "expected": 10_000,
            "dry_run": run, "real_run": {**run, "removed": 10_000}, "startup_seconds": 3.0,
        },
    }  # fmt: skip
    report_print(results)
    out = capsys.readouterr().out
    assert "mined, first write to last extraction" in out
    assert "messages that yielded a fact 1 (50%)" in out
    assert "access tracking on and off at 100,000 memories" in out
    assert "on - off" in out
    assert "first run at this level" in out
    assert "fifo_per_user_kind 900" in out
    assert "fifo 10,000" in out


def test_report_says_when_pruning_was_skipped(capsys: pytest.CaptureFixture[str]) -> None:
    report_print({**label(), "pruning": {"skipped": NOT_AVAILABLE}})
    assert f"Pruning: {NOT_AVAILABLE}" in capsys.readouterr().out
