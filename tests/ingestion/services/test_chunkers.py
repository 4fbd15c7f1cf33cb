"""The chunkers: token windows counted again with tiktoken, the recursive splitter's
sizes, overlaps and separators, exact offsets, and the settings' validation."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingestion.chunkers import (
    Chunk,
    ChunkerSettingsError,
    RecursiveChunker,
    TokenWindowChunker,
    chunker_get,
    chunker_settings_clean,
)
from memories.providers.tokens import encoding_get
from tests.ingestion.files import prose_pages, prose_sentence

ENCODING = encoding_get("cl100k_base")
PROSE = "\n\n".join(prose_pages(6, words_per_page=300, seed=5))


def tokens(text: str) -> list[int]:
    return ENCODING.encode_ordinary(text)


def assert_exact_offsets(text: str, chunks: list[Chunk]) -> None:
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end]
    assert [c.start for c in chunks] == sorted({c.start for c in chunks})  # strictly ascending


def assert_covers(text: str, chunks: list[Chunk]) -> None:
    """The union of the chunks is the whole text."""
    assert chunks[0].start == 0
    assert chunks[-1].end == len(text)
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.start <= before.end


# token windows ----------------------------------------------------------------------


def test_every_window_holds_exactly_window_size_tokens() -> None:
    chunks = TokenWindowChunker(window_size=64, window_overlap=10).chunk_spans(PROSE)

    assert len(chunks) > 20
    assert [len(tokens(c.text)) for c in chunks[:-1]] == [64] * (len(chunks) - 1)
    assert 0 < len(tokens(chunks[-1].text)) <= 64
    assert_exact_offsets(PROSE, chunks)
    assert_covers(PROSE, chunks)


def test_consecutive_windows_share_exactly_window_overlap_tokens() -> None:
    chunks = TokenWindowChunker(window_size=64, window_overlap=10).chunk_spans(PROSE)

    for before, after in zip(chunks, chunks[1:], strict=False):
        shared = PROSE[after.start : before.end]
        assert len(tokens(shared)) == 10
        assert tokens(before.text)[-10:] == tokens(shared) == tokens(after.text)[:10]


def test_the_windows_are_the_texts_own_tokens_cut_in_order() -> None:
    size, overlap = 50, 7
    chunks = TokenWindowChunker(window_size=size, window_overlap=overlap).chunk_spans(PROSE)
    whole = tokens(PROSE)

    for i, chunk in enumerate(chunks):
        first = i * (size - overlap)
        assert tokens(chunk.text) == whole[first : first + size]


def test_without_overlap_the_windows_tile_the_text() -> None:
    chunks = TokenWindowChunker(window_size=32, window_overlap=0).chunk_spans(PROSE)

    assert "".join(c.text for c in chunks) == PROSE
    assert all(b.start == a.end for a, b in zip(chunks, chunks[1:], strict=False))


def test_the_defaults_are_512_tokens_overlapping_by_50() -> None:
    text = "\n\n".join(prose_pages(4, seed=9))
    chunks = chunker_get("token_window").chunk_spans(text)

    assert len(chunks) >= 3
    assert len(tokens(chunks[0].text)) == 512
    assert len(tokens(text[chunks[1].start : chunks[0].end])) == 50


def test_a_text_shorter_than_a_window_is_one_chunk_and_no_text_none() -> None:
    chunker = TokenWindowChunker(window_size=64, window_overlap=10)
    text = "A short note: the server restarts at noon. 会議は月曜日です 🚀"

    assert chunker.chunk_spans(text) == [Chunk(text, 0, len(text))]
    assert chunker.chunk(text) == [text]
    assert chunker.chunk_spans("") == []


def test_windows_cut_between_whole_characters_in_multibyte_text() -> None:
    text = "Crème brûlée, 会議は月曜日です。 Ship it 🚀🚀 on Friday, señor Müller. " * 60
    chunks = TokenWindowChunker(window_size=40, window_overlap=8).chunk_spans(text)

    assert_exact_offsets(text, chunks)
    assert_covers(text, chunks)
    for chunk in chunks:
        assert len(tokens(chunk.text)) <= 40
        assert chunk.text.encode().decode() == chunk.text  # no broken character
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert len(tokens(text[after.start : before.end])) >= 8
    # most cuts are exact even here
    exact = sum(len(tokens(c.text)) == 40 for c in chunks[:-1])
    assert exact >= len(chunks) // 2


# texts of many windows: words, numbers, punctuation, whitespace runs, accents, CJK
# and emoji (several tokens to a character) in any order
FRAGMENTS = [
    "the", " server", " restarts", " at", " noon", ".", ",", "!", "?", " ", "  ", "\n", "\n\n",
    "\t", "12", "3456", " Müller", " señor", "é", "ü", "会議", "日本語", "🚀", "👍🏽", "€", "photo",
    "synthesis", "'s", " (", ")", "--", "ÿ", "\u200b",
]  # fmt: skip
multibyte_text = st.lists(st.sampled_from(FRAGMENTS), min_size=60, max_size=600).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=multibyte_text, size=st.integers(16, 80), overlap_share=st.floats(0, 0.9))
def test_token_windows_of_any_text(text: str, size: int, overlap_share: float) -> None:
    overlap = int(size * overlap_share)
    chunks = TokenWindowChunker(window_size=size, window_overlap=overlap).chunk_spans(text)

    assert_exact_offsets(text, chunks)
    assert_covers(text, chunks)
    for chunk in chunks:
        assert 0 < len(tokens(chunk.text)) <= size
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.start > before.start
        # a long word piece may hold no cut that re-encodes the same: then the overlap
        # may fall short by what one character spans (up to 4 tokens), never more
        shared = len(tokens(text[after.start : before.end]))
        assert shared >= min(overlap, len(tokens(before.text)) - 4)


# recursive --------------------------------------------------------------------------


def paragraphs(count: int, seed: int, sentences: tuple[int, int] = (1, 3)) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(prose_sentence(rng) for _ in range(rng.randint(*sentences))) for _ in range(count)
    ]


def test_recursive_chunks_never_exceed_chunk_size_and_the_defaults_are_1000_and_200() -> None:
    chunker = chunker_get("recursive")
    chunks = chunker.chunk_spans(PROSE)

    assert isinstance(chunker, RecursiveChunker)
    assert (chunker.chunk_size, chunker.chunk_overlap) == (1000, 200)
    assert all(len(c.text) <= 1000 for c in chunks)
    assert max(len(c.text) for c in chunks) > 800  # chunks are filled
    assert_exact_offsets(PROSE, chunks)


def test_paragraphs_are_kept_whole_when_they_fit() -> None:
    parts = paragraphs(30, seed=1)
    text = "\n\n".join(parts)
    chunks = RecursiveChunker(chunk_size=400, chunk_overlap=0).chunk_spans(text)

    assert_exact_offsets(text, chunks)
    for chunk in chunks:
        assert len(chunk.text) <= 400
        # a chunk is whole paragraphs
        assert chunk.start == 0 or text[chunk.start - 2 : chunk.start] == "\n\n"
        assert chunk.end == len(text) or text[chunk.end : chunk.end + 2] == "\n\n"
    assert "\n\n".join(c.text for c in chunks) == text


def test_a_long_paragraph_is_cut_between_lines_then_sentences_then_words() -> None:
    lines = "\n".join(paragraphs(12, seed=2, sentences=(1, 1)))  # each line fits
    sentences = " ".join(paragraphs(12, seed=3))
    words = " ".join(re.sub(r"[.?!]", "", sentences).split())
    chunker = RecursiveChunker(chunk_size=200, chunk_overlap=0)

    for chunk in chunker.chunk_spans(lines):
        assert chunk.end == len(lines) or lines[chunk.end] == "\n"
    for chunk in chunker.chunk_spans(sentences):
        assert chunk.text[-1] in ".?!"
    for chunk in chunker.chunk_spans(words):
        assert chunk.end == len(words) or words[chunk.end] == " "
        assert chunk.start == 0 or words[chunk.start - 1] == " "


def test_text_without_separators_is_cut_into_characters_with_the_exact_overlap() -> None:
    text = "x" * 1000
    chunks = RecursiveChunker(chunk_size=300, chunk_overlap=50).chunk_spans(text)

    assert [len(c.text) for c in chunks[:-1]] == [300] * (len(chunks) - 1)
    assert all(a.end - b.start == 50 for a, b in zip(chunks, chunks[1:], strict=False))
    assert_covers(text, chunks)


def test_the_overlap_is_whole_words_from_the_previous_chunks_tail() -> None:
    text = " ".join(paragraphs(20, seed=4)).replace(".", "").replace("?", "").replace("!", "")
    chunks = RecursiveChunker(chunk_size=150, chunk_overlap=40).chunk_spans(text)

    assert len(chunks) > 10
    for before, after in zip(chunks, chunks[1:], strict=False):
        shared = before.end - after.start
        assert 0 < shared <= 40
        assert before.text.endswith(text[after.start : before.end])
        assert text[after.start - 1] == " "  # starts on a word


def test_a_large_overlap_never_pushes_a_chunk_past_chunk_size() -> None:
    # after the overlap is kept, a long next word must still fit: more of the tail goes
    text = " ".join(["short", "w" * 58] * 40)
    chunks = RecursiveChunker(chunk_size=100, chunk_overlap=90).chunk_spans(text)

    assert max(len(c.text) for c in chunks) <= 100
    assert_exact_offsets(text, chunks)


recursive_text = st.lists(
    st.sampled_from([*FRAGMENTS, ". ", "? ", "! ", "word", "x" * 30]), min_size=80, max_size=800
).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=recursive_text, size=st.integers(100, 400), overlap_share=st.floats(0, 0.9))
def test_recursive_chunks_of_any_text(text: str, size: int, overlap_share: float) -> None:
    overlap = int(size * overlap_share)
    chunks = RecursiveChunker(chunk_size=size, chunk_overlap=overlap).chunk_spans(text)

    assert_exact_offsets(text, chunks)
    covered = set()
    for chunk in chunks:
        assert 0 < len(chunk.text) <= size
        assert chunk.text == chunk.text.strip()
        covered.update(range(chunk.start, chunk.end))
    # every character that is not whitespace is in a chunk
    assert {i for i, c in enumerate(text) if not c.isspace()} <= covered
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert before.end - after.start <= overlap


# settings ---------------------------------------------------------------------------


def test_settings_are_completed_with_the_defaults() -> None:
    assert chunker_settings_clean("token_window", None) == {
        "window_size": 512,
        "window_overlap": 50,
        "encoding": "cl100k_base",
    }
    assert chunker_settings_clean("recursive", {"chunk_size": "1500"}) == {
        "chunk_size": 1500,
        "chunk_overlap": 200,
    }


@pytest.mark.parametrize(
    ("name", "given", "field", "message"),
    [
        ("semantic", {}, "chunker", "unknown chunker 'semantic'"),
        ("token_window", {"chunk_size": 100}, "chunk_size", "unknown setting of token_window"),
        ("token_window", {"window_size": 12.5}, "window_size", "must be an integer"),
        ("token_window", {"window_size": True}, "window_size", "must be an integer"),
        ("token_window", {"window_size": "many"}, "window_size", "must be an integer"),
        ("token_window", {"window_size": 8}, "window_size", "between 16 and 8192"),
        ("token_window", {"window_size": 9000}, "window_size", "between 16 and 8192"),
        ("token_window", {"window_size": 64, "window_overlap": 64}, "window_overlap", "smaller"),
        ("token_window", {"window_overlap": -1}, "window_overlap", "between 0 and 511"),
        ("token_window", {"encoding": "gpt2"}, "encoding", "unknown encoding 'gpt2'"),
        ("recursive", {"chunk_size": 50}, "chunk_size", "between 100 and 20000"),
        ("recursive", {"chunk_size": 20_001}, "chunk_size", "between 100 and 20000"),
        ("recursive", {"chunk_overlap": 1000}, "chunk_overlap", "smaller than chunk_size"),
        ("recursive", {"window_size": 100}, "window_size", "unknown setting of recursive"),
    ],
)
def test_bad_settings_name_the_field(name: str, given: dict, field: str, message: str) -> None:
    with pytest.raises(ChunkerSettingsError, match=message) as caught:
        chunker_get(name, given)
    assert caught.value.field == field


def test_the_chunkers_refuse_bad_settings_when_built_directly() -> None:
    with pytest.raises(ChunkerSettingsError):
        TokenWindowChunker(window_size=100, window_overlap=100)
    with pytest.raises(ChunkerSettingsError):
        RecursiveChunker(chunk_size=99)
