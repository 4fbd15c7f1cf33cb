"""Loading: candidates are ids until ranked; only the adjustment needs more of every
candidate, and only the winners are loaded whole."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memories.models import Memory
from memories.services.search.ranking import Ranked

# rows deleted since the candidate queries leave a gap the spares fill
SPARE_WINNERS = 5


@dataclass
class SearchHit:
    memory: Memory
    score: float
    similarity: float | None
    explain: dict[str, Any]


def ranking_facts_get(memory_ids: list[Any]) -> dict[Any, tuple[datetime, float]]:
    """(created_at, importance score) of each memory still there, by id: the score is
    MUXI's importance (services/importance.py), which counts the explicit importance."""
    rows = Memory.objects.filter(pk__in=memory_ids).values_list(
        "pk", "created_at", "importance_score"
    )
    return {pk: (created_at, importance) for pk, created_at, importance in rows}


def winners_load(ranked: list[Ranked], k: int) -> list[SearchHit]:
    """The first ``k`` of ``ranked`` still there, loaded for output."""
    winners = ranked[: k + SPARE_WINNERS]
    memories = Memory.objects.with_external_ids().in_bulk([item.memory_id for item in winners])
    hits = [
        SearchHit(memories[item.memory_id], item.score, item.similarity, item.explain)
        for item in winners
        if item.memory_id in memories
    ]
    return hits[:k]
