"""The offline fact extractor: English first-person statements a user makes in passing
("I moved to Lisbon last spring", "call me Sam", "I'm allergic to peanuts") turned
into drafts by patterns, with no model (their words and regular expressions are in
synopsis/extraction_lexicon.py, the rules in synopsis/extraction_rules.py, the draft and
its helpers in synopsis/extraction_drafts.py). Precision over recall: a statement is only
mined when it stands on its own, so questions, negations, hypotheticals ("if I moved
to Rome") and what other people said are skipped. ``FactDraft`` is the draft every
extractor returns (synopsis/extraction.py re-exports it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from synopsis.extraction_drafts import (
    CATEGORIES,
    FACT,
    GOAL,
    HEDGED,
    RELATIONSHIP,
    FactDraft,
    due_date,
    normalize,
)
from synopsis.extraction_lexicon import (
    CLAUSE_BREAK,
    FILLERS,
    HEDGE,
    NOT_ASSERTED,
    QUESTION,
    QUOTED,
)
from synopsis.extraction_rules import RULES

__all__ = [
    "CATEGORIES",
    "FACT",
    "GOAL",
    "RELATIONSHIP",
    "FactDraft",
    "due_date",
    "facts_draft_offline",
    "normalize",
]


def _sentences(text: str) -> Iterator[str]:
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    pieces = [piece.strip() for piece in re.split(r"(?<=[.!?…])\s+|\s*\n+\s*", text)]
    sentence = ""
    for piece in pieces:
        sentence = f"{sentence} {piece}".strip()
        if not re.search(r"\b(?:Mr|Mrs|Ms|Dr|St|Mt|Jr|Sr|vs|etc)\.$", sentence):
            if sentence:
                yield sentence
            sentence = ""
    if sentence:
        yield sentence


def _prefix_allowed(prefix: str) -> bool:
    """Whether only fillers ("Oh, and also", "Last spring") precede the statement."""
    words = re.findall(r"[a-z0-9']+", HEDGE.sub(" ", prefix.lower()))
    return all(word in FILLERS or word.isdigit() for word in words)


def _clause_drafts(clause: str, evidence: str) -> Iterator[FactDraft]:
    clause = NOT_ASSERTED.split(clause, maxsplit=1)[0].strip(" ,.!")
    for current in RULES:
        for match in current.pattern.finditer(clause):
            if not current.anywhere and not _prefix_allowed(clause[: match.start()]):
                continue
            hedged = bool(HEDGE.search(clause[: match.end()]))
            for draft in current.build(match, clause):
                confidence = min(draft.confidence, HEDGED) if hedged else draft.confidence
                yield replace(draft, confidence=confidence, evidence=evidence)


def facts_draft_offline(text: str) -> list[FactDraft]:
    """The facts about the user in ``text`` (what the user wrote) found by the English
    patterns of synopsis/extraction_rules.py, in order, each once; pure and deterministic."""
    drafts: list[FactDraft] = []
    seen: set[tuple[str, str]] = set()
    for sentence in _sentences(text):
        if sentence.rstrip(" )\"'").endswith("?") or QUESTION.match(sentence):
            continue
        for clause in CLAUSE_BREAK.split(QUOTED.sub(" ", sentence)):
            for draft in _clause_drafts(clause.strip(), sentence):
                if (draft.kind, draft.content.lower()) not in seen:
                    seen.add((draft.kind, draft.content.lower()))
                    drafts.append(draft)
    return drafts
