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
    ABBREVIATION,
    CLAUSE_BREAK,
    FILLERS,
    FIRST_PERSON,
    HEDGE,
    NOT_ASSERTED,
    QUESTION,
    QUOTE_CLOSING,
    QUOTE_OPENING,
    SENTENCE_BREAK,
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


# a statement is a few dozen words: of a longer clause (a pasted log, code, a table
# without stops) only the first this many characters are mined, cut at a word, so no
# clause costs the rules more than this much text
CLAUSE_MAX_CHARS = 1_000


def _sentences(text: str) -> Iterator[str]:
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    pending: list[str] = []  # pieces ending in "Dr.", "Mr.": the sentence goes on
    for piece in SENTENCE_BREAK.split(text):
        if piece := piece.strip():
            pending.append(piece)
            # the piece, not the sentence so far: each piece is read once
            if ABBREVIATION.search(piece):
                continue
        if pending:
            yield " ".join(pending)
        pending = []
    if pending:
        yield " ".join(pending)


def _quotes_blanked(text: str) -> str:
    """Each quotation ("...", \u201c...\u201d) replaced by a space, an opening quote
    closed by the next closing one; an unclosed one is left. A find per quotation
    (the pattern '"[^"]*"|\u201c[^\u201d]*\u201d' rescanned the text to its end from
    every unclosed \u201c: n² on a run of them)."""
    pieces: list[str] = []
    done = 0
    last = {closing: text.rfind(closing) for closing in QUOTE_CLOSING.values()}
    for opening in QUOTE_OPENING.finditer(text):
        start, closing = opening.start(), QUOTE_CLOSING[opening[0]]
        if start < done or last[closing] <= start:
            continue  # inside the previous quotation, or never closed
        end = text.index(closing, start + 1)
        pieces += [text[done:start], " "]
        done = end + 1
    return "".join([*pieces, text[done:]])


def _prefix_allowed(prefix: str) -> bool:
    """Whether only fillers ("Oh, and also", "Last spring") precede the statement."""
    words = re.findall(r"[a-z0-9']+", HEDGE.sub(" ", prefix.lower()))
    return all(word in FILLERS or word.isdigit() for word in words)


def _clause_drafts(clause: str, evidence: str) -> Iterator[FactDraft]:
    if len(clause) > CLAUSE_MAX_CHARS:
        clause = clause[: CLAUSE_MAX_CHARS + 1].rsplit(maxsplit=1)[0]
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
        if not FIRST_PERSON.search(sentence):
            continue
        if sentence.rstrip(" )\"'").endswith("?") or QUESTION.match(sentence):
            continue
        for clause in CLAUSE_BREAK.split(_quotes_blanked(sentence)):
            for draft in _clause_drafts(clause.strip(), sentence):
                if (draft.kind, draft.content.lower()) not in seen:
                    seen.add((draft.kind, draft.content.lower()))
                    drafts.append(draft)
    return drafts
