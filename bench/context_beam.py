"""BEAM for bench/context_eval.py, without Django: the conversations as bench/beam.py
reads them for bench/evaluate.py, their questions as bench/context_scoring scores them,
and the measures of a knowledge update's and a contradiction's sides.

Each conversation is one end user, each batch a room (bench/beam.py). A question is
asked in the conversation's last batch's room: the conversation under way when it is
asked. Its evidence is the turns its source_chat_ids name (their union; abstention
questions have none and are left out, as bench/evaluate.py leaves them out), each
turn's text as stored (the plan marker stripped). The evidence test is a substring of
the whitespace-collapsed text: a turn counts only whole. The context never cuts a turn
(memories/services/context/sources.turn_text renders a memory whole; a line that does
not fit its section is left out), so an assistant turn of ~650 words (~900 tokens)
either fits whole or is dropped; the baselines add a line only whole too.

Answer containment is reported only for the questions whose "answer" is short (at most
SHORT_ANSWER_WORDS words once normalized: "$6,200", "March 27", "Five days"; mostly
knowledge updates): a sentence-long answer ("You said you met your partner at ...") is
a paraphrase no context holds word for word. The other types have no "answer" at all
(contradictions, instructions, preferences, summaries).

Per method and budget, besides evidence recall per question type (sides_table):

* knowledge_update (source_chat_ids {"original_info": [...], "updated_info": [...]}):
  **newest value present**, the share of the questions with a turn of updated_info in
  the text, and **old value alone**, the share with a turn of original_info and none of
  updated_info;
* contradiction_resolution ({"first_statement": [...], "second_statement": [...]}):
  **both statements present**, the share with a turn of each.

A question counts there only when both of its sides name turns of the conversation (one
knowledge update of the dev split names no updated turn).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.beam import QUESTIONS, _ids, beam_dataset, beam_folders
from bench.context_scoring import METHODS, Layout, Question, Score, answer_normalize
from bench.dataset import Dataset, Dialogue

SHORT_ANSWER_WORDS = 5
KNOWLEDGE_UPDATE = "knowledge_update"
CONTRADICTION = "contradiction_resolution"
# a question type's two sides, older first
SIDES = {
    KNOWLEDGE_UPDATE: ("original_info", "updated_info"),
    CONTRADICTION: ("first_statement", "second_statement"),
}
ANSWERS_NOTE = (
    f"answer containment: BEAM questions whose answer has at most {SHORT_ANSWER_WORDS} "
    "words (longer answers are sentences no text holds word for word)"
)


def beam_read(
    path: Path, *, size: str | None, only: set[int] | None
) -> tuple[Dataset, list[Question], Layout]:
    """The conversations of ``path`` (bench/beam.beam_folders) as bench/evaluate.py
    writes them, their questions with evidence, and the table's rows (the question
    types in the files' order, then "all")."""
    dataset = beam_dataset(path, size=size, only=only)
    folders = beam_folders(path, size=size, only=only)
    questions = []
    for folder, dialogue in zip(folders, dataset.dialogues, strict=True):
        raw = json.loads((folder / QUESTIONS).read_text())
        questions += dialogue_questions(dialogue, raw)
    types = [group for group in dataset.order if group != "all"]
    layout = Layout(order=(*types, "all"), answers_row="all")
    return dataset, questions, layout


def _kept(raw: dict[str, list[dict[str, Any]]], known: set[str]) -> Iterator[tuple[str, dict]]:
    """(question type, question) of those with evidence among the ``known`` turn ids,
    in the file's order: bench/beam.probes_read's."""
    for question_type, items in raw.items():
        for item in items:
            if set(_ids(item.get("source_chat_ids"))) & known:
                yield question_type, item


def dialogue_questions(dialogue: Dialogue, raw: dict[str, list[dict[str, Any]]]) -> list[Question]:
    """The questions of one conversation (its probing_questions.json, ``raw``) that
    bench/beam.py keeps, asked in the room of its last batch."""
    texts = {message.key: message.content for message in dialogue.messages}
    room = dialogue.messages[-1].room if dialogue.messages else None
    questions = []
    kept = _kept(raw, set(texts))
    for (question_type, item), probe in zip(kept, dialogue.probes, strict=True):
        source = item.get("source_chat_ids")
        sides = {
            side: frozenset(_ids(ids)) & frozenset(texts)
            for side, ids in (source.items() if isinstance(source, dict) else ())
        }
        questions.append(
            Question(
                conversation=dialogue.user,
                text=probe.text,
                category=0,
                evidence={key: texts[key] for key in sorted(probe.evidence, key=int)},
                answer=short_answer(item.get("answer")),
                question_type=question_type,
                room=room,
                sides=sides,
            )
        )
    return questions


def short_answer(answer: Any) -> str | None:
    """The answer when it is short enough to look for word for word, else None."""
    if answer is None:
        return None
    words = answer_normalize(str(answer)).split()
    return str(answer) if 0 < len(words) <= SHORT_ANSWER_WORDS else None


# --- the sides ------------------------------------------------------------------------


def _side_measures(question: Question, found: frozenset[str]) -> dict[str, bool] | None:
    """The side measures of one question's text (found: the evidence turns in it);
    None when the question has no two sides with turns."""
    names = SIDES.get(question.question_type or "")
    if names is None:
        return None
    older, newer = (question.sides.get(name, frozenset()) for name in names)
    if not older or not newer:
        return None
    has_older, has_newer = bool(older & found), bool(newer & found)
    if question.question_type == KNOWLEDGE_UPDATE:
        return {"newest_present": has_newer, "old_alone": has_older and not has_newer}
    return {"both_present": has_older and has_newer}


def sides_table(
    questions: Sequence[Question], scores: Sequence[dict[str, Score]]
) -> dict[str, dict[str, Any]]:
    """Per question type with sides (knowledge_update, contradiction_resolution): the
    questions counted and each measure's share in percent per method."""
    measured: dict[str, dict[str, dict[str, list[float]]]] = {}
    counts: dict[str, int] = {}
    for question, by_method in zip(questions, scores, strict=True):
        if _side_measures(question, frozenset()) is None:
            continue
        kind = str(question.question_type)
        counts[kind] = counts.get(kind, 0) + 1
        for method in METHODS:
            values = _side_measures(question, by_method[method].found) or {}
            for measure, value in values.items():
                row = measured.setdefault(kind, {}).setdefault(measure, {})
                row.setdefault(method, []).append(1.0 if value else 0.0)
    return {
        kind: {
            "questions": counts[kind],
            **{
                measure: {m: round(100 * statistics.fmean(v[m]), 1) for m in METHODS}
                for measure, v in measured[kind].items()
            },
        }
        for kind in (KNOWLEDGE_UPDATE, CONTRADICTION)
        if kind in counts
    }
