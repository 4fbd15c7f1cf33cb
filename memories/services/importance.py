"""Importance (MUXI): each memory's ``importance_score``, a derived number that beat
recomputes from its age, how often agents were given it and the importance set on it.

    score = recency_weight x recency + access_weight x access + explicit_weight x explicit

* recency: 0.5 ** (age_days / half_life_days), the age counted from the latest of
  created_at and accessed_at (a memory agents keep reading stays fresh);
* access: ln(access_count + 1) / the largest ln(access_count + 1) among the same
  user's memories (0 when none was read); memories without a user are compared with
  the project's other user-less memories;
* explicit: 1 if pinned, else ``importance`` (set by the agent or an operator).

Weights and half-life are the project's ``importance`` settings. Scores are rounded to
ROUND_DIGITS, so a run writes only the rows whose rounded score moved.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import OperationalError, connection, transaction
from django.utils import timezone
from psycopg.errors import DeadlockDetected

from memories.config import ImportanceSettings
from memories.models import Memory, Project
from memories.services.configuration import project_settings_get

logger = logging.getLogger(__name__)

# one UPDATE (one transaction) covers about this many memories
CHUNK_ROWS = 5_000
# 3 digits: a fresh memory's score moves by ~0.0003 an hour (30-day half-life), so it
# is rewritten every few hours, an old one almost never; search and pruning need no more
ROUND_DIGITS = 3
# 0.5 ** 1000 is still a normal float8; PostgreSQL raises on an underflow to 0
MAX_HALF_LIVES = 1000

_TABLE = Memory._meta.db_table

# %(name)s parameters: now, recency_weight, access_weight, explicit_weight, half_life_days;
# g.max_log is the largest ln(access_count + 1) of the memory's user
_SCORE = f"""round((
    %(recency_weight)s * power(0.5::float8, least(
        greatest(extract(epoch from (%(now)s - greatest(m.created_at, m.accessed_at)))::float8,
                 0) / 86400.0 / %(half_life_days)s,
        {MAX_HALF_LIVES}))
  + %(access_weight)s * coalesce(ln(m.access_count + 1) / nullif(g.max_log, 0), 0)
  + %(explicit_weight)s * CASE WHEN m.pinned THEN 1.0 ELSE m.importance END
)::numeric, {ROUND_DIGITS})::float8"""


@dataclass
class _Group:
    """The memories of one user of a project (user_id None: those without a user)."""

    user_id: int | None
    rows: int
    max_log: float


@dataclass
class _Chunk:
    """Some users' memories, or a created_at range of one large group's memories."""

    groups: list[_Group]
    rows: int
    start: datetime | None = None  # created_at >= start
    end: datetime | None = None  # created_at < end


def importance_recompute(
    *, project: Project | None = None, progress: Callable[[int], None] | None = None
) -> int:
    """Recompute ``importance_score`` of every memory of ``project`` (None: of every
    project) in chunks of about CHUNK_ROWS, each its own transaction; ``progress`` gets
    the number of memories each chunk covered. Returns how many scores changed.

    A derived score, not a change to the memory: only the changed rows are written,
    with neither ``updated_at`` nor a revision."""
    projects = [project] if project is not None else list(Project.objects.order_by("pk"))
    changed = 0
    for row in projects:
        policy = project_settings_get(project=row).importance
        changed += _project_recompute(row, policy, progress)
    return changed


def _project_recompute(
    project: Project, policy: ImportanceSettings, progress: Callable[[int], None] | None
) -> int:
    params: dict[str, Any] = {
        "project": project.pk,
        "now": timezone.now(),  # one "now" for the whole run: equal ages score alike
        "recency_weight": policy.recency_weight,
        "access_weight": policy.access_weight,
        "explicit_weight": policy.explicit_weight,
        "half_life_days": policy.half_life_days,
    }
    changed = 0
    for chunk in _chunks(project):
        sql, chunk_params = _chunk_update(chunk)
        changed += _chunk_run(sql, {**params, **chunk_params})
        if progress is not None:
            progress(chunk.rows)
    return changed


def _chunk_run(sql: str, params: dict[str, Any], attempts: int = 6) -> int:
    """One chunk's UPDATE in its own transaction. It can deadlock with a writer that
    locks the same rows in another order (the access flush, a fact's reinforcement):
    PostgreSQL then aborts one side, and the chunk, idempotent, is run again after a
    pause that doubles each time (0.25 s up to 4 s), so that a long writer, such as a
    large access flush in one transaction, can finish first (three immediate attempts
    all lost to one in a full bench run)."""
    for attempt in range(1, attempts + 1):
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql, params)
                return int(cursor.rowcount)
        except OperationalError as error:
            if not isinstance(error.__cause__, DeadlockDetected) or attempt == attempts:
                raise
            logger.info("importance recompute: a chunk deadlocked, running it again")
            time.sleep(DEADLOCK_PAUSE_SECONDS * 2 ** (attempt - 1))
    return 0


# the pause before a deadlocked chunk's first new attempt (doubled for each next one)
DEADLOCK_PAUSE_SECONDS = 0.25


def _groups(project: Project) -> list[_Group]:
    """Each user's memory count and largest ln(access_count + 1) (ln grows with the
    count, so the largest count gives it)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT end_user_id, count(*), ln(max(access_count) + 1)::float8 FROM {_TABLE} "
            "WHERE project_id = %s GROUP BY end_user_id ORDER BY end_user_id NULLS FIRST",
            [project.pk],
        )
        return [_Group(user_id, rows, max_log) for user_id, rows, max_log in cursor.fetchall()]


def _chunks(project: Project) -> Iterator[_Chunk]:
    """Users packed together up to CHUNK_ROWS memories; the user-less memories and a
    user with more than CHUNK_ROWS go alone, cut into created_at ranges of about
    CHUNK_ROWS (so no transaction holds a huge user's rows)."""
    packed: list[_Group] = []
    packed_rows = 0
    for group in _groups(project):
        if group.user_id is None or group.rows > CHUNK_ROWS:
            yield from _ranges(project, group)
            continue
        packed.append(group)
        packed_rows += group.rows
        if packed_rows >= CHUNK_ROWS:
            yield _Chunk(packed, packed_rows)
            packed, packed_rows = [], 0
    if packed:
        yield _Chunk(packed, packed_rows)


def _ranges(project: Project, group: _Group) -> Iterator[_Chunk]:
    """One group's memories as created_at ranges of about CHUNK_ROWS (its quantiles);
    the first and last ranges are open, so memories written since are covered too."""
    parts = -(-group.rows // CHUNK_ROWS)
    if parts <= 1:
        yield _Chunk([group], group.rows)
        return
    user = "end_user_id IS NULL" if group.user_id is None else "end_user_id = %s"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT percentile_disc(%s::float8[]) WITHIN GROUP (ORDER BY created_at) "
            f"FROM {_TABLE} WHERE project_id = %s AND {user}",
            [
                [i / parts for i in range(1, parts)],
                project.pk,
                *([] if group.user_id is None else [group.user_id]),
            ],
        )
        bounds = sorted(set(cursor.fetchone()[0] or []))
    edges: list[datetime | None] = [None, *bounds, None]
    count = len(edges) - 1
    for index, (start, end) in enumerate(zip(edges, edges[1:], strict=False)):
        # shares of the group's count, so that progress adds up to it
        share = group.rows // count + (1 if index < group.rows % count else 0)
        yield _Chunk([group], share, start, end)


def _chunk_update(chunk: _Chunk) -> tuple[str, dict[str, Any]]:
    """The UPDATE of one chunk and its own parameters."""
    params: dict[str, Any] = {}
    if chunk.groups[0].user_id is None:
        source = "(SELECT %(max_log)s::float8 AS max_log) AS g"
        match = "m.end_user_id IS NULL"
        params["max_log"] = chunk.groups[0].max_log
    else:
        source = "unnest(%(users)s::bigint[], %(max_logs)s::float8[]) AS g(user_id, max_log)"
        match = "m.end_user_id = g.user_id"
        params["users"] = [group.user_id for group in chunk.groups]
        params["max_logs"] = [group.max_log for group in chunk.groups]
    if chunk.start is not None:
        match += " AND m.created_at >= %(start)s"
        params["start"] = chunk.start
    if chunk.end is not None:
        match += " AND m.created_at < %(end)s"
        params["end"] = chunk.end
    sql = (
        f"UPDATE {_TABLE} AS m SET importance_score = {_SCORE} FROM {source} "
        f"WHERE m.project_id = %(project)s AND {match} "
        f"AND m.importance_score IS DISTINCT FROM {_SCORE}"
    )
    return sql, params


def importance_recompute_total(*, project: Project | None = None) -> int:
    """How many memories a recompute of ``project`` (None: every project) covers."""
    memories = Memory.objects.all() if project is None else Memory.objects.for_project(project)
    return memories.count()
