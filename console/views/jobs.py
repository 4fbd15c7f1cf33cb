"""The project's Jobs page: what each worker runs and for how long, each queue's depth
and oldest task, the project's own backlog (polled every 5 s), its parked tasks with a
Retry button for editors, its maintenance runs and its throughput per hour
(console.services.jobs)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import URLPattern, path
from django.views.decorators.http import require_POST

from console.paths import PROJECT
from console.services.jobs import (
    CursorRefused,
    maintenance_runs,
    parked_of,
    parked_page,
    project_backlog,
    throughput_charts,
)
from console.services.overview import workers_health
from console.views.access import ConsoleRequest, project_view
from memories.services.parking import parked_task_retry
from synopsis.services.llm_budget import llm_budget_get

LIVE_PART = "live"  # ?part=: the workers, queues and backlog alone (the HTMX poll)
PARKED_PART = "parked"  # ?part=: the parked tasks' list alone (its filter and pages)


def _live_context(request: ConsoleRequest) -> dict[str, Any]:
    health, redis_error = workers_health()
    return {
        "health": health,
        "redis_error": redis_error,
        "backlog": project_backlog(project=request.project),
        "show_inputs": request.user.is_superuser,
        "live_part": LIVE_PART,
    }


def _parked_context(request: ConsoleRequest) -> dict[str, Any]:
    status, after = request.GET.get("status", ""), request.GET.get("after", "")
    try:
        page = parked_page(project=request.project, status=status, after=after)
        error = ""
    except CursorRefused as refused:
        page, error = parked_page(project=request.project, status=status), str(refused)
    return {"parked": page, "parked_error": error, "parked_part": PARKED_PART}


@project_view()
def jobs(request: ConsoleRequest) -> HttpResponse:
    """Workers, queues, backlog, parked tasks, maintenance runs, throughput."""
    part = request.GET.get("part") if request.htmx else None
    if part == LIVE_PART:
        return render(request, "console/jobs.html#live", _live_context(request))
    if part == PARKED_PART:
        return render(request, "console/jobs.html#parked", _parked_context(request))
    embedded, mined, facts = throughput_charts(project=request.project)
    context = {
        **_live_context(request),
        **_parked_context(request),
        "runs": maintenance_runs(project=request.project),
        "embedded_chart": embedded,
        "mined_chart": mined,
        "facts_created": facts,
        "budget": llm_budget_get(project=request.project),  # the 30 s cached sum
        "section": "jobs",
    }
    return render(request, "console/jobs.html", context)


@require_POST
@project_view(edit=True)
def parked_retry(request: ConsoleRequest, parked_id: int) -> HttpResponse:
    """Send a parked task of the project again, as recorded (its attempts start over)."""
    parked = parked_of(project=request.project, parked_id=parked_id)
    if parked is None:
        raise Http404("No such parked task in this project.")
    sent = parked_task_retry(parked=parked, operator=request.user.get_username())
    if not request.htmx:
        return redirect("console-jobs", project_id=request.project.pk)
    parked.refresh_from_db()
    context = {"task": parked, "sent": sent, "retry_failed": not sent}
    return render(request, "console/jobs/parked_row.html", context)


urlpatterns: list[URLPattern] = [
    path(f"{PROJECT}jobs/", jobs, name="console-jobs"),
    path(f"{PROJECT}jobs/parked/<int:parked_id>/retry/", parked_retry, name="console-jobs-retry"),
]
