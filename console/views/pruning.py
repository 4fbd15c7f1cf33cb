"""The project's Pruning page: its policies as set, a dry run (counts and ids per
policy, what the purge would erase), a real run queued for a worker (editors only; its
row polls until done) and the history of runs. Workflows in
console.services.pruning_page."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path
from django.views.decorators.http import require_GET, require_POST

from console.paths import PROJECT
from console.services.pruning_page import (
    PURGE_COUNTS,
    dry_run_latest,
    policies_get,
    pruning_dry_run,
    pruning_running,
    pruning_start,
    real_run_latest,
    run_get,
    run_ids,
    runs_page,
)
from console.views.access import ConsoleRequest, project_view
from memories.services.pruning import PruneQueueUnavailable
from memories.services.revisions import Actor

TEMPLATE = "console/pruning.html"


def _context(request: ConsoleRequest, **extra: object) -> dict[str, object]:
    project = request.project
    settings, enabled = policies_get(project=project)
    dry = dry_run_latest(project=project)
    return {
        "project": project,
        "can_edit": request.can_edit,
        "section": "pruning",
        "policies": settings,
        "enabled": enabled,
        "dry": dry,
        "dry_ids": run_ids(project=project, run=dry.run) if dry else [],
        "purge_labels": PURGE_COUNTS,
        "last": real_run_latest(project=project),
        "runs": runs_page(project=project, page=request.GET.get("page")),
        "runs_oob": request.method == "POST",  # the history follows a dry run or a run
        **extra,
    }


def _actor(request: ConsoleRequest) -> Actor:
    return Actor.operator(request.user.get_username())


@project_view()
@require_GET
def pruning(request: ConsoleRequest) -> HttpResponse:
    """The page (``?page=`` of the runs; asked by HTMX, the runs alone, or with
    ``?part=work`` the dry run and run part, which polls while a run is under way)."""
    context = _context(request)
    if request.htmx and not request.htmx.history_restore_request:
        part = "work" if request.GET.get("part") == "work" else "runs"
        return render(request, f"{TEMPLATE}#{part}", context)
    return render(request, TEMPLATE, context)


@project_view()
@require_POST
def pruning_dry(request: ConsoleRequest) -> HttpResponse:
    """Dry-run the policies now (changes no memory: viewers may, as read-only API keys
    may); the page's work part with its counts and ids."""
    pruning_dry_run(project=request.project, actor=_actor(request))
    return render(request, f"{TEMPLATE}#work", _context(request, notice="Dry run done."))


@project_view(edit=True)
@require_POST
def pruning_run(request: ConsoleRequest) -> HttpResponse:
    """Queue a real run (prune, then purge) for a worker, after the confirmation
    (``confirm=yes``); one at a time."""
    project = request.project
    if request.POST.get("confirm") != "yes":
        context = _context(request, error="Nothing was run: confirm first.")
        return render(request, f"{TEMPLATE}#work", context)
    if pruning_running(project=project) is not None:
        context = _context(request, error="A run is under way: wait for it to end.")
        return render(request, f"{TEMPLATE}#work", context)
    try:
        pruning_start(project=project, actor=_actor(request))
    except PruneQueueUnavailable as error:
        return render(request, f"{TEMPLATE}#work", _context(request, error=str(error)))
    context = _context(request, notice="Queued: a worker runs it (this page follows it).")
    return render(request, f"{TEMPLATE}#work", context)


@project_view()
@require_GET
def pruning_run_row(request: ConsoleRequest, run_id: int) -> HttpResponse:
    """One run's row of the history (what a running row polls)."""
    run = run_get(project=request.project, run_id=run_id)
    if run is None:
        raise Http404("No such run.")
    context = {"project": request.project, "item": run, "purge_labels": PURGE_COUNTS}
    return render(request, f"{TEMPLATE}#run-row", context)


urlpatterns: list[URLPattern] = [
    path(f"{PROJECT}pruning/", pruning, name="console-pruning"),
    path(f"{PROJECT}pruning/dry-run/", pruning_dry, name="console-pruning-dry-run"),
    path(f"{PROJECT}pruning/run/", pruning_run, name="console-pruning-run"),
    path(f"{PROJECT}pruning/runs/<int:run_id>/", pruning_run_row, name="console-pruning-row"),
]
