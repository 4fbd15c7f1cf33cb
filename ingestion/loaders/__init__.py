"""Turning an uploaded file into text with its structure (page, heading path).

Pure Python (no Django): the bounded parser runs it in a child process.
"""

from .detect import mime_type_detect
from .document import SUPPORTED_TYPES, LoaderError, ParsedDocument, Span
from .parse import document_parse, document_parse_bounded

__all__ = [
    "SUPPORTED_TYPES",
    "LoaderError",
    "ParsedDocument",
    "Span",
    "document_parse",
    "document_parse_bounded",
    "mime_type_detect",
]
