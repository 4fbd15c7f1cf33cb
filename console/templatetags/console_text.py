"""Template filters for the text the console shows: ``{% load console_text %}``.

``highlight`` marks a search's words in a memory's text (``{{ memory.content|highlight:query }}``);
``json_text`` writes a JSON value on one line (``{{ memory.metadata|json_text }}``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# words too common to be worth a mark (a natural-language query is full of them)
_STOPWORDS_TEXT = (
    "a an and are as at be but by did do does for from had has have he her his how i if in "
    "is it its me my of on or our she so than that the their them they this to was we were "
    "what when where which who why will with you your"
)
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
_SUFFIXES = ("ing", "ed", "es", "s")


def query_terms(query: str) -> list[str]:
    """The words of a query worth marking in a text, roughly stemmed (keyword search
    stems English words, so 'cats' also finds 'cat')."""
    terms = set()
    for word in re.findall(r"\w+", query.lower()):
        if len(word) < 2 or word in STOPWORDS:
            continue
        for suffix in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        terms.add(word)
    return sorted(terms, key=lambda term: (-len(term), term))  # longest first: "cats" before "cat"


@register.filter
def highlight(text: str, query: str) -> SafeString:
    """``text`` as HTML: every part escaped, then the words starting with a query term
    wrapped in <mark>. The text is split on the raw string and each piece escaped, so a
    mark can never land inside an escaped entity or a tag."""
    terms = query_terms(query)
    if not terms:
        return escape(text)
    pattern = re.compile(
        r"(\b(?:" + "|".join(re.escape(term) for term in terms) + r")\w*)", re.IGNORECASE
    )
    pieces = pattern.split(text)
    # re.split with one group: the matches are at the odd positions
    html = "".join(
        f"<mark>{escape(piece)}</mark>" if index % 2 else escape(piece)
        for index, piece in enumerate(pieces)
        if piece
    )
    return mark_safe(html)  # noqa: S308 - every piece of the text went through escape()


@register.filter
def json_text(value: Any) -> str:
    """A JSON value on one line, keys sorted, non-ASCII kept ('' for an empty or missing
    value); plain text, which the template escapes."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True) if value else ""
