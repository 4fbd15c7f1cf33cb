"""Plain BM25, the baseline the hub's keyword mode is read against in bench/evaluate.py:
rank-bm25's BM25Okapi with its default parameters (k1 1.5, b 0.75, epsilon 0.25) over
lowercase word tokens, no stemming, no stop words."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rank_bm25 import BM25Okapi


def bm25_tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


class PlainBm25:
    """An index over ``texts``; ``top`` answers with positions in that list."""

    def __init__(self, texts: Sequence[str]) -> None:
        # BM25Okapi divides by the corpus size
        self.index = BM25Okapi([bm25_tokens(text) for text in texts]) if texts else None

    def top(self, query: str, k: int) -> list[int]:
        """The k best-scoring texts, best first; only those scoring above zero (they share
        a word with the query), as a keyword search returns. A tie goes to the earlier."""
        if self.index is None:
            return []
        scores = self.index.get_scores(bm25_tokens(query))
        matching = [position for position, score in enumerate(scores) if score > 0]
        return sorted(matching, key=lambda position: (-scores[position], position))[:k]
