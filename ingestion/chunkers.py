"""Cutting a document's text into chunks (Xaibo's ChunkingProtocol, with offsets).

INTERFACE FIXED FOR THE INGESTION PIPELINE; the bodies are being written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


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


def chunker_get(name: str, settings: dict[str, Any] | None = None) -> ChunkingProtocol:
    """The chunker of that name with its settings (defaults filled in):
    token_window: window_size 512, window_overlap 50 (tiktoken tokens), encoding cl100k_base;
    recursive: chunk_size 1000, chunk_overlap 200 (characters)."""
    raise NotImplementedError


def chunker_settings_clean(name: str, settings: dict[str, Any] | None) -> dict[str, Any]:
    """The complete, validated settings of that chunker (what a Document records)."""
    raise NotImplementedError
