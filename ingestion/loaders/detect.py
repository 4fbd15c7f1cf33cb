"""The type of an upload from its bytes; the file name only tells Markdown from plain text."""

from __future__ import annotations

import codecs
import io
import json
import re
import zipfile

from .document import DOCX, TYPE_NAMES, LoaderError

# a PDF's header may follow up to 1,024 bytes of junk (PDF 32000-1, annex H)
PDF_HEADER_WINDOW = 1024
# more control characters than this share of the text: not text (a real text has
# tabs and line breaks, which do not count)
CONTROL_SHARE_MAX = 0.05
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_MARKDOWN_NAMES = (".md", ".markdown", ".mdown", ".mkd")
_HTML_NAMES = (".html", ".htm", ".xhtml")
# markup that only HTML starts with: <!doctype html> or <html>, after an XML declaration
# and comments. The comments are one "<!--.*-->": was "(?:<!--.*?-->\s*)*", which
# matches the same heads but could split a run of comments into iterations 2^n ways
# (30 empty comments before a non-HTML character: minutes, in the upload's request)
_HTML_STRONG = re.compile(
    r"\A(?:<\?xml[^>]*+>\s*)?(?:<!--.*-->\s*)?<(?:!doctype\s+html|html)\b", re.I | re.S
)
_HTML_TAG = re.compile(
    r"<(?:head|body|title|p|div|h[1-6]|table|ul|ol|span|a|br|meta)\b[^>]*>", re.I
)


def _html_tag_found(head: str) -> bool:
    """Whether ``head`` holds an HTML tag: searched only up to its last ">" (from each "<p"
    after it the search would scan to the end for a ">" that is not there: n²)."""
    return bool(_HTML_TAG.search(head, 0, head.rfind(">") + 1))


def text_decode(data: bytes, filename: str = "") -> str:
    """``data`` as text (UTF-8, or UTF-16/32 with a byte order mark), line breaks made
    '\\n'; LoaderError "not a text file" for bytes that are not text."""
    name = f" {filename!r}" if filename else ""
    encoding = _bom_encoding(data)
    if encoding == "utf-8" and b"\x00" in data:
        raise LoaderError(f"not a text file{name}: it holds NUL bytes")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        raise LoaderError(
            f"not a text file{name}: it is not valid {encoding.upper().removesuffix('-SIG')} "
            f"(byte {error.start}); save text as UTF-8"
        ) from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    controls = len(_CONTROL.findall(text))
    if text and controls > CONTROL_SHARE_MAX * len(text):
        raise LoaderError(
            f"not a text file{name}: {controls} of its {len(text)} characters "
            "are control characters"
        )
    return text


def _bom_encoding(data: bytes) -> str:
    """The encoding a byte order mark announces; UTF-8 without one."""
    for bom, encoding in (
        (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16: its BOM starts the same way
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):
            return encoding
    return "utf-8"


def mime_type_detect(data: bytes, filename: str = "") -> str:
    """The type of ``data`` from its content (the name only breaks ties between text
    types); LoaderError for anything not in SUPPORTED_TYPES."""
    if not data.strip():
        raise LoaderError("empty document: the file holds no text")
    if b"%PDF-" in data[:PDF_HEADER_WINDOW]:
        return "application/pdf"
    if data.startswith(b"PK\x03\x04"):
        return _zip_type(data)
    try:
        text = text_decode(data, filename)
    except LoaderError as error:
        if filename and not filename.lower().endswith(
            (".txt", ".text", *_MARKDOWN_NAMES, ".json", *_HTML_NAMES)
        ):
            raise LoaderError(f"unsupported file type: supported are {TYPE_NAMES}") from None
        raise LoaderError(f"{error}; supported types are {TYPE_NAMES}") from None
    return _text_type(text, filename.lower())


def _zip_type(data: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise LoaderError(f"corrupt ZIP archive (a .docx is one): {error}") from None
    if "word/document.xml" in names:
        return DOCX
    raise LoaderError(f"a ZIP archive that is not a Word document: supported are {TYPE_NAMES}")


def _text_type(text: str, name: str) -> str:
    head = text.lstrip()[:4096]
    if head[:1] in ("{", "["):
        try:
            json.loads(text)
        except (ValueError, RecursionError):  # json.loads recurses: "[[[[..." is deep
            pass  # text that starts with a bracket
        else:
            return "application/json"
    markdown_name = name.endswith(_MARKDOWN_NAMES)
    if _HTML_STRONG.match(head):
        return "text/html"
    # a Markdown file may hold HTML blocks: its name decides; any other text that
    # starts with an element and holds HTML tags is HTML
    if not markdown_name and (
        (head.startswith("<") and _html_tag_found(head))
        or (name.endswith(_HTML_NAMES) and _html_tag_found(head))
    ):
        return "text/html"
    return "text/markdown" if markdown_name else "text/plain"
