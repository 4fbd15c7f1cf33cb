"""The LoCoMo evaluation (bench/locomo.py): parsing the data set's quirks, the
evaluation end to end, and its command line."""
# ruff: noqa: E501 - the sample is easier to read one turn a line

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.locomo import EvaluationError, arguments, evaluation_run, locomo_load
from memories.models import Project

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
        ],
    }
]  # fmt: skip


@pytest.fixture
def sample_path(tmp_path):
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(SAMPLE))
    return path


def command_line(*argv):
    """bench/locomo.py run with ``argv`` in a new process (only what fails before
    Django starts: those runs never reach a database)."""
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / "locomo.py"), *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_load_parses_dates_captions_and_malformed_evidence(sample_path):
    [conversation] = locomo_load(sample_path)
    assert [turn.dia_id for turn in conversation.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert conversation.turns[0].date.isoformat() == "2023-05-08T13:56:00+00:00"
    assert (
        conversation.turns[2].content == "Ana: A border collie [shares a photo of a dog on grass]"
    )
    # 'D2:01; D1:2' is two ids with a leading zero; 'D9:9' points to no turn and is dropped
    assert [q.evidence for q in conversation.questions] == [{"D1:1"}, {"D2:1", "D1:2"}, {"D2:1"}]


def test_the_loader_needs_no_django(sample_path):
    """bench/compare_mem0.py reads the file in a process without Django set up."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from bench.locomo import locomo_load; "
        "locomo_load(sys.argv[2]); print('django' in sys.modules)"
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
    reports = json.loads(report_path.read_text())
    assert [report["mode"] for report in reports] == ["keyword", "auto"]
    for report in reports:
        overall = report["categories"]["all"]
        assert overall["questions"] == 3
        # five turns and k up to 20: everything is found
        assert overall["recall@20"] == 100.0
        assert report["categories"]["cat1-4"]["questions"] == 2
        assert set(report["latency_ms"]) == {"p50", "p95"}
    assert reports[0]["categories"]["single-hop"]["recall@5"] == 100.0
    table = capsys.readouterr().out
    assert "recall@10" in table
    assert "auto       all" in table
    assert not Project.objects.filter(name__startswith="locomo-eval-").exists()


def test_set_gives_the_evaluated_project_its_search_settings(db, sample_path):
    reports = evaluation_run(
        arguments([
            str(sample_path), "--modes", "auto", "--keep",
            "--set", "search.neighbour_weight=0", "--set", "search.keyword_weight=1",
        ])
    )  # fmt: skip
    assert reports[0]["categories"]["all"]["recall@20"] == 100.0
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
