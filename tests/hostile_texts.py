"""Hostile texts: what any user can type that has made text code slow (issue 45: a run of
whitespace held the only worker for six minutes). tests/test_text_linear.py feeds them to
every function that reads user text at two lengths; the API tests
(tests/memories/api/test_hostile_text.py, tests/ingestion/api/test_hostile_documents.py)
send them through every path that takes text."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

# one character repeated: what a regular expression's quantifiers meet
CHARACTERS: dict[str, str] = {
    "spaces": " ",
    "tabs": "\t",
    "newlines": "\n",
    "commas": ",",
    "semicolons": ";",
    "dashes": "-",
    "em dashes": "\u2014",
    "dots": ".",
    "quotes": '"',
    "curly quotes": "\u201c",
    "apostrophes": "'",
    "brackets": "[",
    "braces": "{",
    "parentheses": "(",
    "angle brackets": "<",
    "hashes": "#",
    "backticks": "`",
    "backslashes": "\\",
    "emoji": "\U0001f600",
    "letters": "x",
}
# a short phrase repeated: what reaches further into the code (the fact extractor's
# statements, clauses, lists and fillers; markup's tags, comments, headings and fences)
PHRASES: dict[str, str] = {
    "comma spaces": ", ",
    "spaced commas": " , ",
    "spaced dashes": " - ",
    "I": "I ",
    "my": "my ",
    "comma I": ", I",
    "and I": " and I",
    "but": " but",
    "said": " said",
    "if": " if",
    "list items": "cats, ",
    "capitals": "Ana ",
    "fillers": " too",
    "time phrases": " now",
    "quoted": '"a" ',
    "abbreviations": "Dr. ",
    "sentences": "I am. ",
    "open tags": "<a ",
    "paragraph opens": "<p",
    "comments": "<!--",
    "closed tags": "<b>",
    "entities": "&amp",
    "headings": "# ",
    "heading closes": " #",
    "fences": "```\n",
    "crlf": "\r\n",
    "json keys": '{"a":',
}
UNITS: dict[str, str] = {**CHARACTERS, **PHRASES}
# the run the issue names: 10,000 characters of one unit
RUN = 10_000
MEGABYTE = 1 << 20
# prose that touches most rules of the fact extractor, for the mixed line
_SENTENCE = (
    'I love cats, dogs and pollen; my sister Ana said "hi" \u2014 we moved to Porto, I think. '
)


def run(unit: str, length: int = RUN) -> str:
    """``unit`` repeated to ``length`` characters."""
    return (unit * (length // len(unit) + 1))[:length]


def mixed(length: int = RUN) -> str:
    """Every unit in turn, repeated to ``length`` characters."""
    return run("".join(UNITS.values()), length)


def distinct_words(length: int = RUN) -> str:
    """Words that are all different ("w0 w1 w2 ..."), to ``length`` characters: what
    a query's word list or a highlight's terms grow with."""
    words, size, count = [], 0, 0
    while size < length:
        words.append(f"w{count}")
        size, count = size + len(words[-1]) + 1, count + 1
    return " ".join(words)[:length]


def makers() -> dict[str, Callable[[int], str]]:
    """Every hostile text by name, as a function of its length: each unit's run, the
    same inside a statement ("I have ... cats": the fact extractor reads on), and their
    mix."""
    found: dict[str, Callable[[int], str]] = {}
    for name, unit in UNITS.items():
        found[name] = partial(run, unit)
        found[f"I have {name}"] = partial(_stated, unit)
    found["mixed"] = mixed
    found["distinct words"] = distinct_words
    return found


def texts(length: int = RUN) -> dict[str, str]:
    """Every hostile text of ``length`` characters, by name (see ``makers``)."""
    return {name: make(length) for name, make in makers().items()}


def _stated(unit: str, length: int) -> str:
    # a word after the run too: a run at the end of a text is stripped before most rules
    return "I have " + run(unit, length - len("I have  cats")) + " cats"


def megabyte_line() -> str:
    """A single line of 1 MB: prose without a line break, then no end."""
    return run(_SENTENCE.replace(". ", ", "), MEGABYTE)
