"""What bench/context_eval.py scores and reports, without Django: LoCoMo's questions with
their gold answers, the two tests (an evidence turn's text in a rendered context, a
normalized gold answer in it), the two baselines fitted to a budget, the table per
budget, where in the context its finds lie, and the verdict against the baselines.

* **Evidence recall**: the share of a question's evidence turns whose text (whitespace
  collapsed) is a substring of the rendered text (whitespace collapsed).
* **Answer containment**: whether the gold answer, normalized (lower case, punctuation
  and the articles a/an/the removed, whitespace collapsed), appears in the normalized
  text as whole words; categories 1-4 only (5 is adversarial: its questions have no
  answer in the conversation).
"""

from __future__ import annotations

import json
import re
import statistics
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.locomo import CATEGORIES, Conversation, evidence_ids, locomo_load
from memories.providers.tokens import token_count

METHODS = ("context", "last_turns", "search")
METHOD_TITLES = {"context": "context", "last_turns": "last turns", "search": "search"}
# the context's sections in the order it fills them (memories/services/context/fitting.py)
SECTIONS = ("synopsis", "facts", "working", "history", "retrieved")
ORDER = [*(CATEGORIES[number] for number in (1, 2, 3, 4, 5)), "cat1-4", "all"]
EVIDENCE_MARGIN = 2.0  # points the context may trail the search baseline on evidence
ARTICLES = re.compile(r"\b(?:a|an|the)\b")


class SelectionError(ValueError):
    """--conversations names no conversation of the file."""


# --- the data set ---------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """A LoCoMo question as scored here: its evidence turns' texts and its gold answer
    (None in category 5)."""

    conversation: str
    text: str
    category: int
    evidence: dict[str, str]  # dia_id -> the turn's text
    answer: str | None

    @property
    def groups(self) -> tuple[str, ...]:
        """The rows it counts in: its category's, "cat1-4" (not category 5) and "all"."""
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


# --- the two tests --------------------------------------------------------------------


def whitespace_collapsed(text: str) -> str:
    return " ".join(text.split())


def answer_normalize(text: str) -> str:
    """Lower case, punctuation and the articles a/an/the removed, whitespace collapsed
    (SQuAD's normalization)."""
    text = "".join(char for char in text.lower() if not unicodedata.category(char).startswith("P"))
    return whitespace_collapsed(ARTICLES.sub(" ", text))


@dataclass(frozen=True)
class Rendered:
    """A text as both tests read it, normalized once."""

    collapsed: str
    normalized: str

    @classmethod
    def of(cls, text: str) -> Rendered:
        return cls(whitespace_collapsed(text), f" {answer_normalize(text)} ")

    def has_turn(self, turn_text: str) -> bool:
        wanted = whitespace_collapsed(turn_text)
        return bool(wanted) and wanted in self.collapsed

    def has_answer(self, answer: str) -> bool:
        wanted = answer_normalize(answer)
        return bool(wanted) and f" {wanted} " in self.normalized


@dataclass
class Score:
    """One method's text for one question at one budget, scored."""

    evidence: float  # share of the evidence turns found
    answer: bool | None  # None: category 5, or an answer with nothing left to look for
    tokens: int
    found: frozenset[str] = frozenset()  # the evidence dia_ids found


def score(question: Question, text: str, tokens: int) -> Score:
    rendered = Rendered.of(text)
    found = frozenset(d for d, turn in question.evidence.items() if rendered.has_turn(turn))
    answer = None
    if question.answer is not None and answer_normalize(question.answer):
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


def _mean(values: list[float]) -> float | None:
    return round(100 * statistics.fmean(values), 1) if values else None


def budget_table(
    questions: Sequence[Question], scores: Sequence[dict[str, Score]]
) -> dict[str, dict[str, Any]]:
    """Per row of ORDER: its questions, those with an answer to look for, and each
    method's evidence recall and answer containment in percent (None: nothing to
    score, e.g. the answer containment of category 5)."""
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
    for group in ORDER:
        if not counts[group]:
            continue
        table[group] = {
            "questions": counts[group],
            "answerable": len(answers[group]["context"]) if group != "all" else None,
            "evidence_recall": {m: _mean(evidence[group][m]) for m in METHODS},
            "answer_containment": {
                m: _mean(answers[group][m]) if group != "all" else None for m in METHODS
            },
        }
    return table


def tokens_mean(scores: Sequence[dict[str, Score]]) -> dict[str, float]:
    return {
        method: round(statistics.fmean(s[method].tokens for s in scores), 1) if scores else 0.0
        for method in METHODS
    }


def _cell(value: float | None) -> str:
    return f"{value:>10.1f}" if value is not None else f"{'-':>10}"


def table_lines(budget: dict[str, Any]) -> list[str]:
    """One budget's report as text: a row per category, the two metrics side by side."""
    titles = [METHOD_TITLES[m] for m in METHODS]
    width = max(len(group) for group in ORDER)
    tokens = budget["tokens_mean"]
    lines = [
        f"budget {budget['budget']} tokens, {budget['questions']} questions; mean tokens: "
        + ", ".join(f"{METHOD_TITLES[m]} {tokens[m]}" for m in METHODS),
        f"{'':<{width}} {'':>4} {'':>4}  {'evidence recall (%)':^32}  "
        f"{'answer containment (%)':^32}",
        f"{'category':<{width}} {'n':>4} {'ans':>4}  "
        + " ".join(f"{t:>10}" for t in titles) + "  " + " ".join(f"{t:>10}" for t in titles),
    ]  # fmt: skip
    for group, row in budget["groups"].items():
        answerable = row["answerable"]
        lines.append(
            f"{group:<{width}} {row['questions']:>4} "
            + (f"{answerable:>4}" if answerable is not None else f"{'':>4}")
            + "  "
            + " ".join(_cell(row["evidence_recall"][m]) for m in METHODS)
            + "  "
            + " ".join(_cell(row["answer_containment"][m]) for m in METHODS)
        )
    return lines


def sections_summary(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per section over a budget's questions: mean tokens (0 where empty), the answers
    it holds (and holds alone), the evidence turns it holds."""
    seen = {name for question in found for name in question}
    names = [name for name in SECTIONS if name in seen] + sorted(seen - set(SECTIONS))
    summary = {}
    for name in names:
        summary[name] = {
            "tokens_mean": round(
                sum(q[name]["tokens"] for q in found if name in q) / max(len(found), 1), 1
            ),
            "answers": sum(1 for q in found if name in q and q[name]["answer"]),
            "answers_only_here": sum(
                1
                for q in found
                if name in q
                and q[name]["answer"]
                and not any(s["answer"] for other, s in q.items() if other != name)
            ),
            "evidence_turns": sum(len(q[name]["evidence"]) for q in found if name in q),
        }
    return summary


def verdict(budgets: list[dict[str, Any]]) -> dict[str, Any]:
    """Per budget: the context's answer containment (categories 1-4) against both
    baselines, and its evidence recall (all questions) against the search baseline."""
    result: dict[str, Any] = {}
    for budget in budgets:
        answers = budget["groups"].get("cat1-4", {}).get("answer_containment", {})
        evidence = budget["groups"]["all"]["evidence_recall"]
        margins = {
            "answers_vs_last_turns": _difference(answers, "last_turns"),
            "answers_vs_search": _difference(answers, "search"),
            "evidence_vs_search": _difference(evidence, "search"),
        }
        result[str(budget["budget"])] = {
            **margins,
            "beats_both_on_answers": all(
                (margins[key] or 0) > 0 for key in ("answers_vs_last_turns", "answers_vs_search")
            ),
            "evidence_within_margin": (margins["evidence_vs_search"] or 0) >= -EVIDENCE_MARGIN,
        }
    return result


def _difference(row: dict[str, float | None], baseline: str) -> float | None:
    context, other = row.get("context"), row.get(baseline)
    return None if context is None or other is None else round(context - other, 1)


# --- the report -----------------------------------------------------------------------


def report_print(report: dict[str, Any]) -> None:
    """The report as text: what the workers produced, then a table per budget."""
    skipped = ", ".join(f"{group} {count}" for group, count in report["skipped"].items())
    print(
        f"{report['description']}: {report['turns']} turns, {report['questions']} questions"
        + (f" (without evidence, left out: {skipped})" if skipped else "")
    )
    if report["settings"]:
        print(f"project settings: {json.dumps(report['settings'])}")
    workers = report["workers"]
    synopses = (
        "none (no synopsis generation)" if workers["synopses"] is None else workers["synopses"]
    )
    print(
        f"workers: {workers['summaries']} summaries ({workers['rooms_summarized']} rooms over "
        f"capacity, {workers['messages_archived']} messages archived), facts "
        + ", ".join(f"{kind} {n}" for kind, n in workers["facts"].items())
        + f" ({workers['facts_superseded']} superseded; messages mined "
        + ", ".join(f"{status} {n}" for status, n in workers["messages_mined"].items())
        + f"), synopses {synopses}"
    )
    for budget in report["budgets"]:
        print()
        print("\n".join(table_lines(budget)))
        print(
            "context sections (mean tokens; answers held, alone; evidence turns): "
            + "; ".join(
                f"{name} {s['tokens_mean']}, {s['answers']}, {s['answers_only_here']}, "
                f"{s['evidence_turns']}"
                for name, s in budget["context_sections"].items()
            )
        )
        judged = report["verdict"][str(budget["budget"])]
        print(
            f"context - last turns on answers (cat1-4): {_signed(judged['answers_vs_last_turns'])}"
            f" points, - search: {_signed(judged['answers_vs_search'])} points; evidence recall "
            f"(all) - search: {_signed(judged['evidence_vs_search'])} points"
        )
    print("time: " + ", ".join(f"{name} {s} s" for name, s in report["timings_s"].items()))


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+}"
