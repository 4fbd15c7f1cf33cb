"""The console's Jobs page: the workers and queues (shared by every project, read from
Redis by memories.services.worker_health), this project's own backlog (from the
database: a queued message names its rows by id, not its project), its parked tasks
by keyset pages, its recent maintenance runs, and its throughput per hour.

Throughput counts, per hour (UTC) of the last THROUGHPUT_HOURS: the project's memories
by the hour they were embedded (re-embedded ones too; index memory_project_embedded),
and its messages mined for facts by the hour of their extraction (FactExtraction, index
(project, -created_at))."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Count, Min, Q, QuerySet, Sum
from django.db.models.functions import TruncHour
from rest_framework.exceptions import ValidationError

from console.services.usage import Chart, chart_of
from ingestion.models import Document
from memories.api.pagination import DATETIME, INTEGER, Key, Ordering
from memories.models import MaintenanceRun, Memory, ParkedTask, Project
from synopsis.models import FactExtraction

THROUGHPUT_HOURS = 48
PARKED_PAGE = 25
RUNS_SHOWN = 10
PARKED_ORDER = Ordering(keys=(Key("last_failed_at", DATETIME), Key("pk", INTEGER)), descending=True)
PARKED_STATUSES = ("", *ParkedTask.Status.values)  # the list's ?status= ("": all)


class CursorRefused(ValueError):
    """A parked-tasks cursor that is not one of this list's."""


@dataclass
class Backlog:
    """The project's waiting work, from the database."""

    embedding_pending: int
    embedding_oldest: datetime | None  # written the earliest, still not embedded
    documents_unfinished: int
    documents_oldest: datetime | None
    documents_failed: int
    parked: int


def project_backlog(*, project: Project) -> Backlog:
    """Memories waiting for their embedding (the partial index on pending rows; a failed
    one is a parked task, and counting them would read every row of the project),
    documents not done or failed, and parked tasks."""
    embedding = Memory.objects.filter(project=project).order_by()
    pending = embedding.filter(embedding_status=Memory.EmbeddingStatus.PENDING).aggregate(
        n=Count("id"), oldest=Min("created_at")
    )
    documents = Document.objects.filter(project=project).order_by()
    unfinished = documents.filter(status__in=Document.UNFINISHED).aggregate(
        n=Count("id"), oldest=Min("created_at")
    )
    return Backlog(
        embedding_pending=pending["n"],
        embedding_oldest=pending["oldest"],
        documents_unfinished=unfinished["n"],
        documents_oldest=unfinished["oldest"],
        documents_failed=documents.filter(status=Document.Status.FAILED).count(),
        parked=ParkedTask.objects.filter(project=project, status=ParkedTask.Status.PARKED).count(),
    )


def _hours(now: datetime | None, hours: int) -> list[datetime]:
    last = (now or datetime.now(UTC)).astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return [last - timedelta(hours=hours - 1 - n) for n in range(hours)]


def _per_hour(
    rows: QuerySet[Memory] | QuerySet[FactExtraction], moment: str
) -> dict[datetime, int]:
    grouped = (
        rows.annotate(hour=TruncHour(moment, tzinfo=UTC))
        .order_by()
        .values("hour")
        .annotate(n=Count("id"))
    )
    return {row["hour"]: row["n"] for row in grouped}


def throughput_charts(
    *, project: Project, hours: int = THROUGHPUT_HOURS, now: datetime | None = None
) -> tuple[Chart, Chart, int]:
    """Memories embedded and messages mined for facts per hour, oldest hour first, and
    the facts those extractions created or reinforced."""
    slots = _hours(now, hours)
    start = slots[0]
    embedded = _per_hour(
        Memory.objects.filter(project=project, embedded_at__gte=start),
        "embedded_at",
    )
    mined = FactExtraction.objects.filter(
        project=project, created_at__gte=start, status=FactExtraction.Status.DONE
    )
    per_hour = _per_hour(mined, "created_at")
    facts = mined.order_by().aggregate(n=Sum("facts"))["n"] or 0

    def label(hour: datetime) -> str:
        return f"{hour:%a %H:00}"

    return (
        chart_of(
            [(label(hour), embedded.get(hour, 0)) for hour in slots],
            title=f"Memories embedded per hour, last {hours} hours",
            unit="memories embedded",
            period="hour",
        ),
        chart_of(
            [(label(hour), per_hour.get(hour, 0)) for hour in slots],
            title=f"Messages mined for facts per hour, last {hours} hours",
            unit="messages mined",
            period="hour",
        ),
        int(facts),
    )


def maintenance_runs(*, project: Project, limit: int = RUNS_SHOWN) -> list[MaintenanceRun]:
    """The project's latest maintenance runs (pruning, importance, bulk actions...),
    newest first; without their details (a bulk run's hold its ids: up to ~370 KB)."""
    runs = MaintenanceRun.objects.filter(project=project).defer("details")
    return list(runs.order_by("-started_at")[:limit])


@dataclass
class ParkedPage:
    rows: list[ParkedTask]
    next_cursor: str | None
    status: str


def parked_page(*, project: Project, status: str = "", after: str = "") -> ParkedPage:
    """A page of the project's parked tasks (``status``: parked, retried or "" for
    both), the latest failure first, after the ``after`` cursor; CursorRefused for a
    cursor that is not one."""
    status = status if status in PARKED_STATUSES else ""
    rows = ParkedTask.objects.filter(project=project)
    if status:
        rows = rows.filter(status=status)
    if after:
        try:
            rows = rows.filter(PARKED_ORDER.after(PARKED_ORDER.cursor_read(after)))
        except ValidationError:
            raise CursorRefused("after: not a cursor of this list") from None
    found = list(rows.order_by(*PARKED_ORDER.order_by)[: PARKED_PAGE + 1])
    more = len(found) > PARKED_PAGE
    next_cursor = PARKED_ORDER.cursor_of(found[PARKED_PAGE - 1]) if more else None
    return ParkedPage(rows=found[:PARKED_PAGE], next_cursor=next_cursor, status=status)


def parked_of(*, project: Project, parked_id: int) -> ParkedTask | None:
    """The project's parked task of this id (None for another project's)."""
    return ParkedTask.objects.filter(Q(project=project), pk=parked_id).first()
