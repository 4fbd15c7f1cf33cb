"""The console's LLM usage page: the project's recorded LlmCalls (synopsis.models) per
day and purpose over the last USAGE_DAYS days (calls, tokens in and out, failures,
retries), the tokens per day as a chart, and this month against the monthly token
budget. Read-only; one GROUP BY over the index (project, -created_at)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db.models import Count, F, Q, Sum
from django.db.models.functions import Coalesce, TruncDate

from memories.models import Project
from synopsis.models import LlmCall
from synopsis.services.llm_budget import LlmBudget, llm_budget_get

USAGE_DAYS = 30
DAYS_SHOWN = 7  # the by-day table's days with calls shown open; the older ones fold
CHART_HEIGHT, CHART_SLOT, CHART_BAR = 120.0, 20.0, 14.0


@dataclass
class Usage:
    """Calls of one purpose (or all) on one day (or all of them)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    retries: int = 0  # attempts beyond the first

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.failures += other.failures
        self.retries += other.retries


@dataclass
class UsageDay:
    day: date
    total: Usage
    by_purpose: dict[str, Usage] = field(default_factory=dict)


@dataclass
class Bar:
    """One bar of a server-rendered chart, in SVG user units."""

    label: str  # e.g. "Mon 2026-11-30"
    count: int
    x: float
    y: float
    height: float


@dataclass
class Chart:
    """A bar chart (templates/console/jobs/bar_chart.html): one bar a day or an hour."""

    title: str
    unit: str  # what a bar counts, e.g. "tokens"
    period: str  # what a bar covers: "day" or "hour"
    bars: list[Bar]
    first: str
    last: str
    top: int
    total: int
    width: float
    height: float = CHART_HEIGHT


def chart_of(points: list[tuple[str, int]], *, title: str, unit: str, period: str) -> Chart:
    """A chart of (label, count) points, oldest first: a one-unit stub for a point with
    a count, so none is lost at scale."""
    top = max((count for _, count in points), default=0)
    bars = []
    for index, (label, count) in enumerate(points):
        height = CHART_HEIGHT * count / (top or 1)
        height = max(height, 1.0) if count else 0.0
        x = index * CHART_SLOT + (CHART_SLOT - CHART_BAR) / 2
        bars.append(Bar(label, count, x, CHART_HEIGHT - height, height))
    return Chart(
        title=title,
        unit=unit,
        period=period,
        bars=bars,
        first=points[0][0] if points else "",
        last=points[-1][0] if points else "",
        top=top,
        total=sum(count for _, count in points),
        width=CHART_SLOT * len(points),
    )


@dataclass
class UsagePage:
    """What the usage page shows."""

    days: list[UsageDay]  # newest first, zeros included
    purposes: dict[str, Usage]  # the period's totals by purpose
    total: Usage
    budget: LlmBudget
    llm_configured: bool
    chart: Chart

    @property
    def recent_days(self) -> list[UsageDay]:
        """The DAYS_SHOWN latest days with calls, newest first."""
        return [entry for entry in self.days if entry.total.calls][:DAYS_SHOWN]

    @property
    def older_days(self) -> list[UsageDay]:
        """The other days with calls, newest first (folded on the page)."""
        return [entry for entry in self.days if entry.total.calls][DAYS_SHOWN:]


def usage_days(
    *, project: Project, days: int = USAGE_DAYS, now: datetime | None = None
) -> list[UsageDay]:
    """The project's LLM calls on each of the last ``days`` days (UTC), newest first."""
    today = (now or datetime.now(UTC)).astimezone(UTC).date()
    first = today - timedelta(days=days - 1)
    start = datetime.combine(first, datetime.min.time(), tzinfo=UTC)
    rows = (
        LlmCall.objects.filter(project=project, created_at__gte=start)
        .annotate(day=TruncDate("created_at", tzinfo=UTC))
        .order_by()
        .values("day", "purpose")
        .annotate(
            calls=Count("*"),
            prompt=Coalesce(Sum("prompt_tokens"), 0),
            completion=Coalesce(Sum("completion_tokens"), 0),
            failures=Count("id", filter=Q(status=LlmCall.Status.FAILED)),
            retries=Coalesce(Sum(F("attempts") - 1), 0),
        )
    )
    found = {day: UsageDay(day, Usage()) for day in (first + timedelta(n) for n in range(days))}
    for row in rows:
        usage = Usage(
            row["calls"], row["prompt"], row["completion"], row["failures"], row["retries"]
        )
        entry = found[row["day"]]
        entry.by_purpose[row["purpose"]] = usage
        entry.total.add(usage)
    return sorted(found.values(), key=lambda entry: entry.day, reverse=True)


def usage_page(*, project: Project) -> UsagePage:
    """The last USAGE_DAYS days of the project's LLM calls and this month's budget."""
    days = usage_days(project=project)
    purposes: dict[str, Usage] = {}
    total = Usage()
    for entry in days:
        total.add(entry.total)
        for purpose, usage in entry.by_purpose.items():
            purposes.setdefault(purpose, Usage()).add(usage)
    points = [(f"{entry.day:%a %Y-%m-%d}", entry.total.tokens) for entry in reversed(days)]
    return UsagePage(
        days=days,
        purposes=dict(sorted(purposes.items())),
        total=total,
        budget=llm_budget_get(project=project, cached=False),
        llm_configured=bool(settings.LLM.get("BASE_URL")),
        chart=chart_of(
            points, title=f"LLM tokens per day, last {len(days)} days", unit="tokens", period="day"
        ),
    )
