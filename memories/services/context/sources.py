"""Where a context's items come from, one function per section, each returning its
candidates with the score that orders them (the fitting decides what fits)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from django.db import connection

from memories.config import BufferSettings
from memories.models import EmbeddingSpace, EndUser, Memory, Room
from memories.services.buffer import room_summary_latest
from memories.services.embedding import memory_vectors
from memories.services.search import SearchFilters, SearchResult, memory_search, search_extend
from memories.services.synopsis import synopsis_get
from memories.services.working import WorkingMemoryUnavailable, working_list, working_search
from memories.tokens import token_count

logger = logging.getLogger(__name__)

FACT_KINDS = (Memory.Kind.FACT, Memory.Kind.RELATIONSHIP, Memory.Kind.GOAL)
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
class Candidate:
    """One item a section may hold: ``key`` identifies it across sections (a memory's
    public id, what the response shows), ``text`` is its rendered line, ``score`` its
    priority in the section; ``memory_pk`` a retrieved memory's pk (its access is
    recorded)."""

    section: str
    key: str
    kind: str
    text: str
    score: float
    created_at: datetime | None = None
    why: str = ""
    tokens: int = 0
    # items of a section that share a group (a day) are rendered under one header line
    group: str = ""
    parts: dict[str, float] = field(default_factory=dict)
    memory_pk: Any = None

    @property
    def norm(self) -> str:
        """The text without its date and speaker prefix, for near-duplicate checks."""
        return " ".join(re.findall(r"[a-z0-9]+", _body(self.text).lower()))


def _body(line: str) -> str:
    return re.sub(r"^(- |(\[[^\]]*\] )?[^:]{0,80}: )", "", line)


def speaker(memory: Memory) -> str:
    """Who said it: a user by their name (or id), anyone else by name and role."""
    name = memory.metadata.get("name") or memory.metadata.get("speaker")
    if not isinstance(name, str) or not name.strip():
        name = getattr(memory, "user_external_id", None) if memory.role == "user" else None
    role = memory.role or memory.kind
    if name and role == Memory.Role.USER:
        return str(name)
    return f"{name} ({role})" if name else role


def turn_line(memory: Memory, *, with_time: bool = True) -> str:
    stamp = memory.created_at.strftime("%Y-%m-%d %H:%M" if with_time else "%Y-%m-%d")
    return f"[{stamp}] {turn_text(memory)}"


# the fields of a retrieved memory that turn_text (speaker, citation) and _retrieved read:
# the search loads only these
TURN_FIELDS = (
    "id", "public_id", "kind", "role", "content", "content_json", "metadata", "created_at",
)  # fmt: skip


def turn_text(memory: Memory) -> str:
    """A turn without its date: "speaker: text"; a knowledge chunk with its citation."""
    if memory.kind == Memory.Kind.KNOWLEDGE:
        return f"{citation(memory)}: {' '.join(memory.content.split())}"
    return f"{speaker(memory)}: {' '.join(memory.content.split())}"


def citation(memory: Memory) -> str:
    """Where a knowledge chunk comes from: "[Manual, p. 3-4, Setup > Wi-Fi]"."""
    cited = memory.content_json if isinstance(memory.content_json, dict) else {}
    document = cited.get("document")
    document = document if isinstance(document, dict) else {}
    parts = [str(document.get("title") or document.get("source") or "document")]
    page, page_end = cited.get("page"), cited.get("page_end")
    if page:
        parts.append(f"p. {page}" if not page_end or page_end == page else f"p. {page}-{page_end}")
    heading = cited.get("heading")
    if isinstance(heading, list) and heading:
        parts.append(" > ".join(str(h) for h in heading))
    return "[" + ", ".join(parts) + "]"


# ---- facts ------------------------------------------------------------------------------


def fact_rows(*, end_user: EndUser) -> list[Memory]:
    """The user's active facts, relationships and goals."""
    return list(
        Memory.objects.filter(
            project_id=end_user.project_id,
            end_user=end_user,
            kind__in=FACT_KINDS,
            status=Memory.Status.ACTIVE,
        ).only("id", "public_id", "kind", "content", "content_json", "confidence", "created_at")
    )


def fact_candidates(
    facts: list[Memory],
    *,
    query_vector: np.ndarray | None,
    space_id: int | None,
    similarity_weight: float,
    confidence_weight: float,
) -> list[Candidate]:
    """The user's ``facts`` (``fact_rows``) ranked by similarity_weight x similarity +
    confidence_weight x confidence (deer-flow); by confidence alone when there is no
    query vector."""
    vectors = (
        memory_vectors(memory_ids=[f.pk for f in facts], space_id=space_id)
        if query_vector is not None and space_id is not None and facts
        else {}
    )
    candidates = []
    for fact in facts:
        if query_vector is not None:
            vector = vectors.get(fact.pk)
            similarity = (
                max(0.0, float(np.dot(vector, query_vector))) if vector is not None else 0.0
            )
            score = similarity_weight * similarity + confidence_weight * fact.confidence
            parts = {"similarity": round(similarity, 4), "confidence": fact.confidence}
        else:
            score, parts = fact.confidence, {"confidence": fact.confidence}
        candidates.append(
            Candidate(
                section="facts", key=str(fact.public_id), kind=fact.kind, text=_fact_line(fact),
                score=score, created_at=fact.created_at, parts=parts,
            )
        )  # fmt: skip
    return candidates


def _fact_line(fact: Memory) -> str:
    text = " ".join(fact.content.split())
    if fact.kind == Memory.Kind.GOAL:
        status, due = fact.content_json.get("status", "open"), fact.content_json.get("due")
        text += f" (goal, {status}{f', due {due}' if due else ''})"
    return f"- {text}"


# ---- history ----------------------------------------------------------------------------


def history_candidates(
    *, end_user: EndUser, room: Room | None, buffer: BufferSettings
) -> list[Candidate]:
    """The room's buffer window (its last max_size active messages), the newest first in
    priority, then the room's newest summary. Without a room there is no conversation
    under way: no history, and its share of the budget flows to the retrieved memories."""
    if room is None:
        return []
    messages = (
        Memory.objects.with_external_ids()
        .defer("search_vector")
        .filter(project_id=room.project_id, room=room)
    )
    window = list(
        messages.filter(kind=Memory.Kind.MESSAGE, status=Memory.Status.ACTIVE).order_by(
            "-created_at", "-id"
        )[: buffer.max_size]
    )
    count = len(window)
    candidates = [
        Candidate(
            section="history", key=str(m.public_id), kind=m.kind, text=turn_line(m),
            score=1.0 - i / max(count, 1) * 0.5, created_at=m.created_at,
            why=f"turn {count - i} of the {count} most recent",
        )
        for i, m in enumerate(window)
    ]  # fmt: skip
    summary = room_summary_latest(room)
    if summary is not None:
        covered = summary.metadata.get("messages_covered", "the older")
        candidates.append(
            Candidate(
                section="history", key=str(summary.public_id), kind=summary.kind,
                text=f"Summary of {covered} earlier messages: {' '.join(summary.content.split())}",
                score=0.4, created_at=summary.created_at, why="the room's newest summary",
            )
        )  # fmt: skip
    return candidates


# ---- retrieved --------------------------------------------------------------------------


@dataclass
class Retrieval:
    candidates: list[Candidate]
    mode: str
    timings_ms: dict[str, float]


def retrieved_k(*, end_user: EndUser, room: int, taken: int) -> int:
    """How many search results can fill ``room`` tokens once the ``taken`` items already
    in other sections are de-duplicated away: room over the user's mean line length
    (a low guess until a context has shown it), with a margin."""
    per_result = _result_tokens.get(end_user.pk, RESULT_TOKENS_GUESS)
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


def retrieved_candidates(
    *,
    end_user: EndUser,
    query: str | None,
    query_vector: np.ndarray | None,
    space: EmbeddingSpace | None,
    room: int,
    taken: int,
    encoding: str,
) -> Retrieval:
    """Older memories of the user (active or archived: a summarized turn is still the
    best evidence of itself) by the project's default search, as many as can fill
    ``room`` tokens beside ``taken`` items of other sections; keyword search alone
    when the model is unavailable."""
    if not query or room <= 0:
        return Retrieval([], "none", {})
    filters = SearchFilters(
        end_user_id=end_user.pk,
        kinds=RETRIEVED_KINDS,
        statuses=[Memory.Status.ACTIVE, Memory.Status.ARCHIVED],
    )
    # the query's vector as computed once for the whole context; none: keyword search
    embedding = [float(x) for x in query_vector] if query_vector is not None else None
    mode = None if query_vector is not None else "keyword"
    k = retrieved_k(end_user=end_user, room=room, taken=taken)
    result = memory_search(
        project=end_user.project, query=query, embedding=embedding, space=space, mode=mode,
        filters=filters, k=k, fields=TURN_FIELDS,
    )  # fmt: skip
    lines = [turn_text(hit.memory) for hit in result.hits]
    if len(lines) == k < RETRIEVED_K_MAX and (used := _tokens(lines, encoding)) < room:
        # shorter than guessed and more to find: the next of the same ranking, as many
        # as fill the room at these lines' length (with the margin). A second search
        # for as many as allowed took as long as the first (~35 ms at a user of
        # 100,000), in ~5% of contexts: most of their p95 (BENCHMARKS.md).
        wanted = int(RETRIEVED_MARGIN * room * len(lines) / max(used, 1)) + 1
        result = search_extend(result, min(RETRIEVED_K_MAX, wanted), fields=TURN_FIELDS)
    candidates = _retrieved(result, "search")
    _result_tokens_learn(end_user, candidates, encoding)
    timings = dict(result.timings_ms)
    if _has_shared_knowledge(end_user):
        # the project's documents (no user's own) are searched apart, then the two
        # rankings interleaved by reciprocal rank: their scores are not on one scale
        shared = memory_search(
            project=end_user.project, query=query, embedding=embedding, space=space, mode=mode,
            filters=SearchFilters(shared=True, kinds=[Memory.Kind.KNOWLEDGE]),
            k=max(RETRIEVED_K_MIN, k // 2), fields=TURN_FIELDS,
        )  # fmt: skip
        candidates = _interleave(candidates, _retrieved(shared, "knowledge search"))
        timings["shared_knowledge"] = shared.timings_ms.get("total", 0.0)
    return Retrieval(candidates, result.mode, timings)


def _retrieved(result: SearchResult, source: str) -> list[Candidate]:
    return [
        Candidate(
            section="retrieved", key=str(hit.memory.public_id), kind=hit.memory.kind,
            text=turn_text(hit.memory), score=hit.score, created_at=hit.memory.created_at,
            # turns under a line per day; a document's chunks cite their own source
            group="" if hit.memory.kind == Memory.Kind.KNOWLEDGE
            else f"[{hit.memory.created_at:%Y-%m-%d}]",
            why=f"{source} rank {rank} ({result.mode})",
            parts={"similarity": round(hit.similarity, 4)} if hit.similarity is not None else {},
            memory_pk=hit.memory.pk,
        )
        for rank, hit in enumerate(result.hits, start=1)
    ]  # fmt: skip


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
    """The similarity to the query of the least similar search result that would fit
    the retrieved section's own budget: a fact less similar than that would take the
    place of a more relevant memory. None without similarities."""
    used, similarities = 0, []
    for candidate in retrieved:
        used += token_count(candidate.text + "\n", encoding)
        if used > budget:
            break
        if "similarity" in candidate.parts:
            similarities.append(candidate.parts["similarity"])
    return min(similarities) if similarities else None


# ---- working memory and synopsis --------------------------------------------------------

WORKING_LIMIT = 20


def working_candidates(
    *, room: Room | None, query: str | None
) -> tuple[list[Candidate], str | None]:
    """The room's working-memory notes, the most similar to the query first (newest
    first without one); none, with a note, when Redis is unreachable."""
    if room is None:
        return [], None
    try:
        if query:
            found = working_search(room=room, query=query, limit=WORKING_LIMIT)
            hits = [(hit.item, hit.score) for hit in found.hits]
        else:
            items = working_list(room=room).items[-WORKING_LIMIT:]
            hits = [(item, None) for item in reversed(items)]
    except WorkingMemoryUnavailable as error:
        return [], f"working memory unavailable: {error}"
    count = len(hits)
    return [
        Candidate(
            section="working", key=f"working:{item.id}", kind="working",
            text=f"- {' '.join(item.content.split())}",
            score=score if score is not None else 1.0 - i / max(count, 1),
            created_at=item.created_at,
            why="similar to the query" if score is not None else "recent note",
        )
        for i, (item, score) in enumerate(hits)
    ], None  # fmt: skip


def synopsis_candidates(*, end_user: EndUser) -> list[Candidate]:
    """The user's synopsis, both parts (what is cached; a stale part is served and its
    regeneration scheduled, as the project's refresh_on_access says)."""
    view = synopsis_get(end_user=end_user)
    candidates = []
    for name, score in (("identity", 2.0), ("context", 1.9)):
        part = getattr(view, name)
        if part is not None and part.text and part.text.strip():
            candidates.append(
                Candidate(
                    section="synopsis", key=f"synopsis:{name}", kind="synopsis",
                    text=" ".join(part.text.split()), score=score,
                    why=f"the synopsis' {name} part",
                )
            )  # fmt: skip
    return candidates
