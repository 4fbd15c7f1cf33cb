"""Loading: candidates are ids until ranked; only the adjustment needs more of every
candidate, and only the winners are loaded whole."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.db import connection

from memories.models import Agent, EndUser, Memory, Room
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
    loaded = Memory.objects.raw(_winners_sql(fields), [id_array([w.memory_id for w in winners])])
    memories = {memory.pk: memory for memory in loaded}
    hits = [
        SearchHit(memories[item.memory_id], item.score, item.similarity, item.explain)
        for item in winners
        if item.memory_id in memories
    ]
    return hits[:k]


@functools.cache
def _winners_sql(fields: tuple[str, ...] | None) -> str:
    """The winners' statement: ``fields`` (None: all but the generated full-text
    document, which no output shows and which is longer than a long text) and the
    external ids Memory.objects.with_external_ids() annotates. Written once per set of
    fields: composing it through the ORM was ~0.3 of the ~1.4 ms of a search's load
    (BENCHMARKS.md); the fields not read are deferred, as with ``only``."""
    meta = Memory._meta
    if fields is None:
        columns = [f.column for f in meta.concrete_fields if f.name != "search_vector"]
    else:
        named = {f.name: f.column for f in meta.concrete_fields}
        columns = [meta.pk.column, *(named[name] for name in fields)]
    selected = ", ".join(f"m.{column}" for column in dict.fromkeys(columns))
    return f"""
        SELECT {selected}, u.external_id AS user_external_id,
               r.external_id AS room_external_id, a.external_id AS agent_external_id
        FROM {meta.db_table} m
        LEFT JOIN {EndUser._meta.db_table} u ON u.id = m.end_user_id
        LEFT JOIN {Room._meta.db_table} r ON r.id = m.room_id
        LEFT JOIN {Agent._meta.db_table} a ON a.id = m.agent_id
        WHERE m.id = ANY(%s::uuid[])
    """
