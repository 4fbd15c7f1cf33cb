"""What the operators' console reads: project summaries, the overview's counts and
per-day series, the workers' and queues' health, and the users list. Read-only; the
console changes things through the same services as the API."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from memories.models import ApiKey, EndUser, Memory, Project
from memories.services.parking import ParkedSummary, parked_tasks_summary
from memories.services.tallies import (
    UserFigures,
    project_counts,
    project_days,
    projects_counted,
    user_last_activity,
    user_memory_count,
    users_figures,
)
from memories.services.worker_health import HealthReport, health_report

logger = logging.getLogger(__name__)

CHART_DAYS = 30
USERS_PER_PAGE = 50
USER_SORTS = {  # the users list's ?sort= values and the ordering each means
    "external_id": ("external_id",),
    "-external_id": ("-external_id",),
    "memories": ("memory_count", "external_id"),
    "-memories": ("-memory_count", "external_id"),
    "activity": ("last_activity", "external_id"),
    "-activity": ("-last_activity", "external_id"),
}
USER_SORT_DEFAULT = "-activity"


def projects_summarize(*, projects: QuerySet[Project]) -> list[Project]:
    """The projects by name, each with ``memory_count``, ``user_count`` and ``pending``
    (one query: the memories' counts from their tallies, the users' from an index)."""

    users = (
        EndUser.objects.filter(project=OuterRef("pk"))
        .order_by()
        .values("project")
        .annotate(n=Count("*"))
        .values("n")
    )
    return list(
        projects_counted(projects)
        .annotate(user_count=Coalesce(Subquery(users, output_field=IntegerField()), 0))
        .order_by("name")
    )


@dataclass
class DayCount:
    day: date
    count: int


@dataclass
class Overview:
    """What the project overview shows."""

    total: int
    kinds: list[str]
    statuses: list[str]
    by_kind: dict[str, dict[str, int]]  # by_kind[kind][status] -> count
    status_totals: dict[str, int]
    days: list[DayCount]
    pending: int
    failed: int
    user_count: int
    active_keys: int
    queues: dict[str, int | None] = field(default_factory=dict)  # tasks waiting, by queue
    health: HealthReport | None = None  # None: Redis did not answer (redis_error says why)
    redis_error: str = ""
    parked: ParkedSummary | None = None  # tasks parked on an input (poison messages)

    @property
    def rows(self) -> list[tuple[str, list[int], int]]:
        """(kind, counts in the order of ``statuses``, total) for the table."""
        return [
            (kind, [row[s] for s in self.statuses], sum(row.values()))
            for kind, row in self.by_kind.items()
        ]


def memories_per_day(*, project: Project, days: int = CHART_DAYS) -> list[DayCount]:
    """The project's memories created on each of the last ``days`` days (UTC) and
    still there, oldest first, zeros included (from the tallies)."""
    today = timezone.now().astimezone(timezone.get_fixed_timezone(0)).date()
    first = today - timedelta(days=days - 1)
    counts = project_days(project=project, first=first)
    return [
        DayCount(day=day, count=counts.get(day, 0))
        for day in (first + timedelta(days=offset) for offset in range(days))
    ]


def workers_health() -> tuple[HealthReport | None, str]:
    """What each worker runs and each queue holds, judged ok/amber/red; or None and the
    Redis error in words (shown to the operator, never a 500)."""
    try:
        return health_report(), ""
    except Exception as error:  # noqa: BLE001 - shown to the operator, not a 500
        logger.warning("console overview: Redis unavailable: %s", error)
        return None, str(error) or type(error).__name__


def project_overview(*, project: Project) -> Overview:
    """Counts by kind and status, memories per day, backlog, queues and workers."""
    # the tallies give both tables: kind x status, and the embedding status
    counted = project_counts(project=project)
    kinds, statuses = list(Memory.Kind.values), list(Memory.Status.values)
    by_kind = {kind: dict.fromkeys(statuses, 0) for kind in kinds}
    embedding = dict.fromkeys(Memory.EmbeddingStatus.values, 0)
    for (kind, status), n in counted.by_kind_status.items():
        counts = by_kind.setdefault(kind, dict.fromkeys(statuses, 0))
        counts[status] = counts.get(status, 0) + n
    for embedding_status, n in counted.by_embedding.items():
        embedding[embedding_status] = embedding.get(embedding_status, 0) + n
    overview = Overview(
        total=sum(sum(row.values()) for row in by_kind.values()),
        kinds=kinds,
        statuses=statuses,
        by_kind=by_kind,
        status_totals={s: sum(row[s] for row in by_kind.values()) for s in statuses},
        days=memories_per_day(project=project),
        pending=embedding[Memory.EmbeddingStatus.PENDING],
        failed=embedding[Memory.EmbeddingStatus.FAILED],
        user_count=EndUser.objects.for_project(project).count(),
        active_keys=ApiKey.objects.active().filter(project=project).count(),
    )
    overview.parked = parked_tasks_summary(project=project)
    overview.health, overview.redis_error = workers_health()
    if overview.health is not None:
        overview.queues = {queue.name: queue.length for queue in overview.health.queues}
    return overview


@dataclass
class UsersPage:
    """One page of the users list: ``page.object_list`` are EndUsers annotated with
    ``memory_count``, ``room_count`` and ``last_activity``."""

    page: Page[EndUser]
    sort: str
    query: str


def users_list(*, project: Project, query: str = "", sort: str = "", page: Any = 1) -> UsersPage:
    """The project's users matching ``query`` (external id or name, case-insensitive
    substring), sorted by ``sort`` (a key of USER_SORTS), USERS_PER_PAGE a page.

    Only the sort's own figure is computed for every matching user (a correlated
    subquery on her memories' tallies); the page's figures are then read for its
    users alone in one GROUP BY of theirs."""
    sort = sort if sort in USER_SORTS else USER_SORT_DEFAULT
    users = EndUser.objects.for_project(project)
    if query:
        users = users.filter(Q(external_id__icontains=query) | Q(name__icontains=query))
    if sort.lstrip("-") == "memories":
        users = users.annotate(memory_count=user_memory_count(project))
    elif sort.lstrip("-") == "activity":
        users = users.annotate(last_activity=user_last_activity(project))
    # users without memories have no figure: last either way
    ordering = [
        F(name[1:]).desc(nulls_last=True) if name[0] == "-" else F(name).asc(nulls_last=True)
        for name in USER_SORTS[sort]
    ]
    paginator = Paginator(users.order_by(*ordering), USERS_PER_PAGE)
    current = paginator.get_page(page)
    _page_figures_add(project, list(current.object_list))
    return UsersPage(page=current, sort=sort, query=query)


def _page_figures_add(project: Project, users: list[EndUser]) -> None:
    """Set memory_count, room_count and last_activity on each user of one page."""
    figures = users_figures(project=project, user_ids=[user.pk for user in users])
    for user in users:
        figure = figures.get(user.pk, UserFigures())
        user.memory_count = figure.memories  # type: ignore[attr-defined]
        user.room_count = figure.rooms  # type: ignore[attr-defined]
        user.last_activity = figure.last_activity  # type: ignore[attr-defined]
