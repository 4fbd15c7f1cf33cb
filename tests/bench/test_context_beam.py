"""bench/context_eval.py on BEAM-format conversations (bench/context_beam.py): the room
each question is asked in, the knowledge update's and the contradiction's sides. The
sample is invented, in BEAM's layout (tests/bench/test_beam.py): the data set has no
licence and is never copied here."""
# ruff: noqa: E501 - the sample is easier to read one turn a line

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.context_beam import beam_read, dialogue_questions, short_answer, sides_table
from bench.context_eval import arguments, evaluation_run
from bench.context_scoring import Question, Score
from bench.dataset import Dialogue, Message, Probe
from bench.rankings import EvaluationError
from memories.models import Project, Room
from tests.bench.test_beam import CHAT_1, QUESTIONS_1, conversation_write

REPO = Path(__file__).resolve().parent.parent.parent

UPDATE = {
    "batch_number": 4,
    "time_anchor": "June-20-2024",
    "turns": [
        [
            {"role": "user", "id": 10, "index": "4,1", "content": "Update: Ivo moved my cello lesson from Monday to Thursday evenings ->-> 4,1"},
            {"role": "assistant", "id": 11, "content": "Thursday evenings it is, enjoy the lessons."},
        ]
    ],
}  # fmt: skip
QUESTIONS = {
    **QUESTIONS_1,
    "knowledge_update": [
        {"question": "On which day is my cello lesson?", "answer": "Thursday evenings", "source_chat_ids": {"original_info": [8], "updated_info": [10]}},
    ],
}  # fmt: skip


def test_questions_are_asked_in_the_last_batch_with_their_sides():
    messages = [
        Message(key=str(i), room=f"u-batch-{1 + i // 2}", role="user", content=f"turn {i}",
                created_at=None, metadata={})  # type: ignore[arg-type]
        for i in range(4)
    ]  # fmt: skip
    raw = {
        "knowledge_update": [
            {
                "question": "q?",
                "answer": "Thursday",
                "source_chat_ids": {"original_info": [0], "updated_info": [3, 99]},
            }
        ]
    }
    probe = Probe(text="q?", evidence={"0", "3"}, groups=("knowledge_update",))
    [question] = dialogue_questions(Dialogue(user="u", messages=messages, probes=[probe]), raw)
    assert question.room == "u-batch-2"  # the last batch's room
    assert question.sides == {"original_info": {"0"}, "updated_info": {"3"}}
    assert question.answer == "Thursday" and question.groups == ("knowledge_update", "all")
    assert short_answer("You told me that you moved the lessons to Thursday evenings") is None


def test_the_newest_value_present_and_the_old_value_alone_are_told_apart():
    raw = {
        "knowledge_update": [
            {"question": "q?", "source_chat_ids": {"original_info": [0], "updated_info": [1]}}
        ]
    }
    messages = [
        Message(
            key=str(i),
            room="u-batch-1",
            role="user",
            content=f"turn {i}",
            created_at=None,
            metadata={},
        )  # type: ignore[arg-type]
        for i in range(2)
    ]
    [question] = dialogue_questions(
        Dialogue(
            user="u", messages=messages, probes=[Probe("q?", {"0", "1"}, ("knowledge_update",))]
        ),
        raw,
    )

    def found(*keys: str) -> Score:
        return Score(len(keys) / 2, None, 10, frozenset(keys))

    table = sides_table(
        [question, question],
        [
            {"context": found("1"), "last_turns": found("0"), "search": found("0", "1")},
            {"context": found("0", "1"), "last_turns": found(), "search": found("0")},
        ],
    )
    update = table["knowledge_update"]
    assert update["questions"] == 2
    assert update["newest_present"] == {"context": 100.0, "last_turns": 0.0, "search": 50.0}
    assert update["old_alone"] == {"context": 0.0, "last_turns": 50.0, "search": 50.0}


def test_the_evaluation_on_beam_scores_every_type_and_the_sides(db, tmp_path, capsys):
    root = tmp_path / "beam"
    conversation_write(root / "chats" / "100K" / "1", [*CHAT_1, UPDATE], QUESTIONS)
    report_path = tmp_path / "report.json"
    report = evaluation_run(
        arguments([str(root), "--size", "100K", "--budgets", "2000", "--json", str(report_path)])
    )
    assert json.loads(report_path.read_text()) == json.loads(json.dumps(report))
    [budget] = report["budgets"]
    groups = budget["groups"]
    assert set(groups) >= {
        "information_extraction",
        "contradiction_resolution",
        "knowledge_update",
        "all",
    }
    # a small conversation fits the budget whole: every method holds every turn
    assert groups["all"]["evidence_recall"]["context"] == 100.0
    assert budget["sides"]["knowledge_update"]["newest_present"]["context"] == 100.0
    assert budget["sides"]["contradiction_resolution"]["both_present"]["context"] == 100.0
    # the room of the last batch is the conversation under way: its turns are history
    assert budget["context_sections"]["history"]["tokens_mean"] > 0
    assert "knowledge_update" in capsys.readouterr().out


def test_a_beam_folder_gives_questions_in_the_last_batch_room_and_rows_per_type(tmp_path):
    root = tmp_path / "beam"
    conversation_write(root / "chats" / "100K" / "1", [*CHAT_1, UPDATE], QUESTIONS)
    dataset, questions, layout = beam_read(root, size="100K", only={1})
    assert {question.room for question in questions} == {"beam-100K-1-batch-4"}
    by_text = {question.text: question for question in questions}
    contradiction = by_text["Have I ever owned a pet?"]
    assert contradiction.sides == {"first_statement": {"0"}, "second_statement": {"6"}}
    assert contradiction.answer is None  # it has no "answer", only an ideal one
    assert by_text["On which day is my cello lesson?"].answer == "Thursday evenings"
    assert layout.order[-1] == "all" and layout.answers_row == "all"
    assert "knowledge_update" in layout.order
    assert dataset.skipped == {"abstention": 2, "summarization": 1}


@pytest.mark.parametrize(
    ("answer", "short"),
    [
        ("$6,200", "$6,200"),
        ("The deadline is May 20.", "The deadline is May 20."),  # "the" is no word
        ("You said you met your partner at ArtSpace Gallery.", None),
        (None, None),
        ("!!", None),
    ],
)
def test_only_short_answers_are_looked_for(answer, short):
    assert short_answer(answer) == short


def test_contradictions_need_both_statements_and_a_side_without_turns_is_not_counted():
    def question(question_type, sides):
        return Question("u", "q?", 0, {}, None, question_type, None, sides)

    def found(*keys):
        return Score(1.0, None, 10, frozenset(keys))

    contradiction = question(
        "contradiction_resolution",
        {"first_statement": frozenset({"2"}), "second_statement": frozenset({"8", "9"})},
    )
    no_update = question(
        "knowledge_update", {"original_info": frozenset({"0"}), "updated_info": frozenset()}
    )
    table = sides_table(
        [contradiction, no_update, question("information_extraction", {})],
        [
            {"context": found("2", "9"), "last_turns": found("8"), "search": found("2")},
            {"context": found("0"), "last_turns": found("0"), "search": found()},
            {"context": found(), "last_turns": found(), "search": found()},
        ],
    )
    assert table == {
        "contradiction_resolution": {
            "questions": 1,
            "both_present": {"context": 100.0, "last_turns": 0.0, "search": 0.0},
        }
    }


def test_a_kept_project_without_the_last_batch_room_is_an_error(db, tmp_path):
    root = tmp_path / "beam"
    conversation_write(root / "chats" / "100K" / "1", CHAT_1, QUESTIONS_1)
    evaluation_run(arguments([str(root), "--budgets", "500", "--keep"]))
    [project] = Project.objects.filter(name__startswith="beam-eval-")
    Room.objects.filter(project=project, external_id="beam-100K-1-batch-3").delete()
    with pytest.raises(EvaluationError, match="has no room 'beam-100K-1-batch-3'"):
        evaluation_run(arguments([str(root), "--budgets", "500", "--project", project.name]))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--size", "1M"], "no size '1M' (there are 100K)"),
        (["--conversations", "2"], "no conversation 2"),
        (["--conversations", "two"], "is not like 11-20"),
    ],
)
def test_a_bad_beam_selection_stops_the_command_naming_it(tmp_path, options, message):
    root = tmp_path / "beam"
    conversation_write(root / "chats" / "100K" / "1", CHAT_1, QUESTIONS_1)
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "context_eval.py"), str(root), *options],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert message in done.stderr


def test_size_is_refused_for_a_locomo_file(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text("[]")
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "context_eval.py"), str(path), "--size", "100K"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--size picks BEAM conversations, not LoCoMo" in done.stderr
