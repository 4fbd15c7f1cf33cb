"""The loaders on real generated files: the text, its structure (pages, heading paths,
JSON paths) and a clear LoaderError for every file that cannot become text."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ingestion.loaders import (
    SUPPORTED_TYPES,
    LoaderError,
    ParsedDocument,
    Span,
    document_parse,
    document_parse_bounded,
    mime_type_detect,
)
from tests.ingestion import files

DOCX = SUPPORTED_TYPES[5]


def span_at(document: ParsedDocument, phrase: str) -> Span:
    """The span holding ``phrase`` (which must occur once)."""
    at = document.text.index(phrase)
    assert document.text.count(phrase) == 1
    return next(s for s in document.spans if s.start <= at < s.end)


# detection --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "filename", "expected"),
    [
        (files.pdf_bytes(["One page."]), "report.txt", "application/pdf"),
        (files.docx_bytes([(0, "Hello")]), "letter.pdf", DOCX),
        (files.json_bytes(), "export.txt", "application/json"),
        (files.html_bytes(), "page.txt", "text/html"),
        (b"<div><p>Hi</p></div>", "", "text/html"),
        (files.markdown_bytes(), "guide.md", "text/markdown"),
        (files.markdown_bytes(), "guide.markdown", "text/markdown"),
        (files.markdown_bytes(), "guide.txt", "text/plain"),
        (b"<div>An HTML block in Markdown</div>\n\n# Title\n", "notes.md", "text/markdown"),
        (b"[not json at all", "list.txt", "text/plain"),
        (b"42", "answer.json", "text/plain"),  # a bare number is no document
        (files.text_bytes(), "", "text/plain"),
    ],
)
def test_the_type_comes_from_the_content(data: bytes, filename: str, expected: str) -> None:
    assert mime_type_detect(data, filename) == expected


def test_a_zip_that_is_not_a_word_document_is_refused() -> None:
    import io
    import zipfile

    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("photos/cat.txt", "meow")
    with pytest.raises(LoaderError, match="not a Word document"):
        mime_type_detect(archive.getvalue(), "cat.docx")


def test_an_unknown_binary_file_names_the_supported_types() -> None:
    with pytest.raises(LoaderError, match="unsupported file type.*PDF.*Word"):
        mime_type_detect(files.binary_bytes(), "photo.png")


# the formats ------------------------------------------------------------------------


def test_pdf_pages_are_spans_numbered_from_one() -> None:
    document = document_parse(files.pdf_bytes(files.PDF_PAGES, title=files.PDF_TITLE))

    assert document.mime_type == "application/pdf"
    assert document.title == files.PDF_TITLE
    assert [s.page for s in document.spans] == [1, 2, 3]
    for page, fact in files.PDF_FACTS:
        assert span_at(document, fact).page == page
        at = document.text.index(fact)
        assert document.citation(at, at + len(fact)) == {"page": page}


def test_a_pdf_citation_names_its_first_and_last_page() -> None:
    document = document_parse(files.pdf_bytes(files.PDF_PAGES))
    start = document.text.index(files.PDF_FACTS[0][1])
    end = document.text.index(files.PDF_FACTS[2][1])

    assert document.citation(start, end) == {"page": 1, "page_end": 3}


def test_a_pdf_page_without_text_is_skipped_and_the_numbers_stay_true() -> None:
    pages = ["Text on the first page.", "", "Text on the third page."]
    document = document_parse(files.pdf_bytes(pages))

    assert [s.page for s in document.spans] == [1, 3]
    assert span_at(document, "third page").page == 3


def test_markdown_sections_carry_their_heading_path() -> None:
    document = document_parse(files.markdown_bytes(), filename="guide.md")

    assert document.text == files.MARKDOWN_SAMPLE  # chunks cite the source as it is
    assert document.title == "Installation guide"
    for path, phrase in files.MARKDOWN_SECTIONS:
        assert span_at(document, phrase).heading == path
        at = document.text.index(phrase)
        assert document.citation(at, at + 5) == {"heading": list(path)}


def test_a_hash_line_in_a_code_block_is_not_a_heading() -> None:
    source = "# Setup\n\n```sh\n# install the package\npip install x\n```\n\nAfter the block.\n"
    document = document_parse(source.encode(), filename="setup.md")

    assert span_at(document, "After the block").heading == ("Setup",)


def test_html_headings_build_the_path_and_scripts_are_dropped() -> None:
    document = document_parse(files.html_bytes(), filename="refunds.html")

    assert document.mime_type == "text/html"
    assert document.title == files.HTML_TITLE
    for path, phrase in files.HTML_SECTIONS:
        assert span_at(document, phrase).heading == path
    for hidden in files.HTML_NEVER_TEXT:
        assert hidden not in document.text
    # each list item is its own paragraph
    assert "Gift cards are not refundable.\n\nSale items" in document.text


def test_html_title_falls_back_to_the_first_h1() -> None:
    document = document_parse(b"<html><body><h1>Release notes</h1><p>Fixed.</p></body></html>")
    assert document.title == "Release notes"


def test_json_string_leaves_are_flattened_with_their_paths() -> None:
    document = document_parse(files.json_bytes(), filename="faq.json")

    assert document.text.splitlines() == [f"{path}: {text}" for path, text in files.JSON_LEAVES]
    assert document.title == "Product FAQ"
    for path, text in files.JSON_LEAVES:
        assert span_at(document, f"{path}: {text}").heading == (path,)
    assert "12" not in document.text  # a number is not text


def test_json_keys_that_are_not_names_are_quoted() -> None:
    data = json.dumps({"release notes": ["Faster", {"fix.1": "No crash"}]}).encode()
    document = document_parse(data)

    assert document.text.splitlines() == [
        '["release notes"][0]: Faster',
        '["release notes"][1]["fix.1"]: No crash',
    ]


def test_docx_heading_styles_build_the_path_and_tables_are_read() -> None:
    data = files.docx_bytes(
        [
            (0, "A preface before any heading."),
            (1, "Onboarding"),
            (0, "New staff get a badge on day one."),
            (2, "Equipment"),
            (0, "Laptops are ordered a week ahead."),
            (3, "Monitors"),
            (0, "Two monitors on request."),
            (1, "Leaving"),
            (0, "Return the badge at the front desk."),
        ],
        title="Staff handbook",
        table=[["Item", "Owner"], ["Badge", "Reception"]],
    )
    document = document_parse(data, filename="handbook.docx")

    assert document.mime_type == DOCX
    assert document.title == "Staff handbook"
    assert span_at(document, "A preface").heading == ()
    assert span_at(document, "badge on day one").heading == ("Onboarding",)
    assert span_at(document, "a week ahead").heading == ("Onboarding", "Equipment")
    assert span_at(document, "Two monitors").heading == ("Onboarding", "Equipment", "Monitors")
    assert span_at(document, "front desk").heading == ("Leaving",)
    assert span_at(document, "Badge | Reception").heading == ("Leaving",)
    # in reading order
    assert document.text.index("day one") < document.text.index("front desk")


def test_plain_text_keeps_multibyte_characters() -> None:
    document = document_parse(files.text_bytes(), filename="notes.txt")
    assert document.text == files.text_bytes().decode()
    assert document.citation(0, 10) == {}


def test_windows_line_breaks_become_newlines() -> None:
    document = document_parse(b"first line\r\nsecond line\r\n", filename="a.txt")
    assert document.text == "first line\nsecond line\n"


# bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "filename", "message"),
    [
        (lambda: files.encrypted_pdf_bytes(["Secret plans."]), "plans.pdf", "encrypted PDF"),
        (files.corrupt_pdf_bytes, "broken.pdf", "corrupt PDF"),
        (files.blank_pdf_bytes, "scan.pdf", "PDF yields no text"),
        (files.zip_bomb_docx_bytes, "bomb.docx", "would unpack to 300 MB.*zip bomb"),
        (files.binary_bytes, "notes.txt", "not a text file 'notes.txt': it holds NUL bytes"),
        (lambda: "café".encode("latin-1"), "menu.txt", "not a text file.*not valid UTF-8"),
        (lambda: b"ab\x01\x02\x03\x04\x05\x06cd", "log.txt", "not a text file.*control char"),
        (lambda: b"", "empty.txt", "empty document"),
        (lambda: b"  \n\n \t", "blank.md", "empty document"),
        (lambda: b"<html><script>alert(1)</script></html>", "a.html", "HTML page yields no text"),
        (lambda: json.dumps({"n": [1, None]}).encode(), "n.json", "JSON document yields no"),
        (lambda: files.docx_bytes([(0, "  ")]), "blank.docx", "Word document yields no text"),
        (lambda: b"PK\x03\x04 not really a zip", "fake.docx", "corrupt ZIP"),
    ],
    ids=[
        "encrypted-pdf", "corrupt-pdf", "pdf-without-text", "zip-bomb-docx", "binary-as-txt",
        "latin-1-text", "control-characters", "empty-file", "blank-file", "html-without-text",
        "json-without-strings", "docx-without-text", "fake-docx",
    ],
)  # fmt: skip
def test_bad_input_is_a_loader_error_that_says_why(
    make: Callable[[], bytes], filename: str, message: str
) -> None:
    with pytest.raises(LoaderError, match=message):
        document_parse(make(), filename=filename)


def test_a_zip_bomb_is_refused_by_its_ratio_below_the_size_cap() -> None:
    with pytest.raises(LoaderError, match="inflates .* times.*zip bomb"):
        document_parse(files.zip_bomb_docx_bytes(uncompressed_mb=50), filename="bomb.docx")


def test_a_pdf_with_only_an_owner_password_is_read() -> None:
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(files.pdf_bytes(["Open to all."]))))
    writer.encrypt(user_password="", owner_password="owner", algorithm="RC4-128")
    data = io.BytesIO()
    writer.write(data)

    assert document_parse(data.getvalue()).text == "Open to all."


# bounded parsing --------------------------------------------------------------------


def test_bounded_parsing_returns_what_parsing_here_returns() -> None:
    data = files.pdf_bytes(files.PDF_PAGES, title=files.PDF_TITLE)
    assert document_parse_bounded(data, filename="manual.pdf") == document_parse(data)


def test_bounded_parsing_passes_the_loader_error_on() -> None:
    with pytest.raises(LoaderError, match="encrypted PDF"):
        document_parse_bounded(files.encrypted_pdf_bytes(["x"]), filename="x.pdf")


@pytest.mark.slow
def test_a_parse_that_runs_out_of_time_is_stopped() -> None:
    data = files.pdf_bytes(files.prose_pages(200))
    with pytest.raises(LoaderError, match=r"parsing took longer than 0\.3 s"):
        document_parse_bounded(data, filename="long.pdf", timeout_seconds=0.3)


def test_a_parse_that_runs_out_of_memory_is_stopped() -> None:
    # 10 MB of JSON needs a few hundred MB of Python objects
    data = json.dumps([{"body": "word " * 20, "n": i} for i in range(80_000)]).encode()
    with pytest.raises(LoaderError, match="parsing needed more than 100 MB of memory"):
        document_parse_bounded(data, memory_mb=100)
    # the limit leaves room for an ordinary document
    assert document_parse_bounded(files.json_bytes(), memory_mb=100).title == "Product FAQ"
