"""Real files for the ingestion tests, generated with the libraries that write them
(reportlab for PDF, python-docx for DOCX, pypdf for encryption), never hand-made bytes
that only our own parser would accept. Each sample states the facts a test checks.

Used by tests/ingestion/services/test_loaders.py and the pipeline's tests; bench/ingestion_phase.py
builds its 200-page PDF with pdf_bytes too.
"""

from __future__ import annotations

import io
import json
import random
import zipfile

from docx import Document as DocxDocument
from pypdf import PdfReader, PdfWriter
from reportlab.lib.pagesizes import A4
from reportlab.lib.utils import simpleSplit
from reportlab.pdfgen import canvas

_MARGIN = 72.0
_FONT, _FONT_SIZE, _LEADING = "Helvetica", 11.0, 14.0
_HEADING_FONT, _HEADING_SIZE = "Helvetica-Bold", 15.0


def pdf_bytes(pages: list[str], title: str = "Test document", author: str = "MemoryHub") -> bytes:
    """A PDF of len(pages) pages, page i holding the text pages[i] wrapped to the page
    width; blank lines separate paragraphs, and a line starting with '# ' is drawn as a
    bold heading. The title goes into the PDF's metadata. ValueError when a page's text
    does not fit on one page (page numbers must stay the tests' page numbers)."""
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4, pageCompression=1)
    pdf.setTitle(title)
    pdf.setAuthor(author)
    width, height = A4
    for number, page in enumerate(pages, start=1):
        y = height - _MARGIN
        for paragraph in page.split("\n\n"):
            heading = paragraph.startswith("# ")
            font, size = (_HEADING_FONT, _HEADING_SIZE) if heading else (_FONT, _FONT_SIZE)
            text = paragraph[2:] if heading else paragraph
            for line in simpleSplit(" ".join(text.split()), font, size, width - 2 * _MARGIN):
                if y < _MARGIN:
                    raise ValueError(f"page {number}'s text does not fit on one page")
                pdf.setFont(font, size)
                pdf.drawString(_MARGIN, y, line)
                y -= _LEADING + (size - _FONT_SIZE)
            y -= _LEADING / 2
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def blank_pdf_bytes(page_count: int = 2) -> bytes:
    """A valid PDF whose pages hold drawings and no text (a scan without OCR looks so)."""
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4)
    for _ in range(page_count):
        pdf.rect(100, 100, 300, 400, fill=1)
        pdf.circle(250, 600, 50)
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def encrypted_pdf_bytes(pages: list[str], password: str = "secret") -> bytes:
    """pdf_bytes(pages) encrypted with a user password (RC4-128: pypdf writes it without
    the optional cryptography package)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes(pages))))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def corrupt_pdf_bytes() -> bytes:
    """Starts like a real PDF, then the body is overwritten with noise and the cross
    reference table and trailer are cut off."""
    real = pdf_bytes(["A page that will not survive."])
    noise = random.Random(7).randbytes(len(real) // 2)
    return real[:16] + noise


def docx_bytes(
    blocks: list[tuple[int, str]],
    *,
    title: str = "",
    table: list[list[str]] | None = None,
) -> bytes:
    """A DOCX of ``blocks`` in order: (0, text) is a body paragraph, (n, text) a paragraph
    in the style 'Heading n'. ``title`` goes into the core properties; ``table`` (rows of
    cell texts) is appended after the blocks."""
    document = DocxDocument()
    if title:
        document.core_properties.title = title
    for level, text in blocks:
        if level:
            document.add_heading(text, level=level)
        else:
            document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for row, cells in zip(grid.rows, table, strict=True):
            for cell, text in zip(row.cells, cells, strict=True):
                cell.text = text
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def zip_bomb_docx_bytes(uncompressed_mb: int = 300) -> bytes:
    """A DOCX (a real one: python-docx wrote it) with one more entry of
    ``uncompressed_mb`` MB of zeros, which deflate packs about a thousand to one."""
    archive = io.BytesIO(docx_bytes([(1, "Innocent"), (0, "Nothing to see here.")]))
    zeros = bytes(1 << 20)
    with (
        zipfile.ZipFile(archive, "a", compression=zipfile.ZIP_DEFLATED) as bundle,
        bundle.open("word/media/image1.bin", "w", force_zip64=True) as entry,
    ):
        for _ in range(uncompressed_mb):
            entry.write(zeros)
    return archive.getvalue()


def binary_bytes(size: int = 4096) -> bytes:
    """Bytes no loader accepts: a PNG signature then random bytes (NULs included)."""
    return b"\x89PNG\r\n\x1a\n" + random.Random(11).randbytes(size)


MARKDOWN_SAMPLE = """\
# Installation guide

Read this before you start.

## Requirements

You need Python 3.11 and PostgreSQL 16 or later.

## Steps

### Download

Fetch the archive from the releases page.

### Configure

Set DATABASE_URL to the database's address.

# Troubleshooting

If the server does not start, read the log file under var/log.
"""
# (heading path, a sentence written under it) for every section of MARKDOWN_SAMPLE
MARKDOWN_SECTIONS: list[tuple[tuple[str, ...], str]] = [
    (("Installation guide",), "Read this before you start."),
    (("Installation guide", "Requirements"), "You need Python 3.11"),
    (("Installation guide", "Steps", "Download"), "Fetch the archive"),
    (("Installation guide", "Steps", "Configure"), "Set DATABASE_URL"),
    (("Troubleshooting",), "If the server does not start"),
]

HTML_SAMPLE = """\
<!DOCTYPE html>
<html><head><title>Refund policy</title>
<style>body { color: red; } .hidden-style-marker {}</style>
<script>var trackingMarker = "should never be text";</script>
</head>
<body>
<nav><a href="/">Home</a></nav>
<h1>Refunds</h1>
<p>Refunds are paid within <b>14 days</b> of the request.</p>
<h2>Exceptions</h2>
<ul><li>Gift cards are not refundable.</li><li>Sale items can be exchanged only.</li></ul>
<h3>Digital goods</h3>
<div>Downloads can be refunded before the first download.</div>
<h2>Contact</h2>
<p>Write to support&#64;example.com &amp; quote the order number.</p>
</body></html>
"""
HTML_TITLE = "Refund policy"
HTML_SECTIONS: list[tuple[tuple[str, ...], str]] = [
    (("Refunds",), "Refunds are paid within 14 days of the request."),
    (("Refunds", "Exceptions"), "Gift cards are not refundable."),
    (("Refunds", "Exceptions"), "Sale items can be exchanged only."),
    (("Refunds", "Exceptions", "Digital goods"), "Downloads can be refunded"),
    (("Refunds", "Contact"), "Write to support@example.com & quote the order number."),
]
HTML_NEVER_TEXT = ("trackingMarker", "hidden-style-marker", "color: red")

JSON_SAMPLE: dict[str, object] = {
    "title": "Product FAQ",
    "items": [
        {"question": "Does it run offline?", "body": "Yes, every model ships with the package."},
        {"question": "Which databases?", "body": "PostgreSQL with pgvector."},
        {"question": "Is there a limit?", "body": "Uploads are capped at 20 MB.", "votes": 12},
    ],
    "meta": {"version": 3, "public": True, "owner": None},
}
# (JSON path, its string) for every string leaf of JSON_SAMPLE
JSON_LEAVES: list[tuple[str, str]] = [
    ("title", "Product FAQ"),
    ("items[0].question", "Does it run offline?"),
    ("items[0].body", "Yes, every model ships with the package."),
    ("items[1].question", "Which databases?"),
    ("items[1].body", "PostgreSQL with pgvector."),
    ("items[2].question", "Is there a limit?"),
    ("items[2].body", "Uploads are capped at 20 MB."),
]


def markdown_bytes() -> bytes:
    return MARKDOWN_SAMPLE.encode()


def html_bytes() -> bytes:
    return HTML_SAMPLE.encode()


def json_bytes() -> bytes:
    return json.dumps(JSON_SAMPLE, indent=2).encode()


def text_bytes() -> bytes:
    """Plain UTF-8 text with multi-byte characters (accents, CJK, an emoji)."""
    return "Crème brûlée for dessert.\n\n会議は月曜日です。\n\nShip it 🚀 on Friday.\n".encode()


# A small multi-page manual whose facts sit on known pages (page number, fact)
PDF_PAGES: list[str] = [
    "# Chapter 1: Getting started\n\nThe Aurora 3000 coffee machine needs 1.2 litres of water "
    "for a full tank. Rinse the tank before the first use.",
    "# Chapter 2: Cleaning\n\nDescale the Aurora 3000 every 90 days with citric acid. "
    "The drip tray is dishwasher safe.",
    "# Chapter 3: Warranty\n\nThe warranty lasts 24 months from the date of purchase "
    "and covers the pump and the heating element.",
]
PDF_FACTS: list[tuple[int, str]] = [
    (1, "1.2 litres of water"),
    (2, "every 90 days"),
    (3, "24 months"),
]
PDF_TITLE = "Aurora 3000 manual"


_SUBJECTS = (
    "the maintenance team", "every operator", "the night shift", "our supplier", "the audit",
    "a new customer", "the regional office", "the finance department", "the pilot project",
    "the safety committee", "each technician", "the warehouse", "the support desk",
)  # fmt: skip
_VERBS = (
    "reviews", "replaces", "records", "inspects", "approves", "schedules", "measures",
    "documents", "reports", "calibrates", "updates", "checks", "archives", "escalates",
)  # fmt: skip
_OBJECTS = (
    "the pressure valves", "the quarterly budget", "every incoming shipment", "the backup logs",
    "the cooling system", "the access badges", "the training records", "the spare parts",
    "the invoices from March", "the fire exits", "the server racks", "the delivery routes",
)  # fmt: skip
_CLAUSES = (
    "before the end of each week", "whenever the alarm sounds", "as the manual requires",
    "unless the supervisor objects", "after every software upgrade", "during the winter months",
    "so that nothing is lost", "because the regulator asked for it", "at least twice a year",
    "when the temperature exceeds 40 degrees", "in the presence of a witness",
)  # fmt: skip
_TOPICS = (
    "Safety procedures", "Budget planning", "Equipment care", "Staff training", "Inventory",
    "Customer service", "Data retention", "Quality control", "Logistics", "Facilities",
)  # fmt: skip


def prose_sentence(rng: random.Random) -> str:
    """One plausible sentence of an operations manual."""
    sentence = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
    if rng.random() < 0.7:
        sentence += f" {rng.choice(_CLAUSES)}"
    if rng.random() < 0.25:
        sentence += f", and {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
    return sentence[0].upper() + sentence[1:] + rng.choice(".....?!")


def prose_pages(count: int, *, words_per_page: int = 400, seed: int = 0) -> list[str]:
    """``count`` pages of varied manual-like prose, about ``words_per_page`` words each,
    in paragraphs of 3-7 sentences; a page starts with a '# ' heading naming its section
    (the input pdf_bytes expects)."""
    rng = random.Random(seed)
    pages = []
    for number in range(1, count + 1):
        heading = f"# {number}. {rng.choice(_TOPICS)}"
        paragraphs, words = [], 0
        while words < words_per_page:
            paragraph = " ".join(prose_sentence(rng) for _ in range(rng.randint(3, 7)))
            paragraphs.append(paragraph)
            words += len(paragraph.split())
        pages.append("\n\n".join([heading, *paragraphs]))
    return pages
