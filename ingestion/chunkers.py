"""Cutting a document's text into chunks (Xaibo's ChunkingProtocol, with offsets).

Two chunkers, each returning chunks whose ``text == source[start:end]``:

* token_window: windows of ``window_size`` tiktoken tokens, consecutive windows sharing
  ``window_overlap`` tokens (Xaibo's TokenChunker, with character offsets);
* recursive: ElizaOS's / LangChain's RecursiveCharacterTextSplitter, ``chunk_size`` and
  ``chunk_overlap`` in characters, separators paragraph, line, sentence, word, character.

Pure Python (no Django).
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Any, Protocol

from memories.providers.tokens import ENCODINGS, encoding_get


@dataclass(frozen=True)
class Chunk:
    """Characters [start, end) of the text; ``text == source[start:end]``."""

    text: str
    start: int
    end: int


class ChunkingProtocol(Protocol):
    def chunk(self, text: str) -> list[str]: ...

    def chunk_spans(self, text: str) -> list[Chunk]: ...


CHUNKERS: tuple[str, ...] = ("token_window", "recursive")


class ChunkerSettingsError(ValueError):
    """Bad chunker name or settings; ``field`` names the offending setting."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


# name -> setting -> (default, lowest, highest); an overlap's highest is its size - 1
_SETTINGS: dict[str, dict[str, tuple[int, int, int]]] = {
    "token_window": {"window_size": (512, 16, 8192), "window_overlap": (50, 0, 8191)},
    "recursive": {"chunk_size": (1000, 100, 20_000), "chunk_overlap": (200, 0, 19_999)},
}
_OVERLAP_OF = {"window_overlap": "window_size", "chunk_overlap": "chunk_size"}


class TokenWindowChunker:
    """Windows of ``window_size`` tokens; each window after the first starts
    ``window_overlap`` tokens before the previous one ends; together they cover the text.

    The cuts are token boundaries of the whole text's encoding, and a window's text
    is counted again by re-encoding it (what a reader of the chunk counts). A cut must
    fall between whole characters and re-encode the same (BPE merges differently
    across a cut inside a word piece): where the exact cut does not, the window ends a
    token earlier, or the next window starts a token earlier, until it does. So in
    ordinary text every window re-encodes to exactly ``window_size`` tokens (the last
    to at most that) and every overlap to exactly ``window_overlap``. Inside a long
    word piece that holds no clean cut (a 200-letter 'word', runs of emoji) the cut
    falls between whole characters anyway: the window still re-encodes to at most
    ``window_size`` tokens, and the overlap to ``window_overlap`` or a few tokens
    fewer (tests/ingestion/services/test_chunkers.py states the bound the property test holds)."""

    def __init__(
        self, *, window_size: int = 512, window_overlap: int = 50, encoding: str = "cl100k_base"
    ) -> None:
        settings = chunker_settings_clean(
            "token_window",
            {"window_size": window_size, "window_overlap": window_overlap, "encoding": encoding},
        )
        self.window_size: int = settings["window_size"]
        self.window_overlap: int = settings["window_overlap"]
        self.encoding = encoding_get(encoding)

    # how many cuts are tried for an exact one before a fallback is taken (a long word
    # piece may hold no exact cut at all: each try is one encode of a window)
    CUT_TRIES = 32

    def chunk(self, text: str) -> list[str]:
        return [chunk.text for chunk in self.chunk_spans(text)]

    def chunk_spans(self, text: str) -> list[Chunk]:
        tokens = self.encoding.encode_ordinary(text)
        if not tokens:
            return []
        offsets = _token_offsets(self.encoding, tokens, text)
        count = len(tokens)
        chunks: list[Chunk] = []
        start = 0
        while True:
            end = self._end_after(text, offsets, start, min(start + self.window_size, count))
            chunks.append(Chunk(text[offsets[start] : offsets[end]], offsets[start], offsets[end]))
            if end >= count:
                return chunks
            start = self._start_before(text, offsets, start, end)

    def _tokens_in(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def _end_after(self, text: str, offsets: list[int], start: int, end: int) -> int:
        """The window's end: the last clean cut at or before ``end`` (the window
        re-encodes to exactly cut - start tokens), looked for among the CUT_TRIES cuts
        before it; failing that, the last whole-character cut whose window re-encodes
        to at most window_size tokens."""
        fallback = 0
        for tried, cut in enumerate(c for c in range(end, start, -1) if offsets[c] >= 0):
            found = self._tokens_in(text[offsets[start] : offsets[cut]])
            if found == cut - start:
                return cut
            fallback = fallback or (cut if found <= self.window_size else 0)
            if fallback and tried >= self.CUT_TRIES:
                break
        # a character spans at most 4 tokens: some whole-character cut fits
        return fallback or next(c for c in range(start + 1, end + 1) if offsets[c] >= 0)

    def _start_before(self, text: str, offsets: list[int], start: int, end: int) -> int:
        """The next window's start: the first clean cut at or before ``window_overlap``
        tokens before ``end`` (the overlap re-encodes to exactly end - cut tokens);
        failing that, the first whole-character cut whose overlap re-encodes to at least
        window_overlap tokens. Always after ``start``: the windows advance."""
        if self.window_overlap == 0:
            return end
        fallback = 0
        first = max(end - self.window_overlap, start + 1)
        for tried, cut in enumerate(c for c in range(first, start, -1) if offsets[c] >= 0):
            found = self._tokens_in(text[offsets[cut] : offsets[end]])
            if found == end - cut:
                return cut
            fallback = fallback or (cut if found >= self.window_overlap else 0)
            if fallback and tried >= self.CUT_TRIES:
                break
        return fallback or next((c for c in range(start + 1, end) if offsets[c] >= 0), end)


def _token_offsets(encoding: Any, tokens: list[int], text: str) -> list[int]:
    """The character offset of each token boundary (len(tokens) + 1 of them), -1 where
    a boundary falls inside a character's UTF-8 bytes."""
    byte_ends = list(
        itertools.accumulate(len(encoding.decode_single_token_bytes(t)) for t in tokens)
    )
    # the byte offset at which each character starts, and the end
    char_starts = list(itertools.accumulate((len(c.encode()) for c in text), initial=0))
    offsets = [0]
    for byte_end in byte_ends:
        index = bisect.bisect_left(char_starts, byte_end)
        offsets.append(index if char_starts[index] == byte_end else -1)
    return offsets


class RecursiveChunker:
    """LangChain's RecursiveCharacterTextSplitter (which ElizaOS uses), with offsets.

    The text is split on the first separator it holds (paragraph, line, sentence,
    word, then single characters), each separator staying with the part before it;
    parts longer than ``chunk_size`` are split again with the next separators; the
    parts are merged into chunks of at most ``chunk_size`` characters, each chunk
    starting with up to ``chunk_overlap`` characters of whole parts from the end of the
    previous one. Chunks are stripped of surrounding whitespace (offsets follow), and of
    two chunks that stripping leaves one inside the other only the larger is kept."""

    SEPARATORS: tuple[tuple[str, ...], ...] = (("\n\n",), ("\n",), (". ", "? ", "! "), (" ",))

    def __init__(self, *, chunk_size: int = 1000, chunk_overlap: int = 200) -> None:
        settings = chunker_settings_clean(
            "recursive", {"chunk_size": chunk_size, "chunk_overlap": chunk_overlap}
        )
        self.chunk_size: int = settings["chunk_size"]
        self.chunk_overlap: int = settings["chunk_overlap"]

    def chunk(self, text: str) -> list[str]:
        return [chunk.text for chunk in self.chunk_spans(text)]

    def chunk_spans(self, text: str) -> list[Chunk]:
        chunks: list[Chunk] = []
        for start, end in self._split(text, 0, len(text), 0):
            stripped = text[start:end]
            lead = len(stripped) - len(stripped.lstrip())
            stripped = stripped.strip()
            chunk = Chunk(stripped, start + lead, start + lead + len(stripped))
            # stripping can leave a chunk inside its neighbour (whitespace-only parts
            # around an overlap): keep the larger one
            if not stripped or (chunks and chunk.end <= chunks[-1].end):
                continue
            if chunks and chunk.start <= chunks[-1].start:
                chunks[-1] = chunk
            else:
                chunks.append(chunk)
        return chunks

    def _split(self, text: str, start: int, end: int, level: int) -> list[tuple[int, int]]:
        """Chunks (start, end) of text[start:end], split from separator ``level`` on."""
        piece = text[start:end]
        while level < len(self.SEPARATORS) and not any(s in piece for s in self.SEPARATORS[level]):
            level += 1
        parts = _parts(piece, self.SEPARATORS[level] if level < len(self.SEPARATORS) else ())
        chunks: list[tuple[int, int]] = []
        small: list[tuple[int, int]] = []
        for part_start, part_end in parts:
            span = (start + part_start, start + part_end)
            if part_end - part_start < self.chunk_size:
                small.append(span)
                continue
            chunks.extend(self._merge(small))
            small = []
            if level >= len(self.SEPARATORS):
                chunks.append(span)  # cannot happen: single characters are small
            else:
                chunks.extend(self._split(text, *span, level + 1))
        return chunks + self._merge(small)

    def _merge(self, parts: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Consecutive parts merged into chunks of at most chunk_size characters, each
        chunk after the first starting with the previous one's last parts totalling at
        most chunk_overlap characters (LangChain's _merge_splits)."""
        chunks: list[tuple[int, int]] = []
        first = 0  # the parts first..i-1 form the chunk being built
        for i, (part_start, part_end) in enumerate(parts):
            size = part_end - part_start
            if i > first and parts[i - 1][1] - parts[first][0] + size > self.chunk_size:
                chunks.append((parts[first][0], parts[i - 1][1]))
                total = parts[i - 1][1] - parts[first][0]
                while first < i and (total > self.chunk_overlap or total + size > self.chunk_size):
                    total -= parts[first][1] - parts[first][0]
                    first += 1
        if parts:
            chunks.append((parts[first][0], parts[-1][1]))
        return chunks


def _parts(piece: str, separators: tuple[str, ...]) -> list[tuple[int, int]]:
    """(start, end) of the parts of ``piece`` cut after each separator (the separator
    stays with the part before it); single characters when there are no separators."""
    if not separators:
        return [(i, i + 1) for i in range(len(piece))]
    cuts = sorted({i + len(s) for s in separators for i in _find_all(piece, s)})
    bounds = [0, *[c for c in cuts if 0 < c < len(piece)], len(piece)]
    return list(itertools.pairwise(bounds))


def _find_all(text: str, needle: str) -> list[int]:
    found, at = [], text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + len(needle))
    return found


def chunker_get(name: str, settings: dict[str, Any] | None = None) -> ChunkingProtocol:
    """The chunker of that name with its settings (defaults filled in):
    token_window: window_size 512, window_overlap 50 (tiktoken tokens), encoding cl100k_base;
    recursive: chunk_size 1000, chunk_overlap 200 (characters)."""
    cleaned = chunker_settings_clean(name, settings)
    if name == "token_window":
        return TokenWindowChunker(**cleaned)
    return RecursiveChunker(**cleaned)


def chunker_settings_clean(name: str, settings: dict[str, Any] | None) -> dict[str, Any]:
    """The complete, validated settings of that chunker (what a Document records);
    ChunkerSettingsError naming the field for an unknown chunker or setting, a value
    that is not an integer, or one out of range. Integers may come as digit strings."""
    if name not in _SETTINGS:
        raise ChunkerSettingsError(
            "chunker", f"unknown chunker {name!r}: one of {', '.join(CHUNKERS)}"
        )
    schema = _SETTINGS[name]
    given = dict(settings or {})
    known = [*schema, "encoding"] if name == "token_window" else list(schema)
    for key in given:
        if key not in known:
            raise ChunkerSettingsError(
                key, f"unknown setting of {name}: known are {', '.join(known)}"
            )
    cleaned: dict[str, Any] = {}
    for key, (default, lowest, highest) in schema.items():
        value = _integer(key, given.get(key, default))
        if key in _OVERLAP_OF:
            highest = cleaned[_OVERLAP_OF[key]] - 1
            if value > highest:
                raise ChunkerSettingsError(
                    key, f"must be smaller than {_OVERLAP_OF[key]} ({highest + 1})"
                )
        if not lowest <= value <= highest:
            raise ChunkerSettingsError(key, f"must be between {lowest} and {highest}")
        cleaned[key] = value
    if name == "token_window":
        encoding = given.get("encoding", ENCODINGS[0])
        if encoding not in ENCODINGS:
            raise ChunkerSettingsError(
                "encoding", f"unknown encoding {encoding!r}: one of {', '.join(ENCODINGS)}"
            )
        cleaned["encoding"] = encoding
    return cleaned


def _integer(field: str, value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ChunkerSettingsError(field, f"must be an integer, not {value!r}")
    return value
