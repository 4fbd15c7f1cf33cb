"""Context quality on LoCoMo (bench/context_eval.py, bench/context_scoring.py): the two
tests, the baselines' fitting, the table, and the evaluation end to end on a tiny
conversation."""
# ruff: noqa: E501 - the sample is easier to read one turn a line

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.context_eval import arguments, evaluation_run
from bench.context_scoring import (
    Question,
    Rendered,
    Score,
    SelectionError,
    answer_normalize,
    answer_words,
    budget_table,
    conversations_select,
    last_turns_fit,
    locomo_conversations,
    questions_load,
    ranked_fit,
    score,
)
from bench.locomo import locomo_load
from memories.models import Project
from memories.providers.tokens import token_count

REPO = Path(__file__).resolve().parent.parent.parent

SAMPLE = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "My dog Pixel loves the beach."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Congratulations, what breed is he?"},
                {"speaker": "Ana", "dia_id": "D1:3", "text": "A border collie", "blip_caption": "a dog on grass"},
            ],
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": [
                {"speaker": "Ben", "dia_id": "D2:1", "text": "I started learning the  cello last week."},
                {"speaker": "Ana", "dia_id": "D2:2", "text": "Cool, how are the lessons going?"},
            ],
        },
        "qa": [
            {"question": "What is the name of Ana's dog?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
            {"question": "Nothing to find", "answer": "x", "evidence": ["D9:9"], "category": 2},
            {"question": "Which instrument does Ben learn?", "answer": "The Cello", "evidence": ["D2:01"], "category": 1},
            {"question": "What breed did Ben adopt?", "evidence": ["D1:3"], "category": 5, "adversarial_answer": "a poodle"},
        ],
    },
    {
        "sample_id": "conv-y",
        "conversation": {
            "speaker_a": "Cy",
            "speaker_b": "Di",
            "session_1_date_time": "9:00 am on 1 March, 2023",
            "session_1": [{"speaker": "Cy", "dia_id": "D1:1", "text": "I moved to Lisbon in 2021."}],
        },
        "qa": [{"question": "When did Cy move?", "answer": 2021, "evidence": ["D1:1"], "category": 2}],
    },
]  # fmt: skip

# the last two turns of conv-x as the context renders its history (and the baseline)
LAST_TWO = (
    "[2023-06-20 10:00] Ben: I started learning the cello last week.\n"
    "[2023-06-20 10:00] Ana: Cool, how are the lessons going?"
)


@pytest.fixture
def sample_path(tmp_path):
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(SAMPLE))
    return path


def _question(answer="The Cello", evidence=None, category=1):
    evidence = evidence or {"D2:1": "I started learning the cello last week."}
    return Question("conv-x", "Which instrument?", category, evidence, answer)


# --- the two tests --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("The Cello!", "cello"),
        ('"Nothing is Impossible", "Charlotte\'s Web"', "nothing is impossible charlottes web"),
        ("7 May, 2023", "7 may 2023"),
        ("A  trip to\tthe beach", "trip to beach"),
        ("“Quoted”—dash", "quoteddash"),
    ],
)
def test_answers_are_normalized_as_squad_does(raw, normalized):
    assert answer_normalize(raw) == normalized


def test_an_answer_counts_as_whole_words_and_a_turn_with_any_whitespace():
    rendered = Rendered.of("[2023-05-08] Ana (user): Ana: we went to a\n party, with ART  supplies")
    assert rendered.has_answer("art supplies")
    assert rendered.has_answer("The party")
    assert not rendered.has_answer("art party")
    assert not rendered.has_answer("par")  # inside "party": not a word of the text
    assert not rendered.has_answer("!!")  # nothing left to look for
    assert rendered.has_turn("went to a party,")
    assert rendered.has_turn("we went to a party, with ART supplies")
    assert not rendered.has_turn("with art supplies")  # a turn's text keeps its case
    assert not rendered.has_turn("  ")


@pytest.mark.parametrize(
    ("answer", "text", "found"),
    [
        ("7 May 2023", "[2023-05-07]\nAna: we went", True),  # the context's day line
        ("7 May 2023", "[2023-05-07 14:30] Ana: we went", True),  # a history line
        ("May 7, 2023", "on 7 May, 2023 we", True),
        ("19 January, 2023", "it was January 19th, 2023", True),
        ("7 May 2023", "the 7th of May 2023", True),
        ("7 May 2023", "[2023-05-08] Ana: yesterday", False),
        ("7 May 2023", "on 17 May 2023", False),
        ("May 2023", "[2023-05-07] Ana", True),  # a day of that month
        ("May, 2023", "in 2023-05", True),
        ("June 2023", "[2023-05-07] Ana", False),
        ("13 August", "[2023-08-13] Ben: hi", True),
        ("13 August", "[2023-08-31] Ben: hi", False),
        ("2022", "[2022-03-01] Ben: hi", True),  # a bare year: any date of that year
        ("2022", "[2023-03-01] Ben: in 20222", False),
        # the words beside a date still count, right before it
        ("The sunday before 25 May 2023", "the Sunday before May 25th, 2023", True),
        ("The sunday before 25 May 2023", "[2023-05-25] Ana: the sunday before", False),
        ("Since 2016", "since 2016-04", True),  # a month of 2016 is in 2016
        ("Since 2016", "from 2016-04", False),
    ],
)
def test_dates_count_in_any_format(answer, text, found):
    assert Rendered.of(text).has_answer(answer) is found


def test_dates_become_tokens_and_what_is_no_date_stays():
    assert answer_words("May 7, 2023") == "2023 month202305 day0507 date20230507"
    assert answer_words("Feb. 3rd, 2024") == "2024 month202402 day0203 date20240203"
    assert answer_words("a marble 2023 and 2023-13-01") == "marble 2023 and 20231301"
    assert answer_words("32 May 2023") == "32 2023 month202305"  # no day 32: the month


def test_a_score_counts_evidence_shares_and_no_answer_in_category_5():
    question = _question(
        evidence={"D2:1": "I started learning the cello", "D1:1": "My dog Pixel loves the beach."}
    )
    result = score(question, "Ben: I started  learning the cello last week.", 12)
    assert (result.evidence, result.answer, result.tokens) == (0.5, True, 12)
    assert result.found == {"D2:1"}
    adversarial = score(
        _question(answer=None, category=5), "I started learning the cello last week.", 5
    )
    assert (adversarial.evidence, adversarial.answer) == (1.0, None)


# --- the baselines --------------------------------------------------------------------


def test_the_last_turns_are_the_newest_that_fit_oldest_first():
    lines = [f"[2023-05-0{n}] Ana (user): turn number {n} of the talk" for n in range(1, 8)]
    budget = token_count("\n".join(lines[-3:]))
    assert last_turns_fit(lines, budget) == "\n".join(lines[-3:])
    assert last_turns_fit(lines, budget - 1) == "\n".join(lines[-2:])
    assert last_turns_fit(lines, 10_000) == "\n".join(lines)
    assert last_turns_fit(lines, 3) == ""
    assert last_turns_fit([], 100) == ""


def test_search_results_are_added_in_rank_order_while_they_fit():
    short, long = "[2023-05-01] a: first result", "[2023-05-02] b: " + "word " * 60
    after = "[2023-05-03] c: a smaller one fits"
    budget = token_count(f"{short}\n{after}")
    # the long result does not fit: skipped, and the next one still gets in
    assert ranked_fit([short, long, after], budget) == f"{short}\n{after}"
    assert ranked_fit([short, long, after], budget - 1) == short
    text = ranked_fit([long, short, after] * 5, 50)
    assert token_count(text) <= 50


# --- the data set and the table -------------------------------------------------------


def test_questions_keep_their_gold_answers_beside_bench_locomo(sample_path):
    conversations = locomo_load(sample_path)
    questions = questions_load(sample_path, conversations)
    # "Nothing to find" has no evidence among the turns: left out, as bench/locomo.py does
    assert [(q.conversation, q.category, q.answer) for q in questions] == [
        ("conv-x", 4, "Pixel"), ("conv-x", 1, "The Cello"), ("conv-x", 5, None), ("conv-y", 2, "2021"),
    ]  # fmt: skip
    assert questions[1].evidence == {"D2:1": "I started learning the  cello last week."}
    assert questions[2].groups == ("adversarial", "all")
    assert questions[3].groups == ("temporal", "cat1-4", "all")


def test_conversations_are_picked_by_position_or_sample_id(sample_path):
    conversations = locomo_load(sample_path)
    pick = lambda text: [c.sample_id for c in conversations_select(conversations, text)]  # noqa: E731
    assert pick(None) == pick("1-2") == pick("conv-y,1") == ["conv-x", "conv-y"]
    assert pick("2") == pick("conv-y") == ["conv-y"]
    with pytest.raises(SelectionError, match="'3' is not within 1-2"):
        pick("3")
    with pytest.raises(
        SelectionError, match="no conversation 'conv-z' \\(there are conv-x, conv-y\\)"
    ):
        pick("conv-z")
    assert [c.sample_id for c in locomo_conversations(sample_path, "2")] == ["conv-y"]


def test_the_table_averages_per_category_and_leaves_category_5_out_of_answers():
    questions = [
        _question(category=1),
        _question(category=1),
        _question(category=4),
        _question(answer=None, category=5),
    ]
    found, missed = Score(1.0, True, 10), Score(0.0, False, 10)
    half = Score(0.5, False, 10)
    scores = [
        {"context": found, "last_turns": missed, "search": found},
        {"context": half, "last_turns": missed, "search": found},
        {"context": found, "last_turns": found, "search": missed},
        {"context": Score(1.0, None, 10), "last_turns": Score(0.0, None, 10), "search": Score(0.0, None, 10)},
    ]  # fmt: skip
    table = budget_table(questions, scores)
    assert list(table) == ["multi-hop", "single-hop", "adversarial", "cat1-4", "all"]
    assert table["multi-hop"]["evidence_recall"] == {
        "context": 75.0,
        "last_turns": 0.0,
        "search": 100.0,
    }
    assert table["multi-hop"]["answer_containment"] == {
        "context": 50.0,
        "last_turns": 0.0,
        "search": 100.0,
    }
    assert table["cat1-4"]["answer_containment"] == {
        "context": 66.7,
        "last_turns": 33.3,
        "search": 66.7,
    }
    assert table["adversarial"]["answer_containment"] == {
        "context": None,
        "last_turns": None,
        "search": None,
    }
    assert table["adversarial"]["evidence_recall"]["context"] == 100.0
    assert (table["all"]["questions"], table["all"]["answerable"]) == (4, None)
    assert table["all"]["evidence_recall"]["context"] == 87.5
    assert (table["cat1-4"]["questions"], table["cat1-4"]["answerable"]) == (3, 3)


# --- end to end -----------------------------------------------------------------------


def test_the_evaluation_scores_the_context_and_both_baselines(db, sample_path, tmp_path, capsys):
    budget = token_count(LAST_TWO)  # the last turns hold exactly the last two
    report_path = tmp_path / "report.json"
    report = evaluation_run(
        arguments([
            str(sample_path), "--conversations", "conv-x", "--budgets", f"2000,{budget}",
            "--json", str(report_path),
        ])
    )  # fmt: skip
    assert json.loads(report_path.read_text()) == json.loads(json.dumps(report))
    assert (report["conversations"], report["questions"], report["skipped"]) == (
        ["conv-x"], 3, {"temporal": 1},
    )  # fmt: skip
    assert [b["budget"] for b in report["budgets"]] == [budget, 2000]
    small, large = (b["groups"] for b in report["budgets"])
    # the last turns at the small budget: D2:1 (the cello) is in, D1:1 (the dog) is not
    assert report["budgets"][0]["tokens_mean"]["last_turns"] == budget
    assert small["multi-hop"]["evidence_recall"]["last_turns"] == 100.0
    assert small["multi-hop"]["answer_containment"]["last_turns"] == 100.0
    assert small["single-hop"]["evidence_recall"]["last_turns"] == 0.0
    assert small["single-hop"]["answer_containment"]["last_turns"] == 0.0
    # at 2,000 tokens everything of five turns fits, in all three
    for method in ("context", "last_turns", "search"):
        assert large["all"]["evidence_recall"][method] == 100.0
        assert large["cat1-4"]["answer_containment"][method] == 100.0
    for row in (small, large):
        assert row["adversarial"]["answer_containment"]["context"] is None
    for figures in report["budgets"]:
        assert all(tokens <= figures["budget"] for tokens in figures["tokens_mean"].values())
    # the workers mined every turn (both speakers write as the user): Ana's dog is a fact
    workers = report["workers"]
    assert workers["messages_mined"] == {"done": 5}
    assert workers["facts"]["relationship"] + workers["facts"]["fact"] >= 1
    assert (workers["summaries"], workers["rooms_summarized"]) == (0, 0)
    sections = report["budgets"][1]["context_sections"]
    assert sections["facts"]["answers"] >= 1  # "User has a dog named Pixel."
    # every question's evidence turn lies in some section (which one is the context's call)
    assert sum(section["evidence_turns"] for section in sections.values()) >= 3
    assert report["verdict"]["2000"]["evidence_vs_search"] == 0.0
    assert {"read", "write", "embed", "workers", "questions"} <= set(report["timings_s"])
    table = capsys.readouterr().out
    assert re.search(r"^budget 2000 tokens, 3 questions; mean tokens: context \d", table, re.M)
    assert re.search(r"^cat1-4 +2 +2 +100\.0 +100\.0 +100\.0 +100\.0 +100\.0 +100\.0$", table, re.M)
    assert "(without evidence, left out: temporal 1)" in table
    assert not Project.objects.filter(name__startswith="locomo-eval-").exists()


def test_overflowing_rooms_are_summarized_before_the_questions(db, sample_path):
    report = evaluation_run(
        arguments([
            str(sample_path), "--budgets", "2000", "--keep",
            "--set", "buffer.max_size=1", "--set", "buffer.buffer_multiplier=1",
        ])
    )  # fmt: skip
    workers = report["workers"]
    # a capacity of one message: both of conv-x's sessions overflow (conv-y's does not)
    assert workers["rooms_summarized"] == 2
    assert workers["summaries"] >= 2
    assert workers["messages_archived"] >= 3
    # summarized turns are still the conversation's last turns
    [figures] = report["budgets"]
    assert figures["groups"]["all"]["evidence_recall"]["last_turns"] == 100.0
    assert Project.objects.filter(name__startswith="locomo-eval-").count() == 1


def _command(*argv):
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / "context_eval.py"), *map(str, argv)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--budgets", "1000,lots"], "--budgets: '1000,lots' is not like 1000,2000"),
        (["--budgets", "0"], "--budgets: give one or more positive token counts"),
        (["--conversations", "conv-z"], "no conversation 'conv-z' (there are conv-x, conv-y)"),
        (["--set", "context.history_share=2"], "context.history_share: Must be at most 1.0."),
    ],
)
def test_bad_options_stop_the_command_naming_them(sample_path, options, message):
    done = _command(sample_path, *options)
    assert done.returncode == 2
    assert message in done.stderr


def test_a_missing_file_stops_the_command(tmp_path):
    done = _command(tmp_path / "missing.json")
    assert done.returncode == 2
    assert "missing.json is neither a LoCoMo .json file nor a BEAM folder" in done.stderr
