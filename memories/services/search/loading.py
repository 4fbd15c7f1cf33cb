"""Loading: candidates are ids until ranked; only the adjustment needs more of every
candidate, and only the winners are loaded whole."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection

from memories.models import Agent, EndUser, Memory, Project, Room
from memories.services.search.filters import SearchFilters, id_array
from memories.services.search.prepared import prepared_cursor
from memories.services.search.ranking import Ranked, RankingFacts

# the winners' external ids, as Memory.objects.with_external_ids() annotates them
EXTERNAL_IDS = ("user_external_id", "room_external_id", "agent_external_id")
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
    with prepared_cursor() as cursor:
        cursor.execute(
            "SELECT id, created_at, importance_score, octet_length(content)"
            " FROM memories_memory WHERE id = ANY(%s::uuid[])",
            [id_array(memory_ids)],
        )
        return {memory_id: RankingFacts(*facts) for memory_id, *facts in cursor.fetchall()}


def winners_load(
    ranked: list[Ranked],
    k: int,
    fields: tuple[str, ...] | None = None,
    within: SourcesWithin | None = None,
) -> list[SearchHit]:
    """The first ``k`` of ``ranked`` still there, loaded for output: with only ``fields``
    (and the external ids) when given. A memory's every field is ~1.4 of the 3.6 ms
    that loading a context's ~80 winners took (four dates and three JSON values a
    row, parsed in Python). A derived winner none of whose sources won brings one of
    them (_sources_brought), placed above it; the last winner makes room."""
    hits = _hits_load(ranked[: k + SPARE_WINNERS], fields)[:k]
    brought = _hits_load(_sources_brought(hits, ranked, within), fields)
    return sources_first(hits + brought)[:k]


@dataclass(frozen=True)
class SourcesWithin:
    """The memories a search may return (its project and filters): where a derived
    winner's source that was no candidate may be brought from."""

    project: Project
    filters: SearchFilters


def _hits_load(items: list[Ranked], fields: tuple[str, ...] | None) -> list[SearchHit]:
    """``items`` still there, loaded, in their order."""
    if not items:
        return []
    statement = _winners_statement(fields)
    with prepared_cursor() as cursor:
        cursor.execute(statement.sql, [id_array([item.memory_id for item in items])])
        memories = {memory.pk: memory for memory in map(statement.memory, cursor.fetchall())}
    return [
        SearchHit(memories[item.memory_id], item.score, item.similarity, item.explain)
        for item in items
        if item.memory_id in memories
    ]


def _sources_brought(
    hits: list[SearchHit], ranked: list[Ranked], within: SourcesWithin | None
) -> list[Ranked]:
    """For each derived hit none of whose sources is among ``hits``: its best-ranked
    source among the other candidates, else (given ``within``) its newest source the
    search allows, with the derived hit's score. One query, only when there is such a
    hit. A fact brings its source turn: of twenty turns saying "My sister Ana lives in
    Lisbon", the fact's own may rank sixth or not be a candidate at all, while the fact
    ("User's sister is Ana.") wins without the city asked for."""
    found = {hit.memory.public_id for hit in hits}
    wanting = [
        (hit, sources)
        for hit in hits
        if (sources := _source_uuids(hit.memory)) and found.isdisjoint(sources)
    ]
    if not wanting:
        return []
    loaded = {hit.memory.pk for hit in hits}
    at = {item.memory_id: at for at, item in enumerate(ranked) if item.memory_id not in loaded}
    rows = _sources_find(set().union(*(sources for _, sources in wanting)), list(at), within)
    brought: dict[Any, Ranked] = {}
    for hit, sources in wanting:
        mine = [(row_id, created) for row_id, public_id, created in rows if public_id in sources]
        if not mine:
            continue
        # best ranked first, then the newest
        best, _ = min(mine, key=lambda row: (at.get(row[0], len(ranked)), -row[1].timestamp()))
        derived = str(hit.memory.public_id)
        item = ranked[at[best]] if best in at else Ranked(hit.score, best, None, {})
        if hit.explain:
            item.explain["brought_by"] = derived
        brought.setdefault(best, item)
    return list(brought.values())


def _sources_find(
    sources: set[uuid.UUID], candidates: list[Any], within: SourcesWithin | None
) -> list[tuple[Any, uuid.UUID, Any]]:
    """(id, public id, created at) of the memories with those public ids: among the
    ``candidates`` (ids), or any the search allows (``within``)."""
    if within is None:
        where, params = "m.id = ANY(%(candidates)s::uuid[])", {"candidates": id_array(candidates)}
    else:
        where, params = within.filters.sql(within.project)
    with prepared_cursor() as cursor:
        cursor.execute(
            "SELECT m.id, m.public_id, m.created_at FROM memories_memory m"
            f" WHERE {where} AND m.public_id = ANY(%(sources)s::uuid[])",
            {**params, "sources": id_array(sources)},
        )
        return cursor.fetchall()


def _source_uuids(memory: Memory) -> set[uuid.UUID]:
    """The ids ``memory`` derives from (none when its source_ids were not loaded: a
    search that asked for fewer fields; an id that is not one is skipped)."""
    if "source_ids" in memory.get_deferred_fields() or not memory.source_ids:
        return set()
    return {source for source in map(_uuid_or_none, memory.source_ids) if source is not None}


def _uuid_or_none(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def sources_first(hits: list[SearchHit]) -> list[SearchHit]:
    """The hits with each derived memory (a fact, a summary: its ``source_ids``) placed
    after those of its sources found with it. A source holds what was derived from it
    and the detail around it: the turn "My sister Ana lives in Lisbon and works as an
    architect" answers "which city is the user's sister in?", its fact "User's sister is
    Ana." does not, though its few words are nearer the question's. Scores are left as
    ranked; with explain, a source moved up says above which memory."""
    position = {hit.memory.public_id: index for index, hit in enumerate(hits)}
    ordered: list[SearchHit] = []
    placed: set[int] = set()
    for index, hit in enumerate(hits):
        if index in placed:
            continue
        for source in sorted(_later_sources(hit, index, position) - placed):
            if hits[source].explain:
                hits[source].explain["placed_above"] = str(hit.memory.public_id)
            ordered.append(hits[source])
            placed.add(source)
        ordered.append(hit)
        placed.add(index)
    return ordered


def _later_sources(hit: SearchHit, index: int, position: dict[uuid.UUID, int]) -> set[int]:
    """The positions after ``index`` of the hits ``hit`` derives from."""
    found = (position.get(source) for source in _source_uuids(hit.memory))
    return {at for at in found if at is not None and at > index}


@dataclass(frozen=True)
class WinnersStatement:
    """The winners' statement, and how a row of it becomes a Memory."""

    sql: str
    names: list[str]  # the fields read, in the model's order, then the three external ids
    converters: list[tuple[int, Callable[..., Any]]]  # (column, from_db_value) for JSON

    def memory(self, row: tuple[Any, ...]) -> Memory:
        values = list(row)
        for column, convert in self.converters:
            values[column] = convert(values[column], None, connection)
        count = len(self.names)
        memory = Memory.from_db(DEFAULT_DB_ALIAS, self.names, values[:count])
        for name, value in zip(EXTERNAL_IDS, values[count:], strict=True):
            setattr(memory, name, value)
        return memory


@functools.cache
def _winners_statement(fields: tuple[str, ...] | None) -> WinnersStatement:
    """``fields`` (None: all but the generated full-text document, which no output shows
    and which is longer than a long text) and the external ids
    Memory.objects.with_external_ids() annotates. Written once per set of fields:
    composing it through the ORM was ~0.3 of the ~1.4 ms of a search's load
    (BENCHMARKS.md); the fields not read are deferred, as with ``only``."""
    meta = Memory._meta
    wanted = None if fields is None else {meta.pk.name, *fields}
    read = [
        field
        for field in meta.concrete_fields
        if (field.name in wanted if wanted is not None else field.name != "search_vector")
    ]
    selected = ", ".join(f"m.{field.column}" for field in read)
    sql = f"""
        SELECT {selected}, u.external_id AS user_external_id,
               r.external_id AS room_external_id, a.external_id AS agent_external_id
        FROM {meta.db_table} m
        LEFT JOIN {EndUser._meta.db_table} u ON u.id = m.end_user_id
        LEFT JOIN {Room._meta.db_table} r ON r.id = m.room_id
        LEFT JOIN {Agent._meta.db_table} a ON a.id = m.agent_id
        WHERE m.id = ANY(%s::uuid[])
    """
    converters = [
        (column, convert)
        for column, field in enumerate(read)
        for convert in field.get_db_converters(connection)
    ]
    return WinnersStatement(sql, [field.attname for field in read], converters)
