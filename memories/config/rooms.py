"""The sections of a room's short-term memory (MUXI): the conversation buffer
(``buffer``) and the working memory (``working``), the two a room may override."""

from __future__ import annotations

from dataclasses import dataclass

from memories.config.fields import setting


@dataclass(frozen=True)
class BufferSettings:
    """A room's conversation buffer (MUXI's buffer memory): the window of recent messages,
    the capacity kept unsummarized, and how the oldest are condensed into summaries."""

    max_size: int = setting(
        10,
        "The window: how many recent messages GET .../buffer/ returns.",
        minimum=1,
        maximum=1000,
    )
    buffer_multiplier: int = setting(
        10,
        "Capacity = max_size x buffer_multiplier unsummarized messages; beyond it the "
        "oldest are summarized and archived.",
        minimum=1,
        maximum=100,
    )
    recency_bias: float = setting(
        0.3,
        "Buffer search default: score = (1 - recency_bias) x semantic + recency_bias x recency.",
        minimum=0.0,
        maximum=1.0,
    )
    summarize: bool = setting(
        True, "Summarize and archive the oldest messages once a room is over capacity."
    )
    summary_batch_size: int = setting(
        0,
        "Messages condensed into one summary (0: max_size).",
        minimum=0,
        maximum=1000,
    )
    summary_max_tokens: int = setting(
        400,
        "Length limit of a summary in cl100k_base tokens (the chain folds the previous "
        "summary in, so this bounds the whole account of the room's older turns).",
        minimum=50,
        maximum=8000,
    )

    @property
    def capacity(self) -> int:
        return self.max_size * self.buffer_multiplier

    @property
    def batch_size(self) -> int:
        return self.summary_batch_size or self.max_size


@dataclass(frozen=True)
class WorkingSettings:
    """A room's working memory (MUXI): short-lived notes in Redis, never in PostgreSQL."""

    ttl_seconds: int = setting(
        3600,
        "How long an item lives unless its write names another TTL.",
        minimum=1,
        maximum=30 * 86400,
    )
    max_memory_mb: float = setting(
        10.0,
        "Size cap of a room's working memory; the oldest items go first (FIFO).",
        minimum=0.01,
        maximum=1024.0,
    )
