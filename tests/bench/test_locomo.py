"""The evaluation on LoCoMo (bench/locomo.py, bench/evaluate.py): parsing the data set's
quirks, the evaluation end to end, and its command line."""
# ruff: noqa: E501 - the sample is easier to read one turn a line

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.evaluate import arguments, evaluation_run
from bench.locomo import evidence_ids, locomo_dataset, locomo_load
from bench.rankings import BM25_MODE, EvaluationError
from memories.models import Project
from tests.bench.commands import command_line

REPO = Path(__file__).resolve().parent.parent.parent

SAMPLE = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a puppy named Pixel"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Congratulations, what breed?"},
                {"speaker": "Ana", "dia_id": "D1:3", "text": "A border collie", "blip_caption": "a dog on grass"},
            ],
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": [
                {"speaker": "Ben", "dia_id": "D2:1", "text": "I started learning the cello"},
                {"speaker": "Ana", "dia_id": "D2:2", "text": "Cool, how are the lessons going?"},
            ],
        },
        "qa": [
            {"question": "What is the name of Ana's puppy?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
            {"question": "Which instrument does Ben learn?", "evidence": ["D2:01; D1:2"], "category": 1},
            {"question": "Nothing to find", "evidence": ["D9:9"], "category": 2},
            {"question": "What did Ben start?", "evidence": ["D2:1"], "category": 5},
            {"question": "What breed is the puppy and how are the lessons?", "evidence": ["D2:2 D1:3", "D"], "category": 3},
        ],
    }
]  # fmt: skip


@pytest.fixture
def sample_path(tmp_path):
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(SAMPLE))
    return path


def test_load_parses_dates_captions_and_malformed_evidence(sample_path):
    [conversation] = locomo_load(sample_path)
    assert [turn.dia_id for turn in conversation.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert conversation.turns[0].date.isoformat() == "2023-05-08T13:56:00+00:00"
    assert (
        conversation.turns[2].content == "Ana: A border collie [shares a photo of a dog on grass]"
    )
    # 'D2:01; D1:2' is two ids with a leading zero, so is 'D2:2 D1:3' ('D' names
    # nothing); 'D9:9' points to no turn: its question is left out
    assert [q.evidence for q in conversation.questions] == [
        {"D1:1"}, {"D2:1", "D1:2"}, {"D2:1"}, {"D2:2", "D1:3"}
    ]  # fmt: skip
    assert conversation.skipped == {"temporal": 1}


@pytest.mark.parametrize(
    ("raw", "ids"),
    [
        (["D9:1 D4:4"], {"D9:1", "D4:4"}),
        (["D8:6; D9:17", "D1:2"], {"D8:6", "D9:17", "D1:2"}),
        (["D30:05"], {"D30:5"}),
        (["D:11:26"], {"D11:26"}),
        (["D", ""], set()),
    ],
)
def test_evidence_items_holding_several_ids_give_each(raw, ids):
    assert evidence_ids(raw) == ids


def test_the_dataset_keeps_turns_questions_and_the_category_rows(sample_path):
    dataset = locomo_dataset(sample_path)
    [dialogue] = dataset.dialogues
    assert dialogue.user == "conv-x"
    assert [m.room for m in dialogue.messages] == ["conv-x-session-1"] * 3 + [
        "conv-x-session-2"
    ] * 2
    assert dialogue.messages[2].content == "Ana: A border collie [shares a photo of a dog on grass]"
    assert dialogue.messages[3].metadata == {
        "dia_id": "D2:1", "speaker": "Ben", "session": 2, "session_date": "2023-06-20"
    }  # fmt: skip
    # the adversarial category stays out of "cat1-4"
    assert [p.groups for p in dialogue.probes] == [
        ("single-hop", "cat1-4"), ("multi-hop", "cat1-4"), ("adversarial",), ("open-domain", "cat1-4")
    ]  # fmt: skip
    assert (dataset.turns, dataset.questions, dataset.skipped) == (5, 4, {"temporal": 1})


def test_the_loader_needs_no_django(sample_path):
    """bench/compare_mem0.py reads the file in a process without Django set up."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from bench.locomo import locomo_dataset; "
        "locomo_dataset(sys.argv[2]); print('django' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(REPO), str(sample_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_evaluation_reports_recall_and_cleans_up(db, sample_path, tmp_path, capsys):
    report_path = tmp_path / "report.json"
    evaluation_run(
        arguments([str(sample_path), "--modes", "keyword,auto", "--json", str(report_path)])
    )
    report = json.loads(report_path.read_text())
    assert (report["dataset"], report["questions"], report["skipped"]) == (
        "locomo",
        4,
        {"temporal": 1},
    )
    assert [mode["mode"] for mode in report["modes"]] == ["keyword", "auto", BM25_MODE]
    for mode in report["modes"]:
        assert mode["groups"]["all"]["questions"] == 4
        assert mode["groups"]["cat1-4"]["questions"] == 3
        assert set(mode["latency_ms"]) == {"p50", "p95"}
    keyword, auto, bm25 = (mode["groups"] for mode in report["modes"])
    # five turns and k up to 20: auto (vectors too) finds everything
    assert auto["all"]["recall@20"] == 100.0
    assert keyword["single-hop"]["recall@5"] == bm25["single-hop"]["recall@5"] == 100.0
    # words alone miss D1:3 ("A border collie"): it shares none with "What breed is the
    # puppy and how are the lessons?"
    assert keyword["open-domain"]["recall@20"] == bm25["open-domain"]["recall@20"] == 50.0
    assert {"write", "embed", "keyword", "auto", BM25_MODE} <= set(report["timings_s"])
    table = capsys.readouterr().out
    assert "(without evidence, left out: temporal 1)" in table
    assert re.search(r"^auto +all +4 +[\d.]+ +[\d.]+ +100\.0 ", table, re.MULTILINE)
    assert re.search(r"^bm25 \(plain\) +single-hop +1 +100\.0 ", table, re.MULTILINE)
    assert not Project.objects.filter(name__startswith="locomo-eval-").exists()


def test_set_gives_the_evaluated_project_its_search_settings(db, sample_path):
    report = evaluation_run(
        arguments([
            str(sample_path), "--modes", "auto", "--keep",
            "--set", "search.neighbour_weight=0", "--set", "search.keyword_weight=1",
        ])
    )  # fmt: skip
    assert report["modes"][0]["groups"]["all"]["recall@20"] == 100.0
    [project] = Project.objects.filter(name__startswith="locomo-eval-")
    assert project.settings == {"search": {"neighbour_weight": 0.0, "keyword_weight": 1.0}}


def test_set_on_an_existing_project_is_undone_afterwards(db, sample_path):
    evaluation_run(arguments([str(sample_path), "--modes", "keyword", "--keep"]))
    [project] = Project.objects.filter(name__startswith="locomo-eval-")
    project.settings = {"search": {"rrf_k": 40}}
    project.save()
    evaluation_run(
        arguments([
            str(sample_path), "--project", project.name, "--modes", "hybrid",
            "--set", "search.rrf_k=10",
        ])
    )  # fmt: skip
    project.refresh_from_db()
    assert project.settings == {"search": {"rrf_k": 40}}
    revisions = project.settings_revisions.order_by("pk")
    assert [(r.before, r.after) for r in revisions] == [
        ({"search": {"rrf_k": 40}}, {"search": {"rrf_k": 10}}),
        ({"search": {"rrf_k": 10}}, {"search": {"rrf_k": 40}}),
    ]


def test_an_unknown_project_is_an_error(db, sample_path):
    with pytest.raises(EvaluationError, match="no project 'nope'"):
        evaluation_run(arguments([str(sample_path), "--project", "nope"]))


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("search.keyword_weight=2", "search.keyword_weight: Must be at most 1.0."),
        ("search.bm25_c=1", "search.bm25_c: Unknown setting"),
        ("search.default_mode=fast", "search.default_mode: Must be one of"),
        ("keyword_weight=1", "Expected SECTION.NAME=VALUE"),
    ],
)
def test_a_bad_setting_stops_the_command_naming_it(sample_path, option, message):
    done = command_line(sample_path, "--set", option)
    assert done.returncode == 2
    assert message in done.stderr


def test_bad_modes_and_a_missing_file_stop_the_command(sample_path, tmp_path):
    done = command_line(sample_path, "--modes", "auto,fuzzy")
    assert done.returncode == 2
    assert "unknown modes ['fuzzy']" in done.stderr
    done = command_line(tmp_path / "missing.json")
    assert done.returncode == 2
    assert "missing.json does not exist" in done.stderr
    done = command_line(sample_path, "--conversations", "1-2")
    assert done.returncode == 2
    assert "--size and --conversations select BEAM conversations, not LoCoMo" in done.stderr
