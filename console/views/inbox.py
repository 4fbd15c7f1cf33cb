"""The project's review inbox (``facts.review``): the proposals the fact workers
extracted, the oldest first, each accepted, edited then accepted, or rejected in one
click (its row answers in place), or many at once. Every change goes through
synopsis/services/fact_review.py as the operator, recorded with the intent "review".
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django import forms
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import URLPattern, path
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.paths import PROJECT
from console.services.inbox import (
    ProposalView,
    inbox_count,
    inbox_page,
    proposal_view,
    review_on,
)
from console.views.access import ConsoleRequest, project_view
from memories.api.serializers import MemoryUpdateSerializer
from memories.models import Memory
from memories.services.configuration import project_settings_get
from memories.services.revisions import Actor
from synopsis.services.fact_review import (
    BULK_MAX,
    proposal_accept,
    proposals_accept,
    proposals_reject,
)

TEMPLATE = "console/inbox.html"
ROWS = "console/inbox"
ROW_URL = f"{PROJECT}review/<uuid:memory_id>/"


def _actor(request: ConsoleRequest) -> Actor:
    return Actor.operator(request.user.get_username())


def _context(request: ConsoleRequest, **extra: Any) -> dict[str, Any]:
    return {
        "project": request.project,
        "can_edit": request.can_edit,
        "section": "inbox",
        "review_on": review_on(project=request.project),
        "trash_days": project_settings_get(project=request.project).pruning.trash_days,
        "bulk_max": BULK_MAX,
        **extra,
    }


def _counted(request: ConsoleRequest, response: HttpResponse, count: int) -> HttpResponse:
    """The response tells the page the count for its title (the event inboxCount)."""
    title = f"{request.project.name}: review ({count}) · MemoryHub"  # base.html's form
    response["HX-Trigger"] = json.dumps({"inboxCount": {"count": count, "title": title}})
    return response


def _render_list(request: ConsoleRequest, **extra: Any) -> HttpResponse:
    inbox = inbox_page(project=request.project, page=request.GET.get("page"))
    context = _context(request, inbox=inbox, **extra)
    if request.htmx and not request.htmx.history_restore_request:
        response = render(request, f"{TEMPLATE}#inbox-list", context)
        return _counted(request, response, inbox.count)
    return render(request, TEMPLATE, context)


@project_view()
@require_GET
def inbox(request: ConsoleRequest) -> HttpResponse:
    """The pending proposals across users, the oldest first (``?page=``)."""
    return _render_list(request)


def _proposal(request: ConsoleRequest, memory_id: uuid.UUID) -> ProposalView:
    item = proposal_view(project=request.project, memory_id=memory_id)
    if item is None:
        raise Http404("The project has no such proposal.")
    return item


def _row(
    request: ConsoleRequest, memory_id: uuid.UUID, status: int = 200, **extra: Any
) -> HttpResponse:
    """The proposal's row as it is now, with the inbox's count (out of band)."""
    if not request.htmx:  # a plain form post: back to the list
        return redirect("console-inbox", project_id=request.project.pk)
    count = inbox_count(project=request.project)
    context = _context(request, item=_proposal(request, memory_id), count=count, **extra)
    response = render(request, f"{ROWS}/row.html", context, status=status)
    return _counted(request, response, count)


@project_view()
@require_GET
def inbox_row(request: ConsoleRequest, memory_id: uuid.UUID) -> HttpResponse:
    """One proposal's row (the edit form's Cancel)."""
    return _row(request, memory_id)


def _waiting(request: ConsoleRequest, memory_id: uuid.UUID) -> bool:
    """Whether it is still a proposal (404 if it is none of the project's)."""
    return _proposal(request, memory_id).memory.status == Memory.Status.PROPOSED


@project_view(edit=True)
@require_POST
def inbox_accept(request: ConsoleRequest, memory_id: uuid.UUID) -> HttpResponse:
    """Accept it: active, or merged into the fact it repeats (which is reinforced)."""
    if not _waiting(request, memory_id):
        return _row(request, memory_id, row_notice="No longer waiting: decided meanwhile.")
    fact = proposal_accept(project=request.project, memory_id=memory_id, actor=_actor(request))
    return _row(request, memory_id, held=fact if fact and fact.pk != memory_id else None)


@project_view(edit=True)
@require_POST
def inbox_reject(request: ConsoleRequest, memory_id: uuid.UUID) -> HttpResponse:
    """Reject it: to the trash; the extractor does not propose these words again."""
    if not _waiting(request, memory_id):
        return _row(request, memory_id, row_notice="No longer waiting: decided meanwhile.")
    proposals_reject(project=request.project, ids=[memory_id], actor=_actor(request))
    return _row(request, memory_id)


class ProposalEditForm(forms.Form):
    """What an operator may correct before accepting; the API's serializer checks the
    values after (length, null characters, the structured fields of the kind)."""

    content = forms.CharField(strip=False, widget=forms.Textarea(attrs={"rows": 2}))
    confidence = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        widget=forms.NumberInput(attrs={"step": "0.05", "min": "0", "max": "1"}),
    )
    value = forms.CharField(required=False, max_length=255, label="slot value")

    def changes(self, memory: Memory) -> dict[str, Any] | None:
        """The validated changes, or None with the errors added to the fields."""
        if not self.is_valid():
            return None
        data: dict[str, Any] = {
            "content": self.cleaned_data["content"],
            "confidence": self.cleaned_data["confidence"],
        }
        if memory.content_json.get("slot"):
            data["content_json"] = {**memory.content_json, "value": self.cleaned_data["value"]}
        checked = MemoryUpdateSerializer(data=data, context={"kind": memory.kind})
        if checked.is_valid():
            return dict(checked.validated_data)
        for name, errors in checked.errors.items():
            field = "value" if name == "content_json" else name
            self.add_error(field if field in self.fields else None, list(errors))
        return None


def _edit_initial(memory: Memory) -> dict[str, Any]:
    return {
        "content": memory.content,
        "confidence": memory.confidence,
        "value": memory.content_json.get("value", ""),
    }


@project_view(edit=True)
@require_http_methods(["GET", "POST"])
def inbox_edit(request: ConsoleRequest, memory_id: uuid.UUID) -> HttpResponse:
    """GET: the edit form in the row's place. POST: save (recorded as the review's
    edit) and accept, then the row; or the form with its errors in place (422),
    nothing changed."""
    item = _proposal(request, memory_id)
    if item.memory.status != Memory.Status.PROPOSED:
        return _row(request, memory_id, row_notice="No longer waiting: decided meanwhile.")
    form = ProposalEditForm(
        request.POST if request.method == "POST" else None, initial=_edit_initial(item.memory)
    )
    if request.method == "POST":
        changes = form.changes(item.memory)
        if changes is not None:
            fact = proposal_accept(
                project=request.project,
                memory_id=memory_id,
                actor=_actor(request),
                changes=changes,
            )
            held = fact if fact and fact.pk != memory_id else None
            return _row(request, memory_id, held=held, edited=True)
    context = _context(request, item=item, form=form)
    status = 422 if form.errors else 200
    return render(request, f"{ROWS}/edit_row.html", context, status=status)


def _selected(request: ConsoleRequest) -> tuple[list[uuid.UUID], str]:
    """The ``ids`` posted (valid UUIDs, at most BULK_MAX) and an error if any."""
    raw = request.POST.getlist("ids")
    if not raw:
        return [], "ids: select at least one proposal."
    if len(raw) > BULK_MAX:
        return [], f"ids: at most {BULK_MAX} at once."
    try:
        return [uuid.UUID(value) for value in raw], ""
    except ValueError:
        return [], "ids: not a proposal id."


@project_view(edit=True)
@require_POST
def inbox_bulk(request: ConsoleRequest) -> HttpResponse:
    """Accept or reject (``action``) the selected proposals; the list answers."""
    action = request.POST.get("action")
    if action not in ("accept", "reject"):
        return _render_list(request, error="action: accept or reject.")
    ids, error = _selected(request)
    if error:
        return _render_list(request, error=error)
    actor = _actor(request)
    if action == "accept":
        done = proposals_accept(project=request.project, ids=ids, actor=actor)
        notice = f"{done} accepted."
    else:
        done = proposals_reject(project=request.project, ids=ids, actor=actor)
        notice = f"{done} rejected (in the trash)."
    if done < len(ids):
        notice += f" {len(ids) - done} were no longer waiting."
    return _render_list(request, notice=notice)


urlpatterns: list[URLPattern] = [
    path(f"{PROJECT}review/", inbox, name="console-inbox"),
    path(f"{PROJECT}review/bulk/", inbox_bulk, name="console-inbox-bulk"),
    path(ROW_URL, inbox_row, name="console-inbox-row"),
    path(f"{ROW_URL}accept/", inbox_accept, name="console-inbox-accept"),
    path(f"{ROW_URL}reject/", inbox_reject, name="console-inbox-reject"),
    path(f"{ROW_URL}edit/", inbox_edit, name="console-inbox-edit"),
]
