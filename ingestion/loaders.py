"""Turning an uploaded file into text with its structure (page, heading path).

INTERFACE FIXED FOR THE INGESTION PIPELINE; the bodies are being written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SUPPORTED_TYPES: tuple[str, ...] = (
    "text/plain",
    "text/markdown",
    "text/html",
    "application/json",
    "application/pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
)


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
    """A document's text, in reading order, and the structure of each part of it."""

    text: str
    mime_type: str
    title: str = ""  # from the document itself when it says (a PDF's title, a first h1)
    spans: list[Span] = field(default_factory=list)

    def citation(self, start: int, end: int) -> dict[str, object]:
        """What a chunk of characters [start, end) cites: first and last page, heading."""
        raise NotImplementedError


def mime_type_detect(data: bytes, filename: str = "") -> str:
    """The type of ``data`` from its content (the name only breaks ties between text
    types); LoaderError for anything not in SUPPORTED_TYPES."""
    raise NotImplementedError


def document_parse(
    data: bytes, *, filename: str = "", mime_type: str | None = None
) -> ParsedDocument:
    """Parse in this process; LoaderError with a clear message for what cannot be read."""
    raise NotImplementedError


def document_parse_bounded(
    data: bytes, *, filename: str = "", mime_type: str | None = None,
    timeout_seconds: float = 60.0, memory_mb: int = 1024,
) -> ParsedDocument:  # fmt: skip
    """document_parse in a child process limited in time and memory, so that a hostile
    file cannot take the worker down; LoaderError when it runs out of either."""
    raise NotImplementedError
