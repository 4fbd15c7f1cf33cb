"""The scheduled synopsis refresh (the design's beat maintenance): a synopsis part whose
material changed after it was generated is regenerated even if nobody reads it and its
TTL has not run out, so what the hub learned reaches the synopsis an agent gets next.

A part's material, as far as the refresh follows it: the identity part's facts and
relationships, the context part's goals and room summaries (its last messages change
with every turn: its TTL follows them). A change is a memory of those kinds created or
updated (edited, superseded, pruned) after the part's ``generated_at``; a part never
generated is due once there is material. Locked parts are never due (an operator's
edit locks its part unless told not to; an unlocked edit is the generator's again once
its material changes, as once its TTL runs out). Projects refreshed only by TTL
(``synopsis.refresh_after_facts`` 0) and parked users are left out.

A run takes at most ``max_users`` users, the one whose first unreflected change is the
oldest first, and queues a generation of their due parts (forced: the TTL does not hold
them back); a user whose parts are already queued (a read, an earlier run) is skipped,
so a backlog on the derived queue is not fed twice. The next run takes the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import redis
from django.db.models import Case, DateTimeField, F, OuterRef, QuerySet, Subquery, Value, When
from django.db.models.functions import Coalesce, Least
from django.utils import timezone

from memories.models import EndUser, Memory, Project
from memories.models.synopsis import CONTEXT, IDENTITY, PARTS
from memories.providers.redis_client import redis_client
from memories.providers.task_sending import TaskNotSent, sending_failed, sending_paused
from memories.services.configuration import project_settings_get
from memories.services.parking import parked_input_ids
from memories.services.synopsis_refresh import QUEUED_FLAG, synopsis_refresh_dequeued
from synopsis.services.synopses import SYNOPSIS_GENERATE_TASK, synopsis_generate_enqueue
from synopsis.services.synopsis_material import IDENTITY_KINDS

# users a run takes by default (the beat passes SYNOPSIS_REFRESH_MAX_USERS)
MAX_USERS = 200
PART_KINDS = {IDENTITY: IDENTITY_KINDS, CONTEXT: (Memory.Kind.GOAL, Memory.Kind.SUMMARY)}
# before any change: what a part never generated is compared with
NEVER = datetime.min.replace(tzinfo=UTC)
# a run's queued flags outlive a read's (300 s): a generation that waits on a busy derived
# queue (red past 30 minutes by default, WORKER_QUEUE_AGE_LIMITS) is not queued again by
# the next runs; its task clears them when it starts
FLAG_TTL = 1800


@dataclass(frozen=True)
class StaleSynopsis:
    """A user whose ``parts`` are older than a change of their material since
    ``stale_since`` (the first change not in the part)."""

    end_user_id: int
    parts: list[str]
    stale_since: datetime


def synopses_stale(*, limit: int, now: datetime | None = None) -> list[StaleSynopsis]:
    """Up to ``limit`` users with a due part (see the module), the longest-stale first;
    a change after ``now`` (default: now; a clock ahead) waits until then."""
    now = now or timezone.now()
    changed = {f"{part}_changed": _first_change(part, now) for part in PARTS}
    users = _users_followed()
    # the users not stale sort last, and no WHERE repeats the ORDER BY's subqueries: each
    # user's are run once (PostgreSQL's LEAST skips NULLs)
    first = (
        users.annotate(stale_since=Least(*changed.values()))
        .order_by(F("stale_since").asc(nulls_last=True), "pk")
        .values_list("pk", "stale_since")[:limit]
    )
    since = {pk: at for pk, at in first if at is not None}
    due = users.filter(pk__in=since).annotate(**changed).values_list("pk", *changed)
    parts = {pk: [p for p, at in zip(PARTS, ats, strict=True) if at] for pk, *ats in due}
    return [
        StaleSynopsis(end_user_id=pk, parts=parts[pk], stale_since=at)
        for pk, at in since.items()
        if parts.get(pk)  # a part generated since the first query is not due any more
    ]


def _users_followed() -> QuerySet[EndUser]:
    """The users the refresh follows: not parked, not of a project refreshed by TTL only."""
    parked = parked_input_ids(task=SYNOPSIS_GENERATE_TASK, input_kind="user")
    return EndUser.objects.exclude(project_id__in=_projects_refreshed_by_ttl_only()).exclude(
        pk__in=[int(pk) for pk in parked if pk.isdigit()]
    )


def _first_change(part: str, now: datetime) -> Case:
    """When the part's material first changed after the part was generated; NULL if it
    did not, or the part is locked. One probe of the index of a user's memories by kind
    (memory_user_kind) per user and part."""
    generated_at = Coalesce(OuterRef(f"synopsis__{part}_generated_at"), Value(NEVER))
    changes = (
        Memory.objects.filter(
            project_id=OuterRef("project_id"),
            end_user_id=OuterRef("pk"),
            kind__in=PART_KINDS[part],
            updated_at__lte=now,
        )
        .filter(updated_at__gt=generated_at)
        .order_by("updated_at")
        .values("updated_at")[:1]
    )
    return Case(
        When(**{f"synopsis__{part}_locked": True}, then=Value(None)),
        default=Subquery(changes),
        output_field=DateTimeField(),
    )


def _projects_refreshed_by_ttl_only() -> list[int]:
    """The projects whose synopses follow their TTL alone (``refresh_after_facts`` 0)."""
    projects = Project.objects.only("pk", "settings")
    return [
        p.pk for p in projects if project_settings_get(project=p).synopsis.refresh_after_facts == 0
    ]


def synopsis_refresh_sweep(*, max_users: int = MAX_USERS) -> dict[str, int]:
    """Queue the regeneration of the due parts of up to ``max_users`` users, the
    longest-stale first; returns the counts of the run: users found stale, generations
    queued. Redis or the broker unreachable: the run stops, the next one resumes."""
    stale = synopses_stale(limit=max_users)
    return {"stale": len(stale), "queued": _enqueue(stale)}


def _enqueue(stale: list[StaleSynopsis]) -> int:
    """Send a forced generation of each user's due parts that are not queued yet (the
    generation task clears their queued flags when it starts)."""
    sent = 0
    client = redis_client()
    for item in stale:
        if sending_paused():
            break
        try:
            parts = _flags_set(client, item)
        except redis.RedisError as error:
            sending_failed(error, "a synopsis' generation task (its queued flags)")
            break
        if not parts:
            continue  # already queued
        try:
            synopsis_generate_enqueue(end_user_id=item.end_user_id, parts=parts, force=True)
        except TaskNotSent:
            synopsis_refresh_dequeued(end_user_id=item.end_user_id, parts=parts)
            break
        sent += 1
    return sent


def _flags_set(client: redis.Redis, item: StaleSynopsis) -> list[str]:
    """Flag each part queued (memories/services/synopsis_refresh.py's flags: a read
    then queues no other); returns the parts newly flagged."""
    pipe = client.pipeline(transaction=False)
    for part in item.parts:
        pipe.set(QUEUED_FLAG.format(item.end_user_id, part), "1", nx=True, ex=FLAG_TTL)
    return [part for part, was_set in zip(item.parts, pipe.execute(), strict=True) if was_set]
