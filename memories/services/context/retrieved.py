"""The retrieved section's candidates: the user's older memories (and the project's
shared documents) by the project's default search, as many as fill the room the other
sections leave, and the similarity floor that keeps less relevant facts out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.db import connection

from memories.models import EmbeddingSpace, EndUser, Memory, Project
from memories.providers.tokens import token_count
from memories.services.context.sources import TURN_FIELDS, Candidate, turn_text
from memories.services.search import SearchFilters, SearchResult, memory_search, search_extend

# search results considered for the retrieved section: enough to fill the room the
# other sections leave with the user's memories as long as they have rendered lately
# (RESULT_TOKENS_GUESS before any), with a margin for the ones de-duplication drops;
# within the search's limit. Asking for more costs latency and changes nothing.
RESULT_TOKENS_GUESS = 10
RETRIEVED_MARGIN = 2.0
RETRIEVED_K_MIN, RETRIEVED_K_MAX = 20, 200
# the mean tokens of a user's retrieved lines, learned per process from each context
_result_tokens: dict[int, float] = {}
_RESULT_TOKENS_USERS = 10_000
RETRIEVED_KINDS: list[str] = [Memory.Kind.MESSAGE, Memory.Kind.SUMMARY, Memory.Kind.KNOWLEDGE]


@dataclass
class Retrieval:
    candidates: list[Candidate]
    mode: str
    timings_ms: dict[str, float]


def retrieved_k(*, end_user: EndUser, room: int, taken: int) -> int:
    """How many search results can fill ``room`` tokens once the ``taken`` items already
    in other sections are de-duplicated away, at the user's mean line length (a low
    guess until a context has shown it)."""
    return _results_filling(room, _result_tokens.get(end_user.pk, RESULT_TOKENS_GUESS), taken)


def _results_filling(room: int, per_result: float, taken: int) -> int:
    """Results of ``per_result`` tokens that fill ``room``, with the margin, beside the
    ``taken`` that de-duplication may drop; within RETRIEVED_K_MIN..RETRIEVED_K_MAX."""
    wanted = int(RETRIEVED_MARGIN * room / max(per_result, 1.0)) + taken
    return min(RETRIEVED_K_MAX, max(RETRIEVED_K_MIN, wanted))


def _tokens(lines: list[str], encoding: str) -> int:
    return sum(token_count(line + "\n", encoding) for line in lines)


def _result_tokens_learn(end_user: EndUser, candidates: list[Candidate], encoding: str) -> None:
    if not candidates:
        return
    mean = _tokens([c.text for c in candidates], encoding) / len(candidates)
    if len(_result_tokens) >= _RESULT_TOKENS_USERS:
        _result_tokens.clear()
    _result_tokens[end_user.pk] = mean


@dataclass(frozen=True)
class _Searching:
    """The searches of one context: the project's default search of ``query`` with its
    vector as computed once for the whole context (``embedding``, in ``space``), or
    keyword search alone without one (the model is unavailable)."""

    project: Project
    query: str
    embedding: list[float] | None
    space: EmbeddingSpace | None
    now: datetime | None = None

    def search(self, filters: SearchFilters, k: int) -> SearchResult:
        """The ``k`` best memories the filters allow, with the fields a line reads."""
        return memory_search(
            project=self.project,
            query=self.query,
            embedding=self.embedding,
            space=self.space,
            mode=None if self.embedding is not None else "keyword",
            filters=filters,
            k=k,
            fields=TURN_FIELDS,
            now=self.now,
        )


def retrieved_candidates(
    *,
    end_user: EndUser,
    query: str | None,
    query_vector: np.ndarray | None,
    space: EmbeddingSpace | None,
    room: int,
    taken: int,
    encoding: str,
    now: datetime | None = None,
    agent: str | None = None,
    world: str | None = None,
) -> Retrieval:
    """Older memories of the user (active or archived: a summarized turn is still the
    best evidence of itself) by the project's default search, as many as can fill
    ``room`` tokens beside ``taken`` items of other sections; keyword search alone
    when the model is unavailable; a time the query names is read against ``now``.
    ``agent`` and ``world`` (external ids, SearchFilters) narrow the user's memories;
    the project's shared documents belong to no agent or room and are not narrowed."""
    if not query or room <= 0:
        return Retrieval([], "none", {})
    embedding = [float(x) for x in query_vector] if query_vector is not None else None
    searching = _Searching(end_user.project, query, embedding, space, now)
    k = retrieved_k(end_user=end_user, room=room, taken=taken)
    filters = SearchFilters(
        end_user_id=end_user.pk,
        agent=agent,
        world=world,
        kinds=RETRIEVED_KINDS,
        statuses=[Memory.Status.ACTIVE, Memory.Status.ARCHIVED],
    )
    result = _user_search(searching, filters, k=k, room=room, taken=taken, encoding=encoding)
    candidates = _retrieved(result, "search")
    _result_tokens_learn(end_user, candidates, encoding)
    timings = dict(result.timings_ms)
    if _has_shared_knowledge(end_user):
        # the project's documents (no user's own) are searched apart, then the two
        # rankings interleaved by reciprocal rank: their scores are not on one scale
        knowledge = SearchFilters(shared=True, kinds=[Memory.Kind.KNOWLEDGE])
        shared = searching.search(knowledge, max(RETRIEVED_K_MIN, k // 2))
        candidates = _interleave(candidates, _retrieved(shared, "knowledge search", shared=True))
        timings["shared_knowledge"] = shared.timings_ms.get("total", 0.0)
    return Retrieval(candidates, result.mode, timings)


def _user_search(
    searching: _Searching, filters: SearchFilters, *, k: int, room: int, taken: int, encoding: str
) -> SearchResult:
    """The ``k`` best of the user's memories the filters allow; when their lines are
    shorter than guessed and the ranking holds more, read on in it until they fill
    ``room``."""
    result = searching.search(filters, k)
    lines = [turn_text(hit.memory) for hit in result.hits]
    if len(lines) == k < RETRIEVED_K_MAX and (used := _tokens(lines, encoding)) < room:
        # shorter than guessed and more to find: the next of the same ranking, as many
        # as fill the room at these lines' length. A second search for as many as
        # allowed took as long as the first (~35 ms at a user of 100,000), in ~5% of
        # contexts: most of their p95 (BENCHMARKS.md).
        wanted = _results_filling(room, used / len(lines), taken)
        result = search_extend(result, wanted, fields=TURN_FIELDS)
    return result


def _retrieved(result: SearchResult, source: str, *, shared: bool = False) -> list[Candidate]:
    """The hits as retrieved candidates; ``shared``: the project's documents'."""
    return [
        Candidate(
            section="retrieved",
            key=str(hit.memory.public_id),
            kind=hit.memory.kind,
            text=turn_text(hit.memory),
            score=hit.score,
            created_at=hit.memory.created_at,
            # turns under a line per day; a document's chunks cite their own source
            group=_day_line(hit.memory),
            why=f"{source} rank {rank} ({result.mode})",
            parts={"similarity": round(hit.similarity, 4)} if hit.similarity is not None else {},
            memory_pk=hit.memory.pk,
            shared=shared,
        )
        for rank, hit in enumerate(result.hits, start=1)
    ]


def _day_line(memory: Memory) -> str:
    """The header a retrieved line goes under: its day (none for a document's chunk)."""
    return "" if memory.kind == Memory.Kind.KNOWLEDGE else f"[{memory.created_at:%Y-%m-%d}]"


def _interleave(*rankings: list[Candidate]) -> list[Candidate]:
    """One ranking of several: each candidate scored 1 / (60 + its rank) (RRF's k)."""
    merged = []
    for ranking in rankings:
        for rank, candidate in enumerate(ranking, start=1):
            candidate.parts["search_score"] = round(candidate.score, 4)
            candidate.score = 1.0 / (60 + rank)
            merged.append(candidate)
    return sorted(merged, key=lambda c: -c.score)


def _has_shared_knowledge(end_user: EndUser) -> bool:
    """Whether the project holds active documents of no user: one probe of the index
    memory_user_kind (the ORM's exists() took 0.48 ms of every context, this 0.15)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM memories_memory WHERE project_id = %s"
            " AND end_user_id IS NULL AND kind = %s AND status = %s)",
            [end_user.project_id, Memory.Kind.KNOWLEDGE, Memory.Status.ACTIVE],
        )
        return bool(cursor.fetchone()[0])


def relevance_floor(retrieved: list[Candidate], budget: int, encoding: str) -> float | None:
    """The similarity to the query of the least similar of the user's own search results
    that would fit the retrieved section's own budget: a fact, or a chunk of the
    project's documents, less similar than that would take the place of a more relevant
    memory. None without similarities."""
    used, similarities = 0, []
    for candidate in (c for c in retrieved if not c.shared):
        used += token_count(candidate.text + "\n", encoding)
        if used > budget:
            break
        if "similarity" in candidate.parts:
            similarities.append(candidate.parts["similarity"])
    return min(similarities) if similarities else None
