"""The time path: a query that names a time ("in July 2023", "last year") ranks the
memories of that time beside the whole ranking, and the two are fused.

The memories of the named range are ranked by the same mode (their own candidates,
their own normalization: the best July turn scores high among July's turns even where
the year's other turns outrank it), and each memory's final score is

    (1 - time_weight) x its score in the whole ranking
    + time_weight x its score among the range's memories (0 outside the range),

each score over its ranking's best. At the default weight (0.5) the best memory of the
named time comes first, the others of that time are raised by how well they match, and
nothing the whole ranking found is dropped; a range that holds every memory ("in 2023"
of a conversation of 2023) changes nothing. ``explain`` shows the range, the phrase
that named it and both scores. A caller's own start or end filter is a range already:
the path stays out of its way.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from memories.services.search.filters import SearchFilters
from memories.services.search.ranking import Ranked, SearchMode
from memories.services.search.time_range import TimeRange, query_time_range


def time_range_wanted(
    *, query: str | None, mode: str, filters: SearchFilters, weight: float, now: datetime | None
) -> TimeRange | None:
    """The range the query names when the time path applies: a fused mode (auto,
    hybrid), a query text, a weight above 0, no start or end filter of the caller's,
    and a range closed on both sides ("before May 2023" holds most of a long
    conversation: raising all of it says little, and "by July 5" is a deadline the
    conversation talks about more often than when it was said)."""
    if not query or mode not in SearchMode.FUSED or weight <= 0:
        return None
    if filters.start is not None or filters.end is not None:
        return None
    window = query_time_range(query, now)
    if window is None or window.start is None or window.end is None:
        return None
    return window


def range_filters(filters: SearchFilters, window: TimeRange) -> SearchFilters:
    """``filters`` narrowed to the range."""
    return replace(filters, start=window.start, end=window.end)


def time_fused(
    ranked: list[Ranked],
    in_range: list[Ranked],
    *,
    window: TimeRange,
    weight: float,
    explain: bool,
) -> list[Ranked]:
    """``ranked`` (the whole ranking) and ``in_range`` (the range's) as one ranking,
    best first (see the module)."""
    by_id: dict[Any, Ranked] = {item.memory_id: item for item in ranked}
    whole, range_scores = _scaled(ranked), _scaled(in_range)
    for item in in_range:
        by_id.setdefault(item.memory_id, item)
    fused = []
    for memory_id, item in by_id.items():
        main, within = whole.get(memory_id, 0.0), range_scores.get(memory_id, 0.0)
        score = (1.0 - weight) * main + weight * within
        details = item.explain
        if explain:
            details = {
                **item.explain,
                "time_range": window.explain(),
                "time": {"whole_ranking": round(main, 4), "within_range": round(within, 4)},
            }
        fused.append(replace(item, score=score, explain=details))
    fused.sort(key=lambda item: (-item.score, item.memory_id))
    return fused


def _scaled(ranking: list[Ranked]) -> dict[Any, float]:
    """Each memory's score over the ranking's best: the first of each ranking is 1.0
    (a mode's scores need not reach 1: auto's best without a keyword match is 0.5)."""
    best = max((item.score for item in ranking), default=0.0)
    return {item.memory_id: item.score / best if best > 0 else 0.0 for item in ranking}
