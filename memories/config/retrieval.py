"""The sections of what agents read back: how search ranks memories (``search``) and
how a context is fitted to a prompt's budget (``context``)."""

from __future__ import annotations

from dataclasses import dataclass

from memories.config.fields import SettingsError, setting

SEARCH_MODES = ("auto", "vector", "keyword", "hybrid")
WINDOW_AGGREGATES = ("mean", "max")


@dataclass(frozen=True)
class SearchSettings:
    """How search ranks memories (POST /api/v1/search/ and everything built on it)."""

    default_mode: str = setting("auto", "Mode of a search that names none.", choices=SEARCH_MODES)
    keyword_weight: float = setting(
        0.5,
        "auto mode: weight of the normalized BM25 score against the cosine score.",
        minimum=0.0,
        maximum=1.0,
    )
    neighbour_weight: float = setting(
        0.3,
        "auto mode: how much a conversation turn is raised by the turns before and after it.",
        minimum=0.0,
        maximum=1.0,
    )
    neighbour_max_bytes: int = setting(
        1000,
        "auto mode: only turns of at most this many bytes of text (characters, for "
        "ASCII) are raised by their neighbours (a longer turn is found by its own "
        "text); 0 raises every turn.",
        minimum=0,
        maximum=1_000_000,
    )
    rrf_k: int = setting(
        60, "hybrid mode: the k of reciprocal rank fusion, 1/(k + rank).", minimum=1, maximum=1000
    )
    time_weight: float = setting(
        0.5,
        'auto and hybrid modes: when the query names a time ("in May 2023", "last '
        'year"), the share of the final score given to the ranking of the memories of '
        "that time; 0 turns the time path off.",
        minimum=0.0,
        maximum=1.0,
    )
    recency_weight: float = setting(
        0.0, "Share of the final score given to recency (every mode).", minimum=0.0, maximum=1.0
    )
    recency_half_life_days: float = setting(
        30.0, "Age in days at which the recency score halves.", minimum=0.01, maximum=36500.0
    )
    importance_weight: float = setting(
        0.0,
        "Share of the final score given to a memory's importance (every mode).",
        minimum=0.0,
        maximum=1.0,
    )
    window_aggregate: str = setting(
        "mean",
        "A memory embedded as several windows (longer than the model reads at once) is "
        "scored by the mean of its windows' cosine similarities (the whole memory) or by "
        "the max (its best passage).",
        choices=WINDOW_AGGREGATES,
    )
    bm25_k1: float = setting(
        0.9, "Keyword ranking: BM25 term-frequency saturation.", minimum=0.0, maximum=10.0
    )
    bm25_b: float = setting(
        0.75,
        "Keyword ranking: BM25 length normalization (0 none, 1 full).",
        minimum=0.0,
        maximum=1.0,
    )

    def __post_init__(self) -> None:
        if self.recency_weight + self.importance_weight > 1.0:
            raise SettingsError(
                {
                    "search.importance_weight": [
                        "recency_weight + importance_weight must be at most 1."
                    ]
                }
            )


@dataclass(frozen=True)
class ContextSettings:
    """POST /api/v1/context/: what an agent puts in its prompt, fitted to a budget."""

    max_tokens: int = setting(
        4000, "Budget of a context that names none.", minimum=100, maximum=200_000
    )
    history_share: float = setting(
        0.5,
        "Share of the budget for the room's recent turns and summaries.",
        minimum=0.0,
        maximum=1.0,
    )
    retrieved_share: float = setting(
        0.3,
        "Share of the budget for older memories and knowledge found by search.",
        minimum=0.0,
        maximum=1.0,
    )
    similarity_weight: float = setting(
        0.6, "Facts: weight of the similarity to the query.", minimum=0.0, maximum=1.0
    )
    confidence_weight: float = setting(
        0.4, "Facts: weight of the fact's confidence.", minimum=0.0, maximum=1.0
    )
    encoding: str = setting(
        "cl100k_base", "Token counting of a context that names none.", choices=("cl100k_base",)
    )

    def __post_init__(self) -> None:
        if self.history_share + self.retrieved_share > 1.0:
            raise SettingsError(
                {"context.retrieved_share": ["history_share + retrieved_share must be at most 1."]}
            )
