"""The operators' dashboard (overview; the full dashboard is its own issue)."""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from memories.models import Memory, Project
from memories.services.workers import worker_heartbeats


def home(request: HttpRequest) -> HttpResponse:
    return redirect("dashboard")


@staff_member_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """Projects with their memory counts, the embedding backlog and the live workers."""
    projects = Project.objects.annotate(
        memory_count=Count("memories", distinct=True),
        users=Count("end_users", distinct=True),
        pending=Count(
            "memories", filter=Q(memories__embedding_status=Memory.EmbeddingStatus.PENDING)
        ),
    ).order_by("name")
    try:
        workers = worker_heartbeats()
        redis_error = ""
    except Exception as exc:  # noqa: BLE001 - shown to the operator
        workers, redis_error = [], str(exc)
    return render(
        request,
        "memories/dashboard.html",
        {"projects": projects, "workers": workers, "redis_error": redis_error},
    )
