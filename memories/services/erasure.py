"""Erasure: a deleted memory's words leave every table, and the audit keeps the proof.

Every path that deletes memories (one memory, a bulk delete, a user, a room, a
document's chunks, the pruning purge, the admin's bulk action) calls
``memories_erase`` in its transaction, with the rows locked. Beyond the rows and
their vectors it erases:

* **the revisions**: each ``before``/``after`` of the memory's history keeps its
  kind, role, status, user and room ids and the SHA-256 of its text (a holder of the
  text can prove what was erased), never the text, the structured content nor the
  metadata; the ``delete`` revision itself is written so, its ``after`` says why;
* **what was derived from it**: a fact (relationship, goal) all of whose sources are
  erased is erased with them; one confirmed by another message that stays keeps its
  words (the message that remains says them too; the user asked to forget this
  message, not what she also said elsewhere) and loses the erased id from its
  sources. A summary covering an erased turn is erased with every later summary of
  its room's chain (each folds the one before in); the turns they covered return to
  the room's buffer and the summary before them becomes the chain's head again, so
  the room is summarized anew without the erased turn (by the summary sweep);
* **copies**: synopsis parts built from any of them are cleared (regenerated on
  demand or by the beat) and the user's synopsis revisions redacted; replayable
  responses (Idempotency-Key) that name one; parked tasks on one; the admin's log
  entries that show its first 60 characters; a cleared synopsis replaces the cached
  one in Redis at commit (a newer version: a reader that read the old row cannot put
  it back).

Deleted rows may stay in PostgreSQL's files until VACUUM reuses their space; that is
the database's, not the application's, and the README says so.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from memories.models import (
    IdempotencyKey,
    Memory,
    MemoryRevision,
    ParkedTask,
)
from memories.services.erasure_synopsis import synopses_clear
from memories.services.revisions import Actor, revision_build

logger = logging.getLogger(__name__)

DERIVED_FROM_SOURCES = (Memory.Kind.FACT, Memory.Kind.RELATIONSHIP, Memory.Kind.GOAL)
EXPANSION_ROUNDS = 8  # what derives from what is at most a few steps deep
ERASED_TEXT = "[erased]"

_REVISIONS = MemoryRevision._meta.db_table
_MEMORIES = Memory._meta.db_table
_KEYS = IdempotencyKey._meta.db_table


def _sha256_sql(text: str) -> str:
    return f"encode(sha256(convert_to({text}, 'UTF8')), 'hex')"


def _words_sha256_sql(text: str) -> str:
    """The SHA-256 of the text's words as synopsis's fact_consolidation.normalized writes
    them (lower case, runs of a-z and 0-9 joined by one space): a fact an operator
    retracted is still known as retracted once its words are gone. The pattern, one
    negated class, runs in linear time."""
    words = f"btrim(regexp_replace(lower({text}), '[^a-z0-9]+', ' ', 'g'))"
    return _sha256_sql(words)


def redacted_sql(column: str) -> str:
    """A SQL expression: the snapshot in ``column`` (jsonb) without its words."""
    kept = ", ".join(
        f"'{name}', {column} -> '{name}'"
        for name in ("kind", "role", "status", "end_user_id", "room_id", "pinned")
    )
    content = f"coalesce({column} ->> 'content', '')"
    return (
        f"CASE WHEN {column} IS NULL OR {column} ? 'redacted' THEN {column} ELSE "
        f"jsonb_strip_nulls(jsonb_build_object('redacted', true, {kept}, "
        f"'content_sha256', {_sha256_sql(content)}, "
        f"'words_sha256', {_words_sha256_sql(content)})) END"
    )


# each erased memory's `delete` revision, built from its row in one statement
_DELETE_REVISIONS_SQL = f"""
    INSERT INTO {_REVISIONS}
        (project_id, memory_id, memory_public_id, action, actor_type, actor, before,
         after, created_at)
    SELECT project_id, id, public_id, 'delete', %s, %s,
        jsonb_build_object('redacted', true, 'kind', kind, 'role', role, 'status', status,
            'end_user_id', end_user_id, 'room_id', room_id, 'pinned', pinned,
            'content_sha256', {_sha256_sql("content")},
            'words_sha256', {_words_sha256_sql("content")}),
        CASE WHEN id = ANY(%s::uuid[])
            THEN jsonb_build_object('erased', %s::text, 'derived', true)
            ELSE jsonb_build_object('erased', %s::text) END, %s
    FROM {_MEMORIES} WHERE id = ANY(%s::uuid[])
"""

# a fact that stays loses the evidence sentence from its history too (see _around)
_EVIDENCE_REDACT_SQL = f"""
    UPDATE {_REVISIONS}
    SET before = before #- '{{metadata,evidence}}', after = after #- '{{metadata,evidence}}'
    WHERE project_id = %s AND memory_public_id = ANY(%s::uuid[])
"""

_REDACT_SQL = f"""
    UPDATE {_REVISIONS} SET before = {redacted_sql("before")}, after = {redacted_sql("after")}
    WHERE project_id = %s AND memory_public_id = ANY(%s::uuid[])
      AND NOT (coalesce(before ? 'redacted', true) AND coalesce(after ? 'redacted', true))
"""


@dataclass
class ErasureReceipt:
    """What an erasure removed, per table (or per kind of derived row)."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, other: ErasureReceipt) -> ErasureReceipt:
        self.counts.update(other.counts)
        return self

    def as_dict(self) -> dict[str, int]:
        return {name: count for name, count in sorted(self.counts.items()) if count}


@dataclass
class _Plan:
    """The memories to erase (pks, public ids as strings) and what changes around them."""

    pks: set[uuid.UUID] = field(default_factory=set)
    public: set[str] = field(default_factory=set)
    derived: Counter[str] = field(default_factory=Counter)
    unlinked: list[Memory] = field(default_factory=list)
    users: set[int] = field(default_factory=set)
    rooms_cut: set[int] = field(default_factory=set)
    scope: Q | None = None

    def nearby(self, project_id: int) -> Any:
        """The project's memories this erasure may still erase, restore or unlink."""
        rows = Memory.objects.filter(project_id=project_id).exclude(pk__in=self.pks)
        return rows if self.scope is None else rows.exclude(self.scope)


def memories_erase(
    *,
    project_id: int,
    ids: Iterable[uuid.UUID],
    actor: Actor,
    reason: str,
    with_derived: bool = True,
    scope: Q | None = None,
) -> ErasureReceipt:
    """Erase these memories (locked by the caller, in its transaction) and everything
    the module says; ``reason`` (e.g. "user delete") goes into each delete revision.
    Returns the receipt: ``counts["memories"]`` every memory erased, of which those
    erased because they derived from the asked ones alone by kind ("facts",
    "summaries"). ``with_derived`` False keeps what derives from them (the pruning
    purge: a policy forgets the turns, and their summaries and facts are the condensed
    memory meant to outlive them; they are pruned by their own policies). ``scope``: the
    memories the caller erases in later calls of the same transaction (a user's, a
    room's): left to those calls, never restored or unlinked here."""
    asked = list(ids)
    if not asked:
        return ErasureReceipt()
    plan = _plan(project_id, asked, EXPANSION_ROUNDS if with_derived else 1, scope)
    receipt = ErasureReceipt(Counter(plan.derived))
    pks, public = list(plan.pks), list(plan.public)
    with connection.cursor() as cursor:
        cursor.execute(_REDACT_SQL, [project_id, public])
        receipt.counts["revisions_redacted"] += cursor.rowcount
        derived = list(plan.pks - set(asked))
        cursor.execute(
            _DELETE_REVISIONS_SQL,
            [actor.type, actor.name, derived, reason, reason, timezone.now(), pks],
        )
    receipt.add(_around(project_id, plan, actor))
    with connection.cursor() as cursor:  # after _around: its revisions lose it too
        unlinked = [str(fact.public_id) for fact in plan.unlinked]
        cursor.execute(_EVIDENCE_REDACT_SQL, [project_id, unlinked])
    receipt.add(_copies_erase(project_id, plan))
    _, per_model = Memory.objects.filter(pk__in=pks).delete()
    receipt.counts["memories"] += per_model.get(Memory._meta.label, 0)
    receipt.counts["embeddings"] += sum(
        count for label, count in per_model.items() if label != Memory._meta.label
    )
    return receipt


def _plan(project_id: int, asked: list[uuid.UUID], rounds: int, scope: Q | None) -> _Plan:
    """The asked memories and, round by round, what derives from them (see module)."""
    plan = _Plan(scope=scope)
    frontier = asked
    for round_ in range(rounds):
        rows = list(
            Memory.objects.filter(pk__in=frontier)
            .exclude(pk__in=plan.pks)
            .values("pk", "public_id", "end_user_id", "room_id")
        )
        if not rows:
            break
        plan.pks.update(row["pk"] for row in rows)
        plan.public.update(str(row["public_id"]) for row in rows)
        plan.users.update(row["end_user_id"] for row in rows if row["end_user_id"] is not None)
        frontier = _derived(project_id, plan, rows) if round_ + 1 < rounds else []
    return plan


def _derived(project_id: int, plan: _Plan, rows: list[Any]) -> list[uuid.UUID]:
    """The memories the next round erases: facts left without a source, summaries
    covering an erased turn and their room's later ones; each locked."""
    users = {row["end_user_id"] for row in rows if row["end_user_id"] is not None}
    rooms = {row["room_id"] for row in rows if row["room_id"] is not None}
    nearby = plan.nearby(project_id)
    touching = (
        nearby.filter(kind__in=[*DERIVED_FROM_SOURCES, Memory.Kind.SUMMARY])
        .filter(source_ids__has_any_keys=[str(row["public_id"]) for row in rows])
        .filter(_owned(users, rooms))
        .order_by("pk")
        .select_for_update(of=("self",))
    )
    more: dict[uuid.UUID, None] = {}
    for memory in touching:
        if memory.pk in more:
            continue  # a later summary of a chain already taken
        if memory.kind == Memory.Kind.SUMMARY:
            more |= dict.fromkeys(_chain_from(nearby, memory, plan, more))
        elif memory.kind in DERIVED_FROM_SOURCES:
            if set(memory.source_ids) <= plan.public:
                plan.derived["facts"] += 1
                more[memory.pk] = None
            else:
                plan.unlinked.append(memory)
    return list(more)


def _owned(users: set[int], rooms: set[int]) -> Q:
    return Q(end_user_id__in=users) | Q(room_id__in=rooms)


def _chain_from(
    nearby: Any, summary: Memory, plan: _Plan, taken: dict[uuid.UUID, None]
) -> list[uuid.UUID]:
    """This summary and its room's later ones (erased; a summary of no room, only
    itself), the messages they covered that stay (back to the buffer) and the summary
    before them (the head again)."""
    if summary.room_id is None:
        chain = [summary]
    else:
        chain = list(
            nearby.filter(
                room_id=summary.room_id,
                kind=Memory.Kind.SUMMARY,
                created_at__gte=summary.created_at,
            )
            .order_by("pk")
            .select_for_update(of=("self",))
        )
        plan.rooms_cut.add(summary.room_id)
    fresh = [memory.pk for memory in chain if memory.pk not in taken]
    plan.derived["summaries"] += len(fresh)
    return fresh


def _around(project_id: int, plan: _Plan, actor: Actor) -> ErasureReceipt:
    """The facts that keep their words lose the erased sources; a cut summary chain
    gives its turns back to the buffer and its earlier summary back to the head."""
    receipt = ErasureReceipt()
    revisions: list[MemoryRevision] = []
    for fact in plan.unlinked:
        if fact.pk in plan.pks:
            continue
        before = fact.snapshot()
        fact.source_ids = [s for s in fact.source_ids if s not in plan.public]
        # the sentence it was mined from may be the erased message's: it goes
        fact.metadata = {k: v for k, v in fact.metadata.items() if k != "evidence"}
        if fact.metadata.get("extracted_from") in plan.public:
            fact.metadata["extracted_from"] = fact.source_ids[0]
        fact.save(update_fields=["source_ids", "metadata", "updated_at"])
        revisions.append(_revision(fact, actor, before))
        receipt.counts["facts_unlinked"] += 1
    for room_id in plan.rooms_cut:
        revisions += _chain_mend(project_id, room_id, plan, actor, receipt)
    MemoryRevision.objects.bulk_create(revisions)
    return receipt


def _revision(memory: Memory, actor: Actor, before: dict[str, Any]) -> MemoryRevision:
    return revision_build(
        memory=memory, action="update", actor=actor, before=before, after=memory.snapshot()
    )


def _chain_mend(
    project_id: int, room_id: int, plan: _Plan, actor: Actor, receipt: ErasureReceipt
) -> list[MemoryRevision]:
    erased = Memory.objects.filter(
        pk__in=plan.pks, room_id=room_id, kind=Memory.Kind.SUMMARY
    ).values_list("source_ids", "created_at")
    covered = {source for sources, _ in erased for source in sources} - plan.public
    first = min(created for _, created in erased)
    room = plan.nearby(project_id).filter(room_id=room_id)
    back = list(
        room.filter(public_id__in=list(covered), status=Memory.Status.ARCHIVED)
        .order_by("pk")
        .select_for_update(of=("self",))
    )
    head = (
        room.filter(kind=Memory.Kind.SUMMARY, created_at__lt=first)
        .order_by("-created_at", "-pk")
        .select_for_update(of=("self",))
        .first()
    )
    superseded = head is not None and head.status == Memory.Status.SUPERSEDED
    mended = back + ([head] if head is not None and superseded else [])
    revisions = []
    for memory in mended:
        before = memory.snapshot()
        memory.status = Memory.Status.ACTIVE
        memory.save(update_fields=["status", "updated_at"])
        revisions.append(_revision(memory, actor, before))
    receipt.counts["messages_restored"] += len(back)
    return revisions


def _copies_erase(project_id: int, plan: _Plan) -> ErasureReceipt:
    """Synopsis parts, replayable responses, parked tasks and admin log lines that
    hold or name an erased memory."""
    receipt = ErasureReceipt()
    parts, revisions = synopses_clear(project_id=project_id, users=plan.users, erased=plan.public)
    receipt.counts["synopsis_parts_cleared"] += parts
    receipt.counts["synopsis_revisions_redacted"] += revisions
    receipt.counts["idempotency_keys"] += _responses_forget(project_id, plan)
    parked = ParkedTask.objects.filter(
        project_id=project_id, input_ids__has_any_keys=[str(pk) for pk in plan.pks]
    )
    receipt.counts["parked_tasks"] += parked.delete()[0]
    receipt.counts["admin_log_entries"] += admin_log_erase("memories.memory", plan.pks)
    return receipt


def admin_log_erase(model: str, pks: Iterable[Any]) -> int:
    """The admin's log lines about these rows (``app_label.model``) keep who, when and
    what action, not the row's text (``object_repr``: a memory's first words, a user's
    name, a document's title); returns how many."""
    app_label, name = model.split(".")
    kind = ContentType.objects.get_by_natural_key(app_label, name)
    entries = LogEntry.objects.filter(content_type=kind, object_id__in=[str(pk) for pk in pks])
    return entries.exclude(object_repr=ERASED_TEXT).update(object_repr=ERASED_TEXT)


def _responses_forget(project_id: int, plan: _Plan) -> int:
    """Delete the replayable responses that name an erased memory: a retry with such a
    key writes anew instead of replaying the erased words. Every key still kept is read
    (MEMORYHUB IDEMPOTENCY_KEY_TTL_HOURS, and the hourly purge's slack)."""
    hours = settings.MEMORYHUB["IDEMPOTENCY_KEY_TTL_HOURS"] + 2
    oldest = timezone.now() - timedelta(hours=hours)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            DELETE FROM {_KEYS} WHERE id IN (
                SELECT k.id FROM {_KEYS} AS k
                CROSS JOIN LATERAL jsonb_path_query(k.response, 'lax $.**.id') AS v(id)
                JOIN unnest(%s::text[]) AS erased(id) ON erased.id = v.id #>> '{{}}'
                WHERE k.project_id = %s AND k.created_at >= %s)
            """,
            [list(plan.public), project_id, oldest],
        )
        return cursor.rowcount
