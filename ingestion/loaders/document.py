"""What every loader returns: the document's text and where each part of it came from."""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

SUPPORTED_TYPES: tuple[str, ...] = (
    "text/plain",
    "text/markdown",
    "text/html",
    "application/json",
    "application/pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
)
DOCX = SUPPORTED_TYPES[5]
# how the types are named to people (error messages)
TYPE_NAMES = "plain text, Markdown, HTML, JSON, PDF, Word (.docx)"
PARAGRAPH_BREAK = "\n\n"
# a title found in the document is cut to what ingestion.models.Document.title holds (a
# first heading may be a whole line of "#"s: 10,000 characters failed the document's save)
TITLE_MAX_CHARS = 500


class LoaderError(Exception):
    """The file cannot become text: the message is the document's error, shown to users."""


@dataclass(frozen=True)
class Span:
    """Where a part of the text came from: characters [start, end) of ParsedDocument.text."""

    start: int
    end: int
    page: int | None = None  # 1-based page (PDF)
    heading: tuple[str, ...] = ()  # heading path (md, html, docx); the JSON path for JSON


@dataclass(frozen=True)
class ParsedDocument:
    """A document's text, in reading order, and the structure of each part of it.

    Spans are in text order and do not overlap; the separators between parts may lie
    outside every span."""

    text: str
    mime_type: str
    title: str = ""  # from the document itself when it says (a PDF's title, a first h1)
    spans: list[Span] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.title) > TITLE_MAX_CHARS:
            object.__setattr__(self, "title", self.title[: TITLE_MAX_CHARS - 1].rstrip() + "…")

    def citation(self, start: int, end: int) -> dict[str, object]:
        """What a chunk of characters [start, end) cites: {"page": first page,
        "page_end": last page when it differs, "heading": [the heading path of the span
        where the chunk starts]}, each key left out when empty."""
        first = bisect.bisect_right(self._span_ends, start)  # the first span ending after start
        touched = list(
            itertools.takewhile(
                lambda s: s.start < max(end, start + 1),
                (self.spans[i] for i in range(first, len(self.spans))),
            )
        )
        cited: dict[str, object] = {}
        pages = [s.page for s in touched if s.page is not None]
        if pages:
            cited["page"] = min(pages)
            if max(pages) != min(pages):
                cited["page_end"] = max(pages)
        # a chunk starting in a separator between spans belongs to the next span
        if touched and touched[0].heading:
            cited["heading"] = list(touched[0].heading)
        return cited

    @cached_property
    def _span_ends(self) -> list[int]:
        return [span.end for span in self.spans]

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable form (the bounded parser's child sends it so)."""
        return {
            "text": self.text,
            "mime_type": self.mime_type,
            "title": self.title,
            "spans": [[s.start, s.end, s.page, list(s.heading)] for s in self.spans],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ParsedDocument:
        spans = [
            Span(start, end, page, tuple(heading)) for start, end, page, heading in data["spans"]
        ]
        return cls(text=data["text"], mime_type=data["mime_type"], title=data["title"], spans=spans)


class TextBuilder:
    """Assembles a document from its parts in reading order, one paragraph break between
    parts; consecutive parts with the same page and heading share one span."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self.spans: list[Span] = []

    def add(self, text: str, *, page: int | None = None, heading: tuple[str, ...] = ()) -> None:
        text = text.strip()
        if not text:
            return
        if self._parts:
            self._parts.append(PARAGRAPH_BREAK)
            self._length += len(PARAGRAPH_BREAK)
        start = self._length
        self._parts.append(text)
        self._length += len(text)
        last = self.spans[-1] if self.spans else None
        if last is not None and last.page == page and last.heading == heading:
            self.spans[-1] = Span(last.start, self._length, page, heading)
        else:
            self.spans.append(Span(start, self._length, page, heading))

    def build(self, *, mime_type: str, title: str = "", what: str = "document") -> ParsedDocument:
        """The ParsedDocument; LoaderError when no text was added."""
        if not self._parts:
            raise LoaderError(f"the {what} yields no text")
        return ParsedDocument(
            text="".join(self._parts), mime_type=mime_type, title=title.strip(), spans=self.spans
        )


class HeadingPath:
    """The path of headings above the current point: a heading of level n replaces the
    headings of level n and deeper."""

    def __init__(self) -> None:
        self._levels: list[tuple[int, str]] = []

    def enter(self, level: int, title: str) -> None:
        while self._levels and self._levels[-1][0] >= level:
            self._levels.pop()
        self._levels.append((level, title))

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(title for _, title in self._levels)
