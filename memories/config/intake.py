"""The sections of what comes into a project: API requests, counted against the
keys' rate limits (``limits``), and documents, cut into knowledge chunks
(``ingestion``)."""

from __future__ import annotations

from dataclasses import dataclass

from memories.config.fields import SettingsError, setting


@dataclass(frozen=True)
class LimitSettings:
    """Rate limits of the project's API keys, each key counted on its own; a request
    over them is a 429 with Retry-After."""

    reads_per_minute: int = setting(
        1200,
        "Reads per API key per minute (GET, searches, context); 0: unlimited.",
        minimum=0,
        maximum=1_000_000,
    )
    writes_per_minute: int = setting(
        600,
        "Writes per API key per minute (POST, PATCH, DELETE that change data); 0: unlimited.",
        minimum=0,
        maximum=1_000_000,
    )


# the chunkers of ingestion/chunkers.py (memories imports nothing from ingestion)
CHUNKERS = ("token_window", "recursive")


@dataclass(frozen=True)
class IngestionSettings:
    """Documents uploaded to the project: how their text is cut into knowledge chunks
    when an upload names no chunker or leaves some of its settings out."""

    chunker: str = setting(
        "token_window",
        "Chunker of an upload that names none: token_window (windows of tiktoken tokens) "
        "or recursive (paragraphs, lines, sentences, words up to a size in characters).",
        choices=CHUNKERS,
    )
    window_size: int = setting(
        512, "token_window: tokens (cl100k_base) per chunk.", minimum=16, maximum=8192
    )
    window_overlap: int = setting(
        50,
        "token_window: tokens each chunk shares with the one before.",
        minimum=0,
        maximum=8191,
    )
    chunk_size: int = setting(
        1000, "recursive: characters per chunk at most.", minimum=100, maximum=20_000
    )
    chunk_overlap: int = setting(
        200,
        "recursive: characters each chunk shares with the one before.",
        minimum=0,
        maximum=19_999,
    )

    def __post_init__(self) -> None:
        if self.window_overlap >= self.window_size:
            raise SettingsError({"ingestion.window_overlap": ["Must be less than window_size."]})
        if self.chunk_overlap >= self.chunk_size:
            raise SettingsError({"ingestion.chunk_overlap": ["Must be less than chunk_size."]})
