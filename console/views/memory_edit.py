"""Changing what is remembered from the user page: edit a memory in place, pin, forget
(with a confirmation step; to the trash, with an undo), its history and "restore this
version" (recorded with the intent "restore"), and "forget this user" (erased at once).
Every change goes through the API's services as ``Actor.operator(username)``, so it is
validated and recorded the same way.

The memory views answer HTMX with fragments that replace the memory's <article>.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.db import transaction
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.services.user_page import (
    memory_for_console,
    memory_history_get,
    user_summary_get,
)
from console.views.access import ConsoleRequest, project_view
from console.views.user_page import end_user_of
from memories.api.serializers import MemoryUpdateSerializer
from memories.models import EndUser, Memory, MemoryRevision
from memories.services.configuration import project_settings_get
from memories.services.memories import (
    RevisionNotRestorable,
    memory_restore,
    memory_update,
)
from memories.services.revisions import Actor
from memories.services.trash import memories_trash, memories_untrash
from memories.services.users import end_user_delete

PARTIALS = "console/partials"


def _actor(request: ConsoleRequest) -> Actor:
    return Actor.operator(request.user.get_username())


def _memory_of(request: ConsoleRequest, end_user: EndUser, memory_id: Any) -> Memory:
    memory = memory_for_console(
        project=request.project,
        end_user=end_user,
        memory_id=memory_id,
    )
    if memory is None:
        raise Http404("The user has no such memory.")
    return memory


def _row(request: ConsoleRequest, end_user: EndUser, memory_id: Any, **extra: Any) -> HttpResponse:
    """The memory's row as it is now (re-read: a service may have changed it)."""
    memory = _memory_of(request, end_user, memory_id)
    context = _context(request, end_user, memory=memory, **extra)
    if extra.get("show_history"):
        context["history"] = memory_history_get(
            project=request.project,
            memory=memory,
        )
    return render(request, f"{PARTIALS}/memory_row.html", context)


def _context(request: ConsoleRequest, end_user: EndUser, **extra: Any) -> dict[str, Any]:
    return {
        "project": request.project,
        "can_edit": request.can_edit,
        "end_user": end_user,
        "section": "users",  # the project's tab to mark
        **extra,
    }


@project_view()
@require_GET
def memory_row(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """One memory's row (the edit form's Cancel, a confirmation's Cancel)."""
    return _row(request, end_user_of(request, user_id), memory_id)


@project_view()
@require_GET
def memory_embedding(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """The memory's embedding status badge; it asks again while the status is pending."""
    memory = _memory_of(request, end_user_of(request, user_id), memory_id)
    return render(request, f"{PARTIALS}/memory_embedding.html", {"memory": memory, "watch": True})


class MemoryEditForm(forms.Form):
    """The text fields of an edit; the API's serializer checks the values after."""

    content = forms.CharField(strip=False, widget=forms.Textarea(attrs={"rows": 4}))
    metadata = forms.CharField(
        required=False,
        strip=False,
        label="metadata (a JSON object)",
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
    )
    importance = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        widget=forms.NumberInput(attrs={"step": "0.05", "min": "0", "max": "1"}),
    )

    def clean_metadata(self) -> dict[str, Any]:
        text = self.cleaned_data["metadata"].strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(
                f"Not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})."
            ) from None
        except RecursionError:  # the parser's stack, on JSON nested thousands deep
            raise forms.ValidationError("Nested too deep to read.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('Must be a JSON object, such as {"topic": "pets"}.')
        return value

    def changes(self, memory: Memory) -> dict[str, Any] | None:
        """The validated changes, or None with the errors added to the fields. The
        values pass the API's own checks (length, size, null characters)."""
        if not self.is_valid():
            return None
        data = MemoryUpdateSerializer(data=self.cleaned_data, context={"kind": memory.kind})
        if data.is_valid():
            return dict(data.validated_data)
        for name, errors in data.errors.items():
            self.add_error(name if name in self.fields else None, list(errors))
        return None


def _edit_initial(memory: Memory) -> dict[str, Any]:
    metadata = json.dumps(memory.metadata, indent=2, ensure_ascii=False, sort_keys=True)
    return {"content": memory.content, "metadata": metadata, "importance": memory.importance}


@project_view(edit=True)
@require_http_methods(["GET", "POST"])
def memory_edit(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """GET: the edit form in the row's place. POST: save through memory_update (new text
    is re-embedded) and show the row, or the form with its errors in place (422)."""
    end_user = end_user_of(request, user_id)
    memory = _memory_of(request, end_user, memory_id)
    if request.method == "GET":
        form = MemoryEditForm(initial=_edit_initial(memory))
    else:
        form = MemoryEditForm(request.POST)
        changes = form.changes(memory)
        if changes is not None:
            memory_update(memory=memory, changes=changes, actor=_actor(request))
            return _row(request, end_user, memory.pk, notice="Saved.", watch=True)
    context = _context(request, end_user, memory=memory, form=form)
    # 422: the form with its errors (base.html has htmx swap a 422 like a 200)
    status = 422 if form.is_bound else 200
    return render(request, f"{PARTIALS}/memory_form.html", context, status=status)


@project_view(edit=True)
@require_POST
def memory_pin(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """Pin (``pinned=true``) or unpin (``pinned=false``) the memory."""
    end_user = end_user_of(request, user_id)
    memory = _memory_of(request, end_user, memory_id)
    pinned = request.POST.get("pinned")
    if pinned not in ("true", "false"):
        return HttpResponse("pinned must be true or false", status=400)
    memory_update(memory=memory, changes={"pinned": pinned == "true"}, actor=_actor(request))
    return _row(request, end_user, memory.pk, notice="Pinned." if pinned == "true" else "Unpinned.")


@project_view(edit=True)
@require_http_methods(["GET", "POST"])
def memory_forget(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """GET, or a POST without ``confirm=yes``: the confirmation in the row's place.
    POST with it: move it to the trash (memories_trash, recorded; erased after the
    project's pruning.trash_days) and say so, with an undo."""
    end_user = end_user_of(request, user_id)
    memory = _memory_of(request, end_user, memory_id)
    days = project_settings_get(project=request.project).pruning.trash_days
    context = _context(request, end_user, memory=memory, trash_days=days)
    if request.method == "POST" and request.POST.get("confirm") == "yes":
        memories_trash(project=request.project, ids=[memory.pk], actor=_actor(request))
        return render(request, f"{PARTIALS}/memory_forgotten.html", context)
    return render(request, f"{PARTIALS}/memory_confirm.html", context)


@project_view(edit=True)
@require_POST
def memory_undo(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """Take a forgotten memory out of the trash (memories_untrash: the status it had,
    recorded as an undo); the row again."""
    end_user = end_user_of(request, user_id)
    memory = _memory_of(request, end_user, memory_id)
    restored = memories_untrash(project=request.project, ids=[memory.pk], actor=_actor(request))
    notice = "Back from the trash." if restored else "It was not in the trash."
    return _row(request, end_user, memory.pk, notice=notice)


@project_view()
@require_GET
def memory_history(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """The memory's revisions, newest first: who, when, what changed; a restore button
    on each earlier version (for editors)."""
    end_user = end_user_of(request, user_id)
    memory = _memory_of(request, end_user, memory_id)
    history = memory_history_get(
        project=request.project,
        memory=memory,
    )
    context = _context(request, end_user, memory=memory, history=history)
    return render(request, f"{PARTIALS}/memory_history.html", context)


@project_view(edit=True)
@require_POST
def memory_restore_view(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """Restore the version after revision ``revision`` (content, metadata, importance)
    through memory_restore, recorded as this operator's update."""
    end_user = end_user_of(request, user_id)
    memory = _memory_of(request, end_user, memory_id)
    revision = get_object_or_404(
        MemoryRevision.objects.filter(project=request.project),
        pk=_int(request.POST.get("revision")),
    )
    try:
        memory_restore(memory=memory, revision=revision, actor=_actor(request))
    except RevisionNotRestorable as error:
        return HttpResponse(str(error), status=400)
    return _row(request, end_user, memory.pk, notice="Restored.", watch=True, show_history=True)


def _int(raw: str | None) -> int:
    try:
        return int(raw or "")
    except ValueError:
        raise Http404("No such revision.") from None


@project_view(edit=True)
@require_http_methods(["GET", "POST"])
def user_forget(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """GET: what forgetting the user deletes (her memories by kind). POST with
    ``confirm=yes``: delete the user and everything of hers through end_user_delete
    (each memory's deletion recorded), then what was deleted."""
    project = request.project
    end_user = end_user_of(request, user_id)
    confirmed = request.method == "POST" and request.POST.get("confirm") == "yes"
    with transaction.atomic():
        # counted in the deleting transaction: the report says exactly what went
        summary = user_summary_get(project=project, end_user=end_user)
        receipt = end_user_delete(end_user=end_user, actor=_actor(request)) if confirmed else None
    context = _context(
        request,
        end_user,
        summary=summary,
        deleted=receipt.counts["memories"] if receipt else 0,
        erased=receipt.as_dict() if receipt else {},
        done=confirmed,
        unconfirmed=request.method == "POST" and not confirmed,
    )
    return render(request, "console/user_forget.html", context)
