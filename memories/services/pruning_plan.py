"""The pruning policies as one query: what a project's ``pruning`` settings (each
optional) would prune now. memories/services/pruning.py applies the plan.

The policies, applied in this order, each to what the ones before it left:

1. age: active and archived memories (archived: the originals already condensed into
   summaries) created more than ``max_age_days`` ago, unless their importance score is
   at least ``age_keep_importance`` or agents were given them ``age_keep_access_count``
   times or more (as ElizaOS's pruner; a threshold of 0 keeps nothing back);
2. fifo: past ``fifo_per_user_kind`` active memories of a user and kind, the oldest;
3. importance: past ``importance_cap`` active memories of a user, the lowest importance
   scores (ties: the oldest first);
4. size: past ``max_mb_per_user`` MB (1 MB = 1,048,576 bytes of content + metadata JSON,
   octet_length) of a user's active memories, the lowest importance first (same order),
   until the rest fits.

Every kind counts. Memories without a user are one more "user" of their project.
Superseded and pruned memories are left alone. Pinned memories are never pruned, but
they count towards the caps and are kept first. A memory is chosen once, by the first
policy that takes it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from memories.config import PruningSettings
from memories.models import EndUser, Memory, Project
from memories.services.configuration import project_settings_get

POLICIES = ("age", "fifo", "importance", "size")
BYTES_PER_MB = 1024 * 1024

_TABLE = Memory._meta.db_table
_ACTIVE = Memory.Status.ACTIVE.value
_ARCHIVED = Memory.Status.ARCHIVED.value

# One scan of the project's (or user's) candidate memories; each policy's CTE keeps what
# the ones before it left. Pinned rows sort first in the keep orders: kept and counted.
_PLAN_SQL = f"""
WITH base AS (
    SELECT id, end_user_id, kind, status, pinned, created_at, importance_score,
           octet_length(content) + octet_length(metadata::text) AS bytes,
           (%(age_on)s AND NOT pinned AND created_at < %(age_cutoff)s
            AND NOT (%(keep_importance)s > 0 AND importance_score >= %(keep_importance)s)
            AND NOT (%(keep_access)s > 0 AND access_count >= %(keep_access)s)) AS by_age
    FROM {_TABLE}
    WHERE project_id = %(project)s AND status IN ('{_ACTIVE}', '{_ARCHIVED}') {{user}}
),
fifo AS (
    SELECT *, (%(fifo_on)s AND NOT pinned AND row_number() OVER (
                   PARTITION BY end_user_id, kind ORDER BY pinned DESC, created_at DESC, id DESC
               ) > %(fifo_cap)s) AS by_fifo
    FROM base WHERE status = '{_ACTIVE}' AND NOT by_age
),
ranked AS (
    SELECT *, row_number() OVER keep AS keep_rank, sum(bytes) OVER keep AS kept_bytes
    FROM fifo WHERE NOT by_fifo
    WINDOW keep AS (
        PARTITION BY end_user_id
        ORDER BY pinned DESC, importance_score DESC, created_at DESC, id DESC
        ROWS UNBOUNDED PRECEDING
    )
),
chosen AS (
    SELECT 1 AS step, end_user_id, created_at, id FROM base WHERE by_age
    UNION ALL
    SELECT 2, end_user_id, created_at, id FROM fifo WHERE by_fifo
    UNION ALL
    SELECT CASE WHEN %(importance_on)s AND keep_rank > %(importance_cap)s THEN 3 ELSE 4 END,
           end_user_id, created_at, id
    FROM ranked
    WHERE NOT pinned AND ((%(importance_on)s AND keep_rank > %(importance_cap)s)
                          OR (%(size_on)s AND kept_bytes > %(max_bytes)s))
)
SELECT step, id FROM chosen ORDER BY step, end_user_id NULLS FIRST, created_at, id
"""


@dataclass
class PrunePlan:
    """What the policies choose, by policy (POLICIES order), each list in the order
    (user, created_at, id); a memory is in one list at most."""

    ids: dict[str, list[uuid.UUID]] = field(default_factory=lambda: {p: [] for p in POLICIES})

    @property
    def total(self) -> int:
        return sum(len(ids) for ids in self.ids.values())

    @property
    def counts(self) -> dict[str, int]:
        return {policy: len(ids) for policy, ids in self.ids.items()}


def pruning_enabled(policy: PruningSettings) -> bool:
    """Whether any pruning policy is on (the purge runs regardless)."""
    return bool(
        policy.max_age_days
        or policy.fifo_per_user_kind
        or policy.importance_cap
        or policy.max_mb_per_user
    )


def prune_plan(
    *, project: Project, end_user: EndUser | None = None, now: datetime | None = None
) -> PrunePlan:
    """The memories the project's policies would prune now (of one user with
    ``end_user``), exact and in a deterministic order; changes nothing."""
    policy = project_settings_get(project=project).pruning
    plan = PrunePlan()
    if not pruning_enabled(policy):
        return plan
    now = now or timezone.now()
    params: dict[str, Any] = {
        "project": project.pk,
        "age_on": policy.max_age_days > 0,
        "age_cutoff": now - timedelta(days=policy.max_age_days),
        "keep_importance": policy.age_keep_importance,
        "keep_access": policy.age_keep_access_count,
        "fifo_on": policy.fifo_per_user_kind > 0,
        "fifo_cap": policy.fifo_per_user_kind,
        "importance_on": policy.importance_cap > 0,
        "importance_cap": policy.importance_cap,
        "size_on": policy.max_mb_per_user > 0,
        "max_bytes": int(policy.max_mb_per_user * BYTES_PER_MB),
    }
    user = ""
    if end_user is not None:
        user = "AND end_user_id = %(user)s"
        params["user"] = end_user.pk
    with connection.cursor() as cursor:
        cursor.execute(_PLAN_SQL.format(user=user), params)
        for step, memory_id in cursor.fetchall():
            plan.ids[POLICIES[step - 1]].append(memory_id)
    return plan
