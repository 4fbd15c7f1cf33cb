"""bench/ingestion_phase.py without a hub: the figures from a finished document, the
report's lines, and --only documents."""

from __future__ import annotations

import pytest

from bench.ingestion_phase import document_figures
from bench.report import report_print
from bench.run import _only_phases

DOCUMENT = {
    "id": "0b6f7c1e-0000-4000-8000-000000000001",
    "status": "done",
    "chunker": "token_window",
    "chunker_settings": {"window_size": 512, "window_overlap": 50, "encoding": "cl100k_base"},
    "timings": {"parse_ms": 1000, "chunk_ms": 500, "embed_ms": 60_000, "total_ms": 64_000},
    "created_at": "2026-11-23T12:00:00.000000Z",
    "finished_at": "2026-11-23T12:01:04.500000Z",
}


def test_the_figures_divide_pages_and_chunks_by_the_client_seconds() -> None:
    figures = document_figures(DOCUMENT, 80.0, 200, 240)

    assert figures["pages_per_second"] == 2.5
    assert figures["chunks_per_second"] == 3.0
    assert figures["embed_chunks_per_second"] == 4.0  # 240 chunks in embed_ms 60 s
    assert figures["server_seconds"] == 64.5
    assert figures["other_ms"] == 2_500  # total_ms less parse, chunk and embed


def test_the_report_prints_the_documents_table(capsys: pytest.CaptureFixture[str]) -> None:
    results = {
        "label": {
            "mode": "quick", "date": "2026-11-23", "git_commit": "0123456789ab", "cores": 2,
            "cpu": "cpu", "memory_gib": 8, "load_average_at_start": [0.1],
        },
        "config": {"web_workers": 2, "web_threads": 4, "worker_concurrency": 1,
                   "torch_threads": 2, "embed_batch": 64},
        "documents": {
            **document_figures(DOCUMENT, 80.0, 200, 240),
            "pdf_bytes": 3 * 2**20, "words": 80_000, "upload_ms": 50.0,
            "status_seen_at_seconds": {"queued": 0.1, "embedding": 2.0, "done": 80.0},
            "raw_model_per_second": 150.0,
            "bare_model_on_chunks": {
                "batch_size": 32, "seconds": 30.0, "per_second": 8.0, "mean_wordpieces": 490.0,
                "max_seq_length": 256, "chunks_cut_by_model": 240,
            },
            "load_average_before": [1.0, 1.0, 1.0], "load_average_after": [2.0, 1.5, 1.0],
            "foreign_cpu_cores": 0.2,
        },
    }  # fmt: skip
    report_print(results)
    out = capsys.readouterr().out

    assert "Document ingestion: a 200-page PDF (80,000 words, 3.0 MiB), token_window" in out
    assert "240 chunks" in out
    lines = out.splitlines()
    end_to_end = next(line for line in lines if "hub, end to end" in line)
    assert end_to_end.split()[-4:] == ["2.5", "3.0", "80.0", "0.20"]
    assert "bare model on LoCoMo turns (raw model phase): 150.0 texts/s" in out
    assert "240 of 240 longer than the model's 256" in out


def test_a_try_out_can_run_the_documents_phase_alone() -> None:
    assert _only_phases("documents") == ("documents",)
