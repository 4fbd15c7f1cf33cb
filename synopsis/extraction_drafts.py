"""The offline fact extractor's drafts (synopsis/extraction_offline.py): ``FactDraft``,
the draft every extractor returns (synopsis/extraction.py re-exports it), the kinds and
confidences, and the helpers its rules (synopsis/extraction_rules.py) build drafts with:
the object of a statement, a person's name, a due date, a value normalized for
comparison."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass

from memories.structured import FACT_CATEGORIES
from synopsis.extraction_lexicon import (
    COMMA,
    LIST,
    MONTH,
    MONTHS,
    NOT_NAMES,
    OBJECT_END,
    REFERENT_PAIRS,
    REFERENTS,
    RELATION_NAMES,
    TRAILING,
    TRAILING_TIME,
)

CATEGORIES: tuple[str, ...] = FACT_CATEGORIES
FACT, RELATIONSHIP, GOAL = "fact", "relationship", "goal"  # memories.models.Memory.Kind
EXPLICIT, CLEAR, HEDGED = 0.8, 0.7, 0.6  # confidence: "my name is", plain, "I think"
# trailing fillers and time phrases come off one per round ("pizza a lot too lol": three)
TRIM_ROUNDS = 10
# the separators of a list's items; tried where a whitespace run starts, or at the comma
# right after the previous separator (whose trailing spaces it took)
LIST_SEPARATOR = re.compile(r"(?:(?<!\s)|(?=,))(?:\s*+,\s*+(?:and\s+|or\s+)?|\s++(?:and|or)\s+)")


@dataclass(frozen=True)
class FactDraft:
    """A fact about the user, not stored yet; ``slot``/``value`` name a single-valued
    attribute (a new value supersedes the old one), None for multi-valued facts."""

    kind: str  # fact | relationship | goal
    content: str  # third person, starting with "User": "User lives in Lisbon."
    category: str  # one of CATEGORIES
    confidence: float  # 0..1
    slot: str | None  # e.g. "location.home"
    value: str | None  # the slot's value normalized for comparison: "lisbon"
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    goal_status: str | None = None  # open | done | abandoned
    due: str | None = None  # YYYY-MM-DD
    evidence: str = ""  # the sentence it came from


def normalize(value: str) -> str:
    """A value for comparison: lower case, single spaces, no leading article."""
    value = " ".join(value.lower().strip(" .,!?;:'\"").split())
    return re.sub(r"^(?:the|a|an)\s+", "", value)


def tail(text: str, *, max_words: int, keep_time: bool = False) -> str | None:
    """The object of a statement: cut at the next clause, trimmed of fillers (and time
    phrases unless ``keep_time``), in the third person; None if it is a pronoun or long."""
    text = OBJECT_END.split(text, maxsplit=1)[0]
    if not LIST.match(text):  # "cats, dogs, and pollen" is one object
        text = COMMA.split(text, maxsplit=1)[0]
    text = text.strip(" .!?…'\")")
    for _ in range(TRIM_ROUNDS):
        previous = text
        text = TRAILING.sub("", text)
        text = text if keep_time else TRAILING_TIME.sub("", text)
        text = text.strip(" .!?…'\")")
        if text == previous:
            break
    else:
        return None  # fillers upon fillers ("too too too ..."): not a statement
    text = re.sub(r"\bmy\b", "their", re.sub(r"\bmyself\b", "themselves", text))
    words = text.split()
    if not words or len(words) > max_words or re.search(r"\b(?:I|me|you|your|yours)\b", text):
        return None
    if words[0].lower() in REFERENTS or " ".join(words[:2]).lower() in REFERENT_PAIRS:
        return None
    if words[0].lower() == "to" and _empty_infinitive(words[1:]):
        return None  # "I love to." / "I'd love to do that": nothing said about what
    return text


def _empty_infinitive(rest: list[str]) -> bool:
    """Whether "to ..." names nothing: no verb, or a light verb with a pronoun."""
    if not rest or rest[0].lower() in REFERENTS:
        return True
    light = rest[0].lower() in ("do", "be", "have", "get", "go", "try")
    return light and (len(rest) == 1 or rest[1].lower() in REFERENTS | {"there", "here"})


def split_list(text: str) -> list[str]:
    """The items of "cats, dogs, and pollen"."""
    return [item for item in LIST_SEPARATOR.split(text) if item]


def person_name(text: str, clause: str) -> str | None:
    """A person's name as written (capitalized), unless it is a common word."""
    words = text.split()
    lowercase_writer = not re.search(r"(?!\bI\b)[A-Z]", clause[1:])
    if words[0].lower() in NOT_NAMES or (words[0].islower() and not lowercase_writer):
        return None
    return " ".join(word[0].upper() + word[1:] for word in words)


def due_date(text: str) -> str | None:
    """The date of "by June 2027", "before 2027-06-30", "by the end of 2027", if clear."""
    marker = r"(?i:\b(?:by|before|until|in|on|no\s+later\s+than)\s+)(?:the\s+end\s+of\s+)?"
    if found := re.search(marker + r"(\d{4})-(\d{2})-(\d{2})\b", text):
        year, month, day = (int(group) for group in found.groups())
    elif found := re.search(
        marker + rf"(?:({MONTH})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?|(\d{{1,2}})(?:st|nd|rd|th)?"
        rf"\s+(?:of\s+)?({MONTH}),?|({MONTH}))\s+(\d{{4}})\b",
        text,
    ):
        month_name = (found[1] or found[4] or found[5]).lower()
        year, month = int(found[6]), MONTHS[month_name]
        end = "end of" in found[0].lower()
        day = int(found[2] or found[3] or (calendar.monthrange(year, month)[1] if end else 1))
    elif found := re.search(r"(?i:\b(?:by|before|until|in)\s+the\s+end\s+of\s+)(\d{4})\b", text):
        year, month, day = int(found[1]), 12, 31
    else:
        return None
    if not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    return f"{year:04d}-{month:02d}-{day:02d}"


def fact(
    content: str,
    category: str,
    slot: str | None = None,
    value: str | None = None,
    confidence: float = CLEAR,
) -> FactDraft:
    """A fact draft, its slot's value normalized."""
    return FactDraft(FACT, content, category, confidence, slot, value and normalize(value))


def relation(predicate: str, name: str, content: str) -> FactDraft:
    """A relationship draft: User -predicate-> name."""
    return FactDraft(
        RELATIONSHIP,
        content,
        "relationship",
        CLEAR,
        None,
        None,
        subject="User",
        predicate=predicate,
        object=name,
    )


def relation_predicate(word: str) -> str:
    """The predicate of a relative as written: "Mother-in-law" -> "mother_in_law"."""
    word = " ".join(word.lower().split())
    return RELATION_NAMES.get(word, word).replace(" ", "_").replace("-", "_")
