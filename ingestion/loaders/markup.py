"""The text formats: plain text, Markdown, HTML and JSON."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any

from .document import HeadingPath, LoaderError, ParsedDocument, Span, TextBuilder

# an ATX heading; CommonMark allows up to three spaces of indentation. The title (group
# 2) is the shortest text before an optional closing run of "#"s: it is empty or ends
# with a character that is not a space, so only there is the closing tried (tried after
# every character, "(.*?)" read each run of spaces once per space in it: n²)
_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(|.*?[^ \t\n]))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def plain_parse(text: str) -> ParsedDocument:
    """The text as it is, one span."""
    if not text.strip():
        raise LoaderError("the document holds no text")
    return ParsedDocument(text=text, mime_type="text/plain", spans=[Span(0, len(text))])


def markdown_parse(text: str) -> ParsedDocument:
    """The Markdown source as it is (chunks cite the original); one span per section,
    from a heading line to the next, with its heading path; title = the first '#'."""
    if not text.strip():
        raise LoaderError("the document holds no text")
    spans: list[Span] = []
    headings = HeadingPath()
    title, section_start, offset, fence = "", 0, 0, ""
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\n")
        opened = _FENCE.match(bare)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
        elif opened:
            fence = opened.group(1)
        elif heading := _ATX_HEADING.match(bare):
            if offset > section_start:
                spans.append(Span(section_start, offset, heading=headings.path))
            level, name = len(heading.group(1)), (heading.group(2) or "").strip()
            headings.enter(level, name)
            title = title or (name if level == 1 else "")
            section_start = offset
        offset += len(line)
    spans.append(Span(section_start, len(text), heading=headings.path))
    return ParsedDocument(text=text, mime_type="text/markdown", title=title, spans=spans)


# elements whose content is never visible text (the <title> is read on its own)
_SKIPPED = {"script", "style", "noscript", "template", "svg", "iframe", "object"}
_BLOCKS = {
    "p",
    "div",
    "section",
    "article",
    "aside",
    "header",
    "footer",
    "nav",
    "main",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "blockquote",
    "pre",
    "table",
    "tr",
    "form",
    "fieldset",
    "figure",
    "figcaption",
    "address",
    "details",
    "summary",
    "hr",
    "body",
    "caption",
}
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
# what html.parser reads as the start of a tag, comment or declaration ("</" alone at the
# end of the input is text)
_OPENS = re.compile(r"<(?:[a-zA-Z!?]|/.)", re.S)


class _HtmlText(HTMLParser):
    """Collects paragraphs (block elements) with the heading path above each."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.builder = TextBuilder()
        self.headings = HeadingPath()
        self.title = ""
        self.first_h1 = ""
        self._buffer: list[str] = []
        self._skip_depth = 0
        self._in_title = False
        self._in_pre = 0
        self._heading_level = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in _SKIPPED:
            self._skip_depth += 1
        elif self._skip_depth:
            return
        elif tag in _HEADINGS:
            self._flush()
            self._heading_level = _HEADINGS[tag]
        elif tag in _BLOCKS:
            self._flush()
            self._in_pre += tag == "pre"
        elif tag == "br":
            self._buffer.append("\n")
        elif tag in ("td", "th"):
            self._buffer.append(" | " if self._buffer else "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in _SKIPPED:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif self._skip_depth:
            return
        elif tag in _HEADINGS and self._heading_level:
            name = _collapse("".join(self._buffer))
            self._buffer = []
            if name:
                self.headings.enter(self._heading_level, name)
                self.first_h1 = self.first_h1 or (name if self._heading_level == 1 else "")
                self.builder.add(name, heading=self.headings.path)
            self._heading_level = 0
        elif tag in _BLOCKS:
            self._flush()
            self._in_pre -= tag == "pre" and self._in_pre > 0

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip_depth:
            self._buffer.append(data)

    def _flush(self) -> None:
        raw = "".join(self._buffer)
        self._buffer = []
        text = raw if self._in_pre else _collapse(raw)
        self.builder.add(text, heading=self.headings.path)

    def close(self) -> None:
        # A tag, comment or declaration still open at the end of the input runs to its
        # end and shows nothing, as in a browser and in Python from 3.11.13 (gh-135462).
        # Before that, html.parser showed its "<" as text and parsed again from the next
        # "<", each such parse reading to the end: n² ("<a " 80,000 times: 2 minutes).
        # (With convert_charrefs, as here, feed() stops only at such a construct, at a
        # lone "<" at the end, in text holding no "<", or inside a <script> or <style>.)
        if not self.cdata_elem and _OPENS.match(self.rawdata):
            self.rawdata = ""
        super().close()
        self._flush()


def _collapse(text: str) -> str:
    """Whitespace as a browser renders it: runs become one space; <br> lines kept."""
    return "\n".join(" ".join(line.split()) for line in text.split("\n")).strip()


def html_parse(text: str) -> ParsedDocument:
    """The visible text of an HTML page, a paragraph per block element, headings h1-h6
    building the heading path; scripts and styles dropped; title = <title> or first h1."""
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    title = _collapse(parser.title) or parser.first_h1
    return parser.builder.build(mime_type="text/html", title=title, what="HTML page")


def json_parse(text: str) -> ParsedDocument:
    """Every string leaf as a line 'path: text' (path like items[2].body), its span's
    heading the JSON path; numbers, booleans and nulls are left out."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise LoaderError(f"invalid JSON: {error}") from None
    lines: list[str] = []
    spans: list[Span] = []
    offset = 0
    for path, leaf in _string_leaves(value, ""):
        if not leaf.strip():
            continue
        line = f"{path}: {leaf}" if path else leaf
        spans.append(Span(offset, offset + len(line), heading=(path,) if path else ()))
        lines.append(line)
        offset += len(line) + 1
    if not lines:
        raise LoaderError("the JSON document yields no text: it holds no strings")
    title = value.get("title") if isinstance(value, dict) else None
    return ParsedDocument(
        text="\n".join(lines),
        mime_type="application/json",
        title=title.strip() if isinstance(title, str) else "",
        spans=spans,
    )


def _string_leaves(value: Any, path: str) -> list[tuple[str, str]]:
    """(path, string) of every string under ``value``, in document order; iterative, so
    a deeply nested document cannot exhaust the recursion limit."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            found.append((where, item))
        elif isinstance(item, dict):
            stack.extend(reversed([(_key_path(where, str(k)), v) for k, v in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([(f"{where}[{i}]", v) for i, v in enumerate(item)]))
    return found


def _key_path(parent: str, key: str) -> str:
    if _IDENTIFIER.match(key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key, ensure_ascii=False)}]"
