"""The binary formats: PDF (pypdf) and Word documents (python-docx)."""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any

from .document import DOCX, HeadingPath, LoaderError, ParsedDocument, TextBuilder

# zip-bomb guards, checked on the archive's directory before anything is unpacked
# (Python's zipfile never inflates an entry past the size its directory declares)
DOCX_UNPACKED_MAX_BYTES = 200 * 1024 * 1024
DOCX_ENTRIES_MAX = 10_000
# real entries inflate up to ~30x (python-docx's own styles.xml: 29x); a bomb ~1000x
DOCX_RATIO_MAX = 100
DOCX_RATIO_CHECKED_FROM_BYTES = 1024 * 1024  # small entries may be as compressible as they like
_HEADING_STYLE = re.compile(r"^Heading ([1-9])$")
_BLANK_LINES = re.compile(r"\n{3,}")


def pdf_parse(data: bytes) -> ParsedDocument:
    """One span per page that holds text (pages numbered from 1), the title from the
    PDF's metadata; LoaderError for an encrypted, corrupt or text-less PDF."""
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            _pdf_decrypt(reader)
        builder = TextBuilder()
        for number, page in enumerate(reader.pages, start=1):
            builder.add(_page_text(page.extract_text()), page=number)
        title = _pdf_title(reader.metadata)
    except LoaderError:
        raise
    except (DependencyError, FileNotDecryptedError):
        raise LoaderError("encrypted PDF: it cannot be read without its password") from None
    except MemoryError:
        raise
    except Exception as error:  # pypdf raises a dozen kinds on damaged files
        raise LoaderError(f"corrupt PDF: {type(error).__name__}: {error}"[:300]) from None
    if not builder.spans:
        raise LoaderError(
            "the PDF yields no text: its pages hold no text layer (a scan needs OCR first)"
            if len(reader.pages)
            else "corrupt PDF: it has no pages"
        )
    return builder.build(mime_type="application/pdf", title=title, what="PDF")


def _pdf_decrypt(reader: Any) -> None:
    """Opens a PDF protected by an owner password only (readable by anyone, as every
    viewer does); LoaderError when it needs a user password."""
    from pypdf import PasswordType

    if reader.decrypt("") == PasswordType.NOT_DECRYPTED:
        raise LoaderError("encrypted PDF: it cannot be read without its password")


def _page_text(text: str) -> str:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def _pdf_title(metadata: Any) -> str:
    title = metadata.title if metadata is not None else None
    return str(title).strip() if title else ""


def docx_parse(data: bytes) -> ParsedDocument:
    """Paragraphs and tables in reading order; paragraphs in the styles 'Heading 1'..
    'Heading 9' build the heading path; a table row is one line, cells joined by ' | ';
    title from the core properties, else the 'Title' paragraph or the first Heading 1."""
    docx_archive_check(data)
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
        builder = TextBuilder()
        headings = HeadingPath()
        title, first_heading = (document.core_properties.title or "").strip(), ""
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                builder.add(_table_text(block), heading=headings.path)
                continue
            text = block.text.strip()
            style = block.style.name if block.style is not None else ""
            level = _HEADING_STYLE.match(style or "")
            if level and text:
                headings.enter(int(level.group(1)), text)
                first_heading = first_heading or text
            elif style == "Title" and text:
                title = title or text
            builder.add(text, heading=headings.path)
    except LoaderError:
        raise
    except MemoryError:
        raise
    except Exception as error:  # python-docx and lxml on a damaged package
        raise LoaderError(f"corrupt Word document: {type(error).__name__}: {error}"[:300]) from None
    return builder.build(mime_type=DOCX, title=title or first_heading, what="Word document")


def _table_text(table: Any) -> str:
    rows = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell is returned once per grid column
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def docx_archive_check(data: bytes) -> None:
    """Refuses an archive that would unpack to too much (a zip bomb) before anything
    is inflated: LoaderError."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise LoaderError(f"corrupt Word document: {error}") from None
    if len(entries) > DOCX_ENTRIES_MAX:
        raise LoaderError(
            f"refused: the Word document holds {len(entries)} files (at most {DOCX_ENTRIES_MAX})"
        )
    unpacked = sum(entry.file_size for entry in entries)
    if unpacked > DOCX_UNPACKED_MAX_BYTES:
        raise LoaderError(
            f"refused: the Word document would unpack to {unpacked // 2**20} MB "
            f"(at most {DOCX_UNPACKED_MAX_BYTES // 2**20} MB): it looks like a zip bomb"
        )
    for entry in entries:
        ratio = entry.file_size / max(entry.compress_size, 1)
        if entry.file_size >= DOCX_RATIO_CHECKED_FROM_BYTES and ratio > DOCX_RATIO_MAX:
            raise LoaderError(
                f"refused: {entry.filename} in the Word document inflates {ratio:.0f} times "
                f"(at most {DOCX_RATIO_MAX}): it looks like a zip bomb"
            )
