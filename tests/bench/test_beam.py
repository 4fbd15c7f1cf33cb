"""The evaluation on BEAM-format conversations (bench/beam.py, bench/evaluate.py) and
the plain BM25 baseline (bench/baseline.py). The sample is invented, in BEAM's layout:
the data set itself has no licence and is never copied here."""
# ruff: noqa: E501 - the sample is easier to read one turn a line

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.baseline import PlainBm25
from bench.beam import BeamError, beam_dataset, beam_folders, conversations_parse
from bench.evaluate import arguments, evaluation_run
from bench.rankings import BM25_MODE, EvaluationError, bm25_ranker
from memories.models import Memory, Project, Room
from tests.bench.commands import command_line

REPO = Path(__file__).resolve().parent.parent.parent

CHAT_1 = [
    {
        "batch_number": 1,
        "time_anchor": None,
        "turns": [
            [
                {"role": "user", "id": 0, "time_anchor": "March-15-2024", "index": "1,1", "question_type": "main_question", "content": "Lena here: my new tortoise is named Biscuit ->-> 1,1"},
                {"role": "assistant", "id": 1, "content": "Congratulations! A tortoise needs a warm basking lamp and fresh greens."},
            ],
            [
                {"role": "user", "id": 2, "index": "1,2", "question_type": "followup", "content": "My sister Mara lives in Lisbon and visits every spring ->-> 1,2"},
                {"role": "assistant", "id": 3, "content": "Spring visits sound lovely; Lisbon is beautiful in April."},
            ],
        ],
    },
    {
        "batch_number": 2,
        "time_anchor": None,
        "turns": [
            [
                {"role": "user", "id": 4, "time_anchor": "April-20-2024", "index": "2,1", "content": "We moved Biscuit's enclosure into our garden for summer ->-> 2,1"},
                {"role": "assistant", "id": 5, "content": "Outdoors is great as long as there is shade and shelter."},
                {"role": "user", "id": 6, "question_type": "answer_ai_question", "content": "Honestly I have never owned any pet in my life"},
                {"role": "assistant", "id": 7, "content": "Noted, thanks for clarifying."},
            ]
        ],
    },
    {
        "batch_number": 3,
        "time_anchor": "May-05-2024",
        "turns": [
            [
                {"role": "user", "id": 8, "time_anchor": "June-01-2024", "index": "3,1)", "content": "I started cello lessons with a teacher called Ivo ->-> 3,1)"},
                {"role": "assistant", "id": 9, "content": "Practising scales daily will help a lot."},
            ]
        ],
    },
]  # fmt: skip

QUESTIONS_1 = {
    "abstention": [
        {"question": "What did the vet say about Biscuit's diet?", "ideal_response": "There is no information about a vet."},
        {"question": "Which city did Mara move to last year?", "source_chat_ids": None},
    ],
    "information_extraction": [
        {"question": "What is the name of my tortoise?", "answer": "Biscuit", "source_chat_ids": [0]},
        # 99 names no turn: the evidence is what is left
        {"question": "Who teaches me the cello?", "answer": "Ivo", "source_chat_ids": [8, 99]},
    ],
    "contradiction_resolution": [
        {"question": "Have I ever owned a pet?", "source_chat_ids": {"first_statement": [0], "second_statement": [6]}},
    ],
    "summarization": [{"question": "Summarize our chats.", "source_chat_ids": []}],
}  # fmt: skip

CHAT_2 = [
    {
        "batch_number": 1,
        "time_anchor": "January-10-2025",
        "turns": [
            [
                {"role": "user", "id": 0, "index": "1,1", "content": "I bake sourdough bread every Sunday morning ->-> 1,1"},
                {"role": "assistant", "id": 1, "content": "A weekly bake is a lovely ritual."},
                {"role": "user", "id": 2, "index": "1,2", "content": "My starter is called Gloopy ->-> 1,2"},
                {"role": "assistant", "id": 3, "content": "Gloopy is a fine name for a starter."},
            ]
        ],
    }
]  # fmt: skip

QUESTIONS_2 = {
    "information_extraction": [
        {"question": "What is my sourdough starter called?", "source_chat_ids": [[2]]},
    ],
}


def conversation_write(folder: Path, chat: list, questions: dict) -> None:
    (folder / "probing_questions").mkdir(parents=True)
    (folder / "chat.json").write_text(json.dumps(chat))
    (folder / "probing_questions" / "probing_questions.json").write_text(json.dumps(questions))


@pytest.fixture
def beam_root(tmp_path):
    """A BEAM checkout with two 100K conversations, 1 and 2."""
    root = tmp_path / "beam"
    conversation_write(root / "chats" / "100K" / "1", CHAT_1, QUESTIONS_1)
    conversation_write(root / "chats" / "100K" / "2", CHAT_2, QUESTIONS_2)
    return root


def test_turns_lose_their_marker_and_keep_role_batch_and_order(beam_root):
    dataset = beam_dataset(beam_root, only={1})
    [dialogue] = dataset.dialogues
    assert dialogue.user == "beam-100K-1"
    messages = {message.key: message for message in dialogue.messages}
    assert [m.key for m in dialogue.messages] == [str(i) for i in range(10)]
    assert messages["0"].content == "Lena here: my new tortoise is named Biscuit"
    assert messages["8"].content == "I started cello lessons with a teacher called Ivo"
    assert messages["6"].content == "Honestly I have never owned any pet in my life"
    assert [m.role for m in dialogue.messages[:4]] == ["user", "assistant", "user", "assistant"]
    assert messages["4"].room == "beam-100K-1-batch-2"
    assert messages["4"].metadata == {"batch": 2, "turn_id": 4, "session_date": "2024-04-20"}


def test_dates_follow_the_anchors_and_every_turn_gets_its_own_time(beam_root):
    [dialogue] = beam_dataset(beam_root, only={1}).dialogues
    times = {message.key: message.created_at for message in dialogue.messages}
    assert times["0"] == datetime(2024, 3, 15, tzinfo=UTC)
    assert times["3"] == datetime(2024, 3, 15, 0, 0, 3, tzinfo=UTC)
    # a turn's anchor holds for the turns after it, across the batch without one
    assert times["7"] == datetime(2024, 4, 20, 0, 0, 7, tzinfo=UTC)
    # the batch's anchor wins over a turn's
    assert times["8"] == datetime(2024, 5, 5, 0, 0, 8, tzinfo=UTC)
    ordered = [message.created_at for message in dialogue.messages]
    assert ordered == sorted(set(ordered))


def test_evidence_is_the_union_of_known_ids_and_questions_without_any_are_counted(beam_root):
    dataset = beam_dataset(beam_root)
    assert [(p.text, p.evidence, p.groups) for p in dataset.dialogues[0].probes] == [
        ("What is the name of my tortoise?", {"0"}, ("information_extraction",)),
        ("Who teaches me the cello?", {"8"}, ("information_extraction",)),
        ("Have I ever owned a pet?", {"0", "6"}, ("contradiction_resolution",)),
    ]
    # a nested list of ids counts too
    assert dataset.dialogues[1].probes[0].evidence == {"2"}
    assert dataset.skipped == {"abstention": 2, "summarization": 1}
    assert dataset.order == [
        "all", "abstention", "information_extraction", "contradiction_resolution", "summarization"
    ]  # fmt: skip
    assert (dataset.turns, dataset.questions) == (14, 4)
    assert dataset.description == "BEAM 100K, conversations 1-2"


def test_a_checkout_a_size_folder_or_a_conversation_folder_can_be_given(beam_root):
    size = beam_root / "chats" / "100K"
    assert beam_folders(beam_root) == [size / "1", size / "2"]
    assert beam_folders(beam_root, size="100K", only={2}) == [size / "2"]
    assert beam_folders(size) == [size / "1", size / "2"]
    assert beam_folders(size / "2") == [size / "2"]
    (beam_root / "chats" / "500K").mkdir()
    with pytest.raises(BeamError, match=r"choose one with --size \(there are 100K, 500K\)"):
        beam_folders(beam_root)
    with pytest.raises(BeamError, match="no size '1M'"):
        beam_folders(beam_root, size="1M")
    with pytest.raises(BeamError, match="no conversation 3-4"):
        beam_folders(beam_root, size="100K", only={1, 3, 4})


@pytest.mark.parametrize(
    ("text", "numbers"),
    [("11-20", set(range(11, 21))), ("11,12,15", {11, 12, 15}), ("1-3, 7", {1, 2, 3, 7})],
)
def test_conversations_are_ranges_or_lists(text, numbers):
    assert conversations_parse(text) == numbers


@pytest.mark.parametrize("text", ["eleven", "11-", "20-11", ""])
def test_a_bad_conversation_selection_is_refused(text):
    with pytest.raises(BeamError, match="--conversations"):
        conversations_parse(text)


def test_plain_bm25_ranks_the_obvious_text_first_and_skips_non_matching_ones():
    texts = [
        "We talked about the weather",
        "I started cello lessons with a teacher called Ivo",
        "The garden needs watering",
        "Cello strings are expensive",
        "Lunch was pasta",  # five texts: a word in two has a positive idf
    ]
    index = PlainBm25(texts)
    assert index.top("Who teaches me the cello? Ivo!", 3)[0] == 1
    assert index.top("cello", 10) == [3, 1]  # the shorter text scores higher
    assert index.top("piano", 10) == []
    assert PlainBm25([]).top("anything", 5) == []


def test_evaluation_on_beam_reports_every_type_and_the_bm25_baseline(
    db, beam_root, tmp_path, capsys
):
    report_path = tmp_path / "report.json"
    report = evaluation_run(
        arguments([
            str(beam_root), "--size", "100K", "--conversations", "1-2",
            "--modes", "keyword,auto", "--json", str(report_path),
        ])
    )  # fmt: skip
    assert json.loads(report_path.read_text()) == report
    assert (report["dataset"], report["conversations"], report["turns"]) == ("beam", 2, 14)
    assert report["skipped"] == {"abstention": 2, "summarization": 1}
    assert [mode["mode"] for mode in report["modes"]] == ["keyword", "auto", BM25_MODE]
    for mode in report["modes"]:
        groups = mode["groups"]
        assert set(groups) == {"all", "information_extraction", "contradiction_resolution"}
        assert groups["all"]["questions"] == 4
        assert groups["information_extraction"]["questions"] == 3
    bm25 = report["modes"][2]["groups"]
    # each extraction question names its turn's rare words: plain BM25 puts it first
    assert bm25["information_extraction"]["recall@5"] == 100.0
    # "Have I ever owned a pet?" shares words with turn 6 only: half its evidence
    assert bm25["contradiction_resolution"]["recall@20"] == 50.0
    assert report["modes"][0]["groups"]["information_extraction"]["hit@10"] == 100.0
    table = capsys.readouterr().out
    assert "BEAM 100K, conversations 1-2: 14 turns, 4 questions" in table
    assert "left out: abstention 2, summarization 1" in table
    assert re.search(r"^bm25 \(plain\) +contradiction_resolution +1 +", table, re.MULTILINE)
    assert not Project.objects.filter(name__startswith="beam-eval-").exists()


def test_each_conversation_is_a_user_with_a_room_per_batch(db, beam_root):
    evaluation_run(
        arguments([str(beam_root), "--conversations", "1", "--modes", "keyword", "--keep"])
    )
    [project] = Project.objects.filter(name__startswith="beam-eval-")
    rooms = Room.objects.filter(project=project).order_by("external_id")
    assert [room.external_id for room in rooms] == [f"beam-100K-1-batch-{n}" for n in (1, 2, 3)]
    stored = Memory.objects.filter(project=project).order_by("created_at")
    assert [m.metadata["turn_id"] for m in stored] == list(range(10))
    assert {m.end_user.external_id for m in stored} == {"beam-100K-1"}
    assert stored[8].role == "user" and stored[9].role == "assistant"
    assert stored[8].content == "I started cello lessons with a teacher called Ivo"


def test_bm25_ranks_the_stored_texts_of_the_conversation_user(db, beam_root):
    evaluation_run(arguments([str(beam_root), "--modes", "keyword", "--keep"]))
    [project] = Project.objects.filter(name__startswith="beam-eval-")
    dataset = beam_dataset(beam_root)
    search = bm25_ranker(project=project, dataset=dataset)
    assert search(dataset.dialogues[0])("Who teaches me the cello?")[0] == "8"
    # the second conversation's user: the sourdough turns only, never the cello
    assert search(dataset.dialogues[1])("teacher Ivo cello sourdough") == ["0"]
    # what it ranks is the stored text, not the data set's
    Memory.objects.filter(project=project, metadata__turn_id=8).update(content="violin")
    assert search(dataset.dialogues[0])("Who teaches me the cello?") == []


def test_a_project_loaded_from_other_data_is_an_error(db, beam_root):
    evaluation_run(
        arguments([str(beam_root), "--conversations", "2", "--modes", "keyword", "--keep"])
    )
    [project] = Project.objects.filter(name__startswith="beam-eval-")
    with pytest.raises(EvaluationError, match="has no user 'beam-100K-1'"):
        evaluation_run(arguments([str(beam_root), "--project", project.name, "--modes", "keyword"]))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--size", "1M"], "no size '1M' (there are 100K)"),
        (["--conversations", "2-3"], "no conversation 3"),
        (["--conversations", "two"], "is not like 11-20"),
    ],
)
def test_a_bad_selection_stops_the_command_naming_it(beam_root, argv, message):
    done = command_line(beam_root, *argv)
    assert done.returncode == 2
    assert message in done.stderr


def test_the_reader_needs_no_django(beam_root):
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from bench.beam import beam_dataset; "
        "from pathlib import Path; beam_dataset(Path(sys.argv[2])); print('django' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(REPO), str(beam_root)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
