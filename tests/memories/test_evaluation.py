"""The LoCoMo evaluation: parsing the data set's quirks, and the command end to end."""
# ruff: noqa: E501 - the sample is easier to read one turn a line

import json
from io import StringIO

import pytest
from django.core.management import call_command

from memories.evaluation import locomo_load
from memories.models import Project

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


def test_load_parses_dates_captions_and_malformed_evidence(sample_path):
    [conversation] = locomo_load(sample_path)
    assert [turn.dia_id for turn in conversation.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert conversation.turns[0].date.isoformat() == "2023-05-08T13:56:00+00:00"
    assert (
        conversation.turns[2].content == "Ana: A border collie [shares a photo of a dog on grass]"
    )
    # 'D2:01; D1:2' is two ids with a leading zero; 'D9:9' points to no turn and is dropped
    assert [q.evidence for q in conversation.questions] == [{"D1:1"}, {"D2:1", "D1:2"}, {"D2:1"}]


def test_command_reports_recall_and_cleans_up(db, sample_path, tmp_path):
    out = StringIO()
    report_path = tmp_path / "report.json"
    call_command(
        "evaluate_locomo",
        str(sample_path),
        "--modes",
        "keyword,auto",
        "--json",
        str(report_path),
        stdout=out,
    )
    reports = json.loads(report_path.read_text())
    assert [report["mode"] for report in reports] == ["keyword", "auto"]
    for report in reports:
        overall = report["categories"]["all"]
        assert overall["questions"] == 3
        # five turns and k up to 20: everything is found
        assert overall["recall@20"] == 100.0
        assert report["categories"]["cat1-4"]["questions"] == 2
    assert reports[0]["categories"]["single-hop"]["recall@5"] == 100.0
    assert "recall@10" in out.getvalue()
    assert not Project.objects.filter(name__startswith="locomo-eval-").exists()
