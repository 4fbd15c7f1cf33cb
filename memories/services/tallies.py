"""Counts of a project's memories read from its tallies (memories.models.tallies)
rather than from its rows: the console's overview, users list and projects list read
them in milliseconds at any size. ``tallies_fold`` (the beat, every minute) folds the
rows the triggers append into one a group."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, IntegerField, Max, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce

from memories.models import Memory, MemoryTally, Project

GROUP = "project_id, end_user_id, room_id, day, kind, status, embedding_status"
FOLD_SQL = f"""
    WITH crowded AS (
        SELECT {GROUP} FROM memories_memory_tally
        GROUP BY {GROUP} HAVING count(*) > 1 OR sum(n) = 0
    ), gone AS (
        DELETE FROM memories_memory_tally t USING crowded c
        WHERE (t.project_id, t.end_user_id, t.room_id, t.day, t.kind, t.status,
               t.embedding_status)
            = (c.project_id, c.end_user_id, c.room_id, c.day, c.kind, c.status,
               c.embedding_status)
        RETURNING t.*
    )
    INSERT INTO memories_memory_tally ({GROUP}, n, last_at)
    SELECT {GROUP}, sum(n), max(last_at) FROM gone GROUP BY {GROUP} HAVING sum(n) <> 0
"""
REBUILD_SQL = f"""
    INSERT INTO memories_memory_tally ({GROUP}, n, last_at)
    SELECT project_id, coalesce(end_user_id, 0), coalesce(room_id, 0),
           (created_at AT TIME ZONE 'UTC')::date, kind, status, embedding_status,
           count(*), max(created_at)
    FROM memories_memory WHERE project_id = %s
    GROUP BY 1, 2, 3, 4, 5, 6, 7
"""


def tallies_fold() -> int:
    """Fold each group's rows into one and drop the groups that sum to zero (one
    statement: the triggers' concurrent appends are left for the next fold); the rows
    there are afterwards."""
    with connection.cursor() as cursor:
        cursor.execute(FOLD_SQL)
        cursor.execute("SELECT count(*) FROM memories_memory_tally")
        return int(cursor.fetchone()[0])


def tallies_rebuild(*, project: Project) -> None:
    """Count the project's memories afresh (a repair: the triggers keep the tallies
    exact). Holds the project's writes back while it counts."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("LOCK TABLE memories_memory IN SHARE MODE")
        cursor.execute("DELETE FROM memories_memory_tally WHERE project_id = %s", [project.pk])
        cursor.execute(REBUILD_SQL, [project.pk])


@dataclass
class ProjectCounts:
    """The project's memories by (kind, status) and by embedding status."""

    by_kind_status: dict[tuple[str, str], int]
    by_embedding: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.by_kind_status.values())


def project_counts(*, project: Project) -> ProjectCounts:
    """The project's memories counted by kind and status, and by embedding status."""
    rows = (
        MemoryTally.objects.filter(project_id=project.pk)
        .values_list("kind", "status", "embedding_status")
        .annotate(total=Sum("n"))
        .order_by()
    )
    by_kind_status: dict[tuple[str, str], int] = {}
    by_embedding: dict[str, int] = {}
    for kind, status, embedding_status, total in rows:
        by_kind_status[kind, status] = by_kind_status.get((kind, status), 0) + total
        by_embedding[embedding_status] = by_embedding.get(embedding_status, 0) + total
    return ProjectCounts(by_kind_status=by_kind_status, by_embedding=by_embedding)


def project_days(*, project: Project, first: date) -> dict[date, int]:
    """The project's memories created on each UTC day from ``first`` on (days without
    any are absent)."""
    rows = (
        MemoryTally.objects.filter(project_id=project.pk, day__gte=first)
        .values_list("day")
        .annotate(total=Sum("n"))
        .order_by()
    )
    return {day: total for day, total in rows if total}


def _of_user(project: Project) -> Any:
    return (
        MemoryTally.objects.filter(project_id=project.pk, end_user_id=OuterRef("pk"))
        .order_by()
        .values("end_user_id")
    )


def user_memory_count(project: Project) -> Coalesce:
    """An EndUser annotation: her memories in ``project``."""
    counted = _of_user(project).annotate(total=Sum("n")).values("total")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def user_last_activity(project: Project) -> Subquery:
    """An EndUser annotation: when her latest memory was written (None: none)."""
    return Subquery(_of_user(project).annotate(last=Max("last_at")).values("last"))


@dataclass
class UserFigures:
    memories: int = 0
    rooms: int = 0
    last_activity: datetime | None = None


USERS_FIGURES_SQL = """
    SELECT end_user_id, sum(total), count(*) FILTER (WHERE room_id <> 0 AND total > 0), max(last)
    FROM (
        SELECT end_user_id, room_id, sum(n) AS total, max(last_at) AS last
        FROM memories_memory_tally
        WHERE project_id = %s AND end_user_id = ANY(%s)
        GROUP BY end_user_id, room_id
    ) AS rooms
    GROUP BY end_user_id
"""


def users_figures(*, project: Project, user_ids: list[int]) -> dict[int, UserFigures]:
    """Memories, rooms with memories and last activity of each of ``user_ids`` (summed
    in the database: a page's users may have tens of thousands of rooms' rows)."""
    with connection.cursor() as cursor:
        cursor.execute(USERS_FIGURES_SQL, [project.pk, list(user_ids)])
        return {
            user_id: UserFigures(memories=int(total), rooms=rooms, last_activity=last)
            for user_id, total, rooms, last in cursor.fetchall()
        }


def projects_counted(projects: Any) -> Any:
    """``projects`` annotated with ``memory_count`` and ``pending`` (embedding)."""
    of_project = MemoryTally.objects.filter(project_id=OuterRef("pk")).order_by()

    def total(queryset: Any) -> Coalesce:
        summed = queryset.values("project_id").annotate(total=Sum("n")).values("total")
        return Coalesce(Subquery(summed, output_field=IntegerField()), 0)

    return projects.annotate(
        memory_count=total(of_project),
        pending=total(of_project.filter(embedding_status=Memory.EmbeddingStatus.PENDING)),
    )


def tallies_differences(*, project: Project) -> dict[tuple[str, str, str], tuple[int, int]]:
    """Where the project's tallies and a count of its rows disagree: (kind, status,
    embedding status) -> (tallied, counted); empty when they agree. Counts every row:
    seconds at a million memories."""
    tallied: dict[tuple[str, str, str], int] = {}
    for kind, status, embedding_status, total in (
        MemoryTally.objects.filter(project_id=project.pk)
        .values_list("kind", "status", "embedding_status")
        .annotate(total=Sum("n"))
        .order_by()
    ):
        tallied[kind, status, embedding_status] = total
    counted: dict[tuple[str, str, str], int] = {}
    for kind, status, embedding_status, total in (
        Memory.objects.filter(project=project)
        .values_list("kind", "status", "embedding_status")
        .annotate(total=Count("*"))
        .order_by()
    ):
        counted[kind, status, embedding_status] = total
    return {
        key: (tallied.get(key, 0), counted.get(key, 0))
        for key in sorted(tallied.keys() | counted.keys())
        if tallied.get(key, 0) != counted.get(key, 0)
    }
