"""The room phases' arithmetic and tables (bench/buffer_phases.py, bench/report.py); the
measuring itself is the benchmark's, not a test's."""

from datetime import UTC, datetime, timedelta

import pytest

from bench.buffer_phases import SummaryRow, room_messages_planned, summaries_figures, timed_figures
from bench.client import summary
from bench.report import report_print

START = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def rows(count: int, *, every: float = 2.0, seconds: float = 0.5) -> list[SummaryRow]:
    return [
        SummaryRow(
            created_at=START + timedelta(seconds=every * (number + 1)),
            seconds=seconds,
            token_count=100 + 10 * number,
            messages=10,
            summarizer="extractive",
            fallback=False,
        )
        for number in range(count)
    ]


def test_summaries_per_second_run_from_the_first_write_to_the_last_summary() -> None:
    figures = summaries_figures(first_write=START, rows=rows(3), archived=30)
    assert figures["span_seconds"] == 6.0
    assert figures["messages_per_second"] == 5.0  # 30 archived in 6 s
    assert figures["summaries"] == 3
    assert figures["summarizer_seconds_total"] == 1.5
    assert figures["summarizer_seconds_mean"] == 0.5
    assert figures["summarizer_messages_per_second"] == 20.0  # 30 messages in 1.5 s
    assert figures["summarizer_share_of_span"] == 0.25
    assert figures["token_count_p50"] == 110.0
    assert figures["token_count_max"] == 120
    assert figures["summarizers"] == {"extractive": 3}


def test_summaries_unordered_rows_use_the_last_summary() -> None:
    figures = summaries_figures(first_write=START, rows=rows(4)[::-1], archived=40)
    assert figures["span_seconds"] == 8.0


def test_no_summaries_give_no_rates() -> None:
    figures = summaries_figures(first_write=START, rows=[], archived=0)
    assert figures["messages_per_second"] is None
    assert figures["summarizer_messages_per_second"] is None
    assert figures["summarizer_seconds_mean"] is None
    assert figures["token_count_p50"] is None


def test_summaries_without_their_seconds_are_left_out_of_the_summarizer_rate() -> None:
    older = SummaryRow(START + timedelta(seconds=1), None, None, 10, None, True)
    figures = summaries_figures(first_write=START, rows=[older, *rows(1)], archived=20)
    assert figures["messages_per_second"] == 10.0
    assert figures["summarizer_messages_per_second"] == 20.0
    assert figures["fallbacks"] == 1
    assert figures["summarizers"] == {"?": 1, "extractive": 1}


def test_timed_figures_keep_every_part_the_server_timed() -> None:
    measured = [
        (5.0, {"timings_ms": {"load": 1.0, "embed_query": 3.0, "total": 4.0}}),
        (7.0, {"timings_ms": {"load": 2.0, "embed_query": 0.1, "total": 3.0}}),
    ]
    figures = timed_figures(measured)
    assert figures["client_ms"]["p50"] == 6.0
    assert list(figures["server_ms"]) == ["load", "embed_query", "total"]
    assert figures["server_ms"]["load"]["n"] == 2
    assert figures["query_cache_hits"] == 1


@pytest.mark.parametrize("messages, planned", [(1_000, 1_100), (2_050, 2_100)])
def test_room_messages_planned_in_whole_write_batches(messages: int, planned: int) -> None:
    assert room_messages_planned(messages) == planned


def test_report_prints_the_room_tables(capsys: pytest.CaptureFixture[str]) -> None:
    search = timed_figures([(9.0, {"timings_ms": {"total": 8.0, "load": 2.0, "rank": 1.0}})])
    results = {
        "label": {
            "mode": "quick", "date": "2025-01-01", "git_commit": "0123456789ab", "cores": 2,
            "cpu": "cpu", "memory_gib": 8, "load_average_at_start": [0.1],
        },
        "config": {"web_workers": 2, "web_threads": 4, "worker_concurrency": 1,
                   "torch_threads": 2, "embed_batch": 64},
        "buffer": {
            "room_messages": 100, "settings": {"max_size": 10, "buffer_multiplier": 10},
            "limit": 10, "cache_note": "none", "search": search, "methods": {"semantic": 1},
            "searched_min": 100, "unembedded_max": 0, "mean_results": 10.0,
            "window_get": {"client_ms": summary([3.0])},
        },
        "working_memory": {
            "items": 1000, "bytes": 2_000_000, "max_bytes": 52_428_800, "limit": 10,
            "add_ms": summary([2.0]),
            "first_search": {"client_ms": 900.0, "timings_ms": {"total": 880.0},
                             "embedded": 1000, "method": "semantic"},
            "search": search, "embedded_after_first": 0,
        },
        "summaries": {
            "messages": 1000, "capacity": 10, "settings": {"summary_batch_size": 10},
            **summaries_figures(first_write=START, rows=rows(3), archived=30),
            "embedding_per_second": 100.0, "raw_model_per_second": 150.0,
            "writes_seconds": 1.0, "write_batch_ms": summary([50.0]), "seconds_until_done": 7.0,
        },
    }  # fmt: skip
    report_print(results)
    out = capsys.readouterr().out
    assert "Buffer search in a room of 100 messages" in out
    assert "search (no cache)" in out
    assert "the first search embedded 1,000 items" in out
    assert "summarized, first write to last summary" in out
    assert "embedding: the ingestion phase" in out
