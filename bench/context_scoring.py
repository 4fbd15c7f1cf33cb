"""What bench/context_eval.py scores, without Django: the questions with their evidence
turns and gold answers (LoCoMo's here, BEAM's in bench/context_beam.py), the two tests
(an evidence turn's text in a rendered text, a normalized gold answer in it), the two
baselines fitted to a budget, and the table per budget (bench/context_report.py prints
it).

* **Evidence recall**: the share of a question's evidence turns whose text (whitespace
  collapsed) is a substring of the rendered text (whitespace collapsed).
* **Answer containment**: whether the gold answer appears in the text as whole words,
  both normalized alike: every date first written as tokens of its own whatever its
  format (dates_canonical), then lower case, punctuation and the articles a/an/the
  removed, whitespace collapsed (SQuAD's normalization). A date of a day (2023-05-07,
  "7 May 2023", "7th of May, 2023", "May 7, 2023", "7 May, 2023") becomes "2023
  month202305 day0507 date20230507", a month ("May 2023", "May, 2023", "2023-05")
  "2023 month202305", a day without a year ("13 August", "August 13") "day0813": so
  an answer "7 May 2023" is found in a line dated "[2023-05-07]", an answer "May 2023"
  in any text naming a day of May 2023 (as "May 2023" was always found in "7 May 2023")
  and a bare year in any date of that year; the rest of the answer stays as it is ("The
  sunday before 25 May 2023" still needs "sunday before" right before the date). This
  is the only answer scoring: LoCoMo's categories 1-4 (5 is adversarial: no answer in
  the conversation), BEAM's short answers.
"""

from __future__ import annotations

import json
import re
import statistics
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.locomo import CATEGORIES, Conversation, evidence_ids, locomo_load
from memories.providers.tokens import token_count

METHODS = ("context", "last_turns", "search")
METHOD_TITLES = {"context": "context", "last_turns": "last turns", "search": "search"}
ARTICLES = re.compile(r"\b(?:a|an|the)\b")


class SelectionError(ValueError):
    """--conversations names no conversation of the file."""


# --- the questions --------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """A question as scored here: its evidence turns' texts and its gold answer (None:
    nothing to look for, e.g. LoCoMo's category 5). A LoCoMo question has its
    ``category``; a BEAM question its ``question_type`` (category 0), the room it is
    asked in (``room``, an external id) and its evidence turn ids per side
    (``sides``: {"original_info": ..., "updated_info": ...} of a knowledge update)."""

    conversation: str
    text: str
    category: int
    evidence: dict[str, str]  # turn id -> the turn's text
    answer: str | None
    question_type: str | None = None
    room: str | None = None
    sides: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def groups(self) -> tuple[str, ...]:
        """The rows it counts in: its type's, or its category's and "cat1-4" (not
        category 5); and "all"."""
        if self.question_type is not None:
            return (self.question_type, "all")
        category = CATEGORIES[self.category]
        return (category, "all") if self.category == 5 else (category, "cat1-4", "all")


def conversations_select(conversations: list[Conversation], text: str | None) -> list[Conversation]:
    """The conversations ``text`` names: positions in the file from 1 ('1-2', '1,3') or
    sample ids ('conv-26,conv-30'); all of them without ``text``."""
    if not text:
        return conversations
    by_id = {conversation.sample_id: conversation for conversation in conversations}
    chosen: dict[str, Conversation] = {}
    for part in (part.strip() for part in text.split(",")):
        if match := re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part):
            first, last = int(match[1]), int(match[2] or match[1])
            if not 1 <= first <= last <= len(conversations):
                raise SelectionError(
                    f"--conversations: {part!r} is not within 1-{len(conversations)}"
                )
            for conversation in conversations[first - 1 : last]:
                chosen[conversation.sample_id] = conversation
        elif part in by_id:
            chosen[part] = by_id[part]
        else:
            raise SelectionError(
                f"--conversations: no conversation {part!r} (there are {', '.join(by_id)})"
            )
    return [c for c in conversations if c.sample_id in chosen]


def questions_load(path: Path, conversations: list[Conversation]) -> list[Question]:
    """The questions bench/locomo.py keeps (those with evidence among the turns) of
    ``conversations``, with their gold answers read from the file beside them."""
    raw = {sample["sample_id"]: sample for sample in json.loads(Path(path).read_text())}
    questions = []
    for conversation in conversations:
        texts = {turn.dia_id: turn.text for turn in conversation.turns}
        answers = [
            qa.get("answer") if int(qa["category"]) != 5 else None
            for qa in raw[conversation.sample_id].get("qa", [])
            if evidence_ids(qa.get("evidence", [])) & texts.keys()
        ]
        for question, answer in zip(conversation.questions, answers, strict=True):
            questions.append(
                Question(
                    conversation=conversation.sample_id,
                    text=question.text,
                    category=question.category,
                    evidence={dia_id: texts[dia_id] for dia_id in sorted(question.evidence)},
                    answer=None if answer is None else str(answer),
                )
            )
    return questions


def locomo_conversations(path: Path, only: str | None) -> list[Conversation]:
    """The file's conversations that --conversations names (all without it)."""
    return conversations_select(locomo_load(path), only)


# --- dates ----------------------------------------------------------------------------

_ORDINAL = r"(?:st|nd|rd|th)?"
_YEAR = r"(\d{4})(?!\d)"
# a month's name or its abbreviation, not the start of a longer word ("marble")
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)(?![a-z])\.?"
)
# without a year only the full names: "may 4" is too often a verb and a number
_FULL_MONTH = (
    r"(january|february|march|april|may|june|july|august|september|october|november"
    r"|december)(?![a-z])"
)
MONTH_NUMBERS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
# each pattern is bounded and starts at a digit or a word: linear time; applied in this
# order, to a text with its whitespace collapsed (one space between words)
_DATE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)"), "ymd"),
    (re.compile(rf"(?<!\d)(\d{{1,2}}){_ORDINAL} (?:of )?{_MONTH},? {_YEAR}", re.I), "dmy"),
    (re.compile(rf"\b{_MONTH} (\d{{1,2}}){_ORDINAL},? {_YEAR}", re.I), "mdy"),
    (re.compile(rf"\b{_MONTH},? (?:of )?{_YEAR}", re.I), "my"),
    (re.compile(r"(?<!\d)(\d{4})-(\d{1,2})(?!-?\d)"), "ym"),
    (re.compile(rf"(?<!\d)(\d{{1,2}}){_ORDINAL} (?:of )?{_FULL_MONTH}", re.I), "dm"),
    (re.compile(rf"\b{_FULL_MONTH} (\d{{1,2}}){_ORDINAL}(?![\d:])", re.I), "md"),
)


def _month(text: str) -> int:
    return int(text) if text.isdigit() else MONTH_NUMBERS[text[:3].lower()]


def _date_tokens(match: re.Match[str], layout: str) -> str:
    """The tokens of one date (see the module's docstring); the match unchanged when it
    is no date (a month 13, a day 32)."""
    parts = dict(zip(layout, match.groups(), strict=True))
    month = _month(parts["m"])
    day = int(parts.get("d", "1"))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return match[0]
    if "y" not in parts:
        return f" day{month:02d}{day:02d} "
    year = parts["y"]
    tokens = f" {year} month{year}{month:02d} "
    if "d" in parts:
        tokens += f"day{month:02d}{day:02d} date{year}{month:02d}{day:02d} "
    return tokens


def dates_canonical(text: str) -> str:
    """``text`` with its whitespace collapsed and every date in it, whatever its format,
    written as its tokens (see the module's docstring)."""
    text = whitespace_collapsed(text)
    for pattern, layout in _DATE_PATTERNS:
        text = pattern.sub(_date_replacer(layout), text)
    return text


def _date_replacer(layout: str) -> Callable[[re.Match[str]], str]:
    return lambda match: _date_tokens(match, layout)


# --- the two tests --------------------------------------------------------------------


def whitespace_collapsed(text: str) -> str:
    return " ".join(text.split())


def answer_normalize(text: str) -> str:
    """Lower case, punctuation and the articles a/an/the removed, whitespace collapsed
    (SQuAD's normalization)."""
    text = "".join(char for char in text.lower() if not unicodedata.category(char).startswith("P"))
    return whitespace_collapsed(ARTICLES.sub(" ", text))


def answer_words(text: str) -> str:
    """What answer containment compares: the text's dates as tokens, then normalized."""
    return answer_normalize(dates_canonical(text))


@dataclass(frozen=True)
class Rendered:
    """A text as both tests read it, normalized once."""

    collapsed: str
    normalized: str

    @classmethod
    def of(cls, text: str) -> Rendered:
        return cls(whitespace_collapsed(text), f" {answer_words(text)} ")

    def has_turn(self, turn_text: str) -> bool:
        wanted = whitespace_collapsed(turn_text)
        return bool(wanted) and wanted in self.collapsed

    def has_answer(self, answer: str) -> bool:
        wanted = answer_words(answer)
        return bool(wanted) and f" {wanted} " in self.normalized


@dataclass
class Score:
    """One method's text for one question at one budget, scored."""

    evidence: float  # share of the evidence turns found
    answer: bool | None  # None: no answer, or an answer with nothing left to look for
    tokens: int
    found: frozenset[str] = frozenset()  # the evidence turn ids found


def score(question: Question, text: str, tokens: int) -> Score:
    rendered = Rendered.of(text)
    found = frozenset(d for d, turn in question.evidence.items() if rendered.has_turn(turn))
    answer = None
    if question.answer is not None and answer_words(question.answer):
        answer = rendered.has_answer(question.answer)
    return Score(len(found) / len(question.evidence), answer, tokens, found)


# --- the baselines --------------------------------------------------------------------


def last_turns_fit(lines: Sequence[str], budget: int, encoding: str = "cl100k_base") -> str:
    """The newest lines (``lines`` oldest first) whose joined text fits ``budget``,
    oldest first: what an agent without memory sends."""

    def text(count: int) -> str:
        return "\n".join(lines[len(lines) - count :]) if count else ""

    low, high = 0, len(lines)  # the token count only grows with more lines
    while low < high:
        middle = (low + high + 1) // 2
        if token_count(text(middle), encoding) <= budget:
            low = middle
        else:
            high = middle - 1
    return text(low)


def ranked_fit(lines: Iterable[str], budget: int, encoding: str = "cl100k_base") -> str:
    """``lines`` in rank order, each added if the joined text still fits ``budget``."""
    kept: list[str] = []
    used = 0
    for line in lines:
        if budget - used < 2:  # not even a line break and one token left
            break
        # joining merges at most a token or two across the line break: a line this long
        # cannot fit, and most lines once the text is nearly full are skipped uncounted
        if used + token_count(line, encoding) - 2 > budget:
            continue
        candidate = "\n".join([*kept, line])
        tokens = token_count(candidate, encoding)
        if tokens <= budget:
            kept.append(line)
            used = tokens
    return "\n".join(kept)


# --- the table ------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """A data set's table: its rows in ``order`` (those without questions are left
    out), the row the verdict reads answers from (``answers_row``), and the rows whose
    answer containment is not reported (``answerless``: LoCoMo's "all" would repeat
    "cat1-4", its category 5 having no answers)."""

    order: tuple[str, ...]
    answers_row: str
    answerless: frozenset[str] = frozenset()


LOCOMO_LAYOUT = Layout(
    order=(*(CATEGORIES[number] for number in (1, 2, 3, 4, 5)), "cat1-4", "all"),
    answers_row="cat1-4",
    answerless=frozenset({"all"}),
)


def mean_percent(values: list[float]) -> float | None:
    return round(100 * statistics.fmean(values), 1) if values else None


def budget_table(
    questions: Sequence[Question],
    scores: Sequence[dict[str, Score]],
    layout: Layout = LOCOMO_LAYOUT,
) -> dict[str, dict[str, Any]]:
    """Per row of the layout: its questions, those with an answer to look for, and each
    method's evidence recall and answer containment in percent (None: nothing to
    score, e.g. the answer containment of LoCoMo's category 5)."""
    evidence: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    answers: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    counts: dict[str, int] = defaultdict(int)
    for question, by_method in zip(questions, scores, strict=True):
        for group in question.groups:
            counts[group] += 1
            for method, result in by_method.items():
                evidence[group][method].append(result.evidence)
                if result.answer is not None:
                    answers[group][method].append(1.0 if result.answer else 0.0)
    table = {}
    for group in layout.order:
        if not counts[group]:
            continue
        reported = group not in layout.answerless
        table[group] = {
            "questions": counts[group],
            "answerable": len(answers[group]["context"]) if reported else None,
            "evidence_recall": {m: mean_percent(evidence[group][m]) for m in METHODS},
            "answer_containment": {
                m: mean_percent(answers[group][m]) if reported else None for m in METHODS
            },
        }
    return table


def tokens_mean(scores: Sequence[dict[str, Score]]) -> dict[str, float]:
    return {
        method: round(statistics.fmean(s[method].tokens for s in scores), 1) if scores else 0.0
        for method in METHODS
    }
