"""Loading: candidates are ids until ranked; only the adjustment needs more of every
candidate, and only the winners are loaded whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection

from memories.models import Memory
from memories.services.search.filters import id_array
from memories.services.search.ranking import Ranked, RankingFacts

# rows deleted since the candidate queries leave a gap the spares fill
SPARE_WINNERS = 5


@dataclass
class SearchHit:
    memory: Memory
    score: float
    similarity: float | None
    explain: dict[str, Any]


def ranking_facts_get(memory_ids: list[Any]) -> dict[Any, RankingFacts]:
    """What the ranking reads of each memory still there, by id, in one query: its
    creation time and importance score (MUXI's importance, services/importance.py,
    which counts the explicit importance) and its text's size in bytes (read from the
    stored value's header, no decompression). One array parameter, not an IN list of
    hundreds (a context's search ranks up to ~800 candidates)."""
    if not memory_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, created_at, importance_score, octet_length(content)"
            " FROM memories_memory WHERE id = ANY(%s::uuid[])",
            [id_array(memory_ids)],
        )
        return {memory_id: RankingFacts(*facts) for memory_id, *facts in cursor.fetchall()}


def winners_load(
    ranked: list[Ranked], k: int, fields: tuple[str, ...] | None = None
) -> list[SearchHit]:
    """The first ``k`` of ``ranked`` still there, loaded for output: with only ``fields``
    (and the external ids) when given. A memory's every field is ~1.4 of the 3.6 ms
    that loading a context's ~80 winners took (four dates and three JSON values a
    row, parsed in Python)."""
    winners = ranked[: k + SPARE_WINNERS]
    loaded = Memory.objects.with_external_ids()
    if fields is not None:
        loaded = loaded.only(*fields)
    memories = loaded.in_bulk([item.memory_id for item in winners])
    hits = [
        SearchHit(memories[item.memory_id], item.score, item.similarity, item.explain)
        for item in winners
        if item.memory_id in memories
    ]
    return hits[:k]
