"""The project's embedding model in the console: which one it uses, a switch to another
started, followed (the card polls itself while a switch runs) and cancelled, through the
same services as the API (memories/services/embedding_switch.py)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from console.views.access import ConsoleRequest, project_view
from memories.models import EmbeddingSwitch
from memories.services.embedding_spaces import choice_of, model_choices, project_space_read
from memories.services.embedding_switch import (
    SwitchRefused,
    embedding_switch_cancel,
    embedding_switch_start,
    last_switch,
    switch_progress,
)
from memories.services.revisions import Actor


def embedding_card_context(request: ConsoleRequest, *, error: str = "") -> dict[str, Any]:
    """What the card shows: the model in use, the others, the last switch's progress."""
    project = request.project
    space = project_space_read(project.pk)
    last = last_switch(project)
    switch = switch_progress(last) if last is not None else None
    current = choice_of(space)
    return {
        "embedding": {
            "model": current,
            "dimension": space.dimension,
            "choices": [c for c in model_choices().values() if c.key != current],
            "switch": switch,
            "percent": _percent(switch),
            "running": bool(switch and switch["status"] == EmbeddingSwitch.Status.RUNNING),
            "error": error,
        }
    }


def _percent(switch: dict[str, Any] | None) -> int | None:
    if switch is None or not switch["total"]:
        return None
    return min(100, round(100 * switch["done"] / switch["total"]))


@project_view()
def project_embedding(request: ConsoleRequest) -> HttpResponse:
    """The card alone (its own polling while a switch runs)."""
    return render(request, "console/partials/embedding.html", embedding_card_context(request))


@require_POST
@project_view(edit=True)
def project_embedding_switch(request: ConsoleRequest) -> HttpResponse:
    """Start a switch to the model posted (``model``), or cancel the running one
    (``cancel``); the card again, with the refusal's reason if refused (422)."""
    actor = Actor.operator(request.user.get_username())
    try:
        if "cancel" in request.POST:
            embedding_switch_cancel(project=request.project, actor=actor)
        else:
            model = request.POST.get("model", "")
            embedding_switch_start(project=request.project, model=model, actor=actor)
    except SwitchRefused as refused:
        context = embedding_card_context(request, error=str(refused))
        return render(request, "console/partials/embedding.html", context, status=422)
    return render(request, "console/partials/embedding.html", embedding_card_context(request))
