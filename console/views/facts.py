"""A user's Facts tab: her facts, relationships and goals grouped by kind, with their
confidence, structured fields, source turn and superseded chain; filters (kind,
status, text); edit the confidence and structured fields, mark a goal done, forget
(to the trash, with an undo). Every change goes through memories.services as
``Actor.operator(username)``. Reads: console/services/facts_page.py.

A fact's views answer HTMX with its <article> (console/facts/fact_row.html).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from console.paths import USER
from console.services.facts_page import (
    FACT_KINDS,
    FACT_STATUSES,
    STRUCTURED_FIELDS,
    FactFilters,
    fact_changes_validate,
    fact_for_console,
    facts_page,
    facts_views,
    goal_done_set,
)
from console.views.access import ConsoleRequest, project_view
from memories.models import EndUser, Memory
from memories.services.configuration import project_settings_get
from memories.services.memories import memory_update
from memories.services.revisions import Actor
from memories.services.trash import memories_trash, memories_untrash
from memories.structured import FACT_CATEGORIES, GOAL_STATUSES, MAX_TERM

TEMPLATE = "console/user_facts.html"
ROW = "console/facts/fact_row.html"
FORM = "console/facts/fact_form.html"


def _end_user(request: ConsoleRequest, user_id: int) -> EndUser:
    return get_object_or_404(EndUser.objects.for_project(request.project), pk=user_id)


def _actor(request: ConsoleRequest) -> Actor:
    return Actor.operator(request.user.get_username())


class FactFilterForm(forms.Form):
    kind = forms.ChoiceField(
        choices=[("", "any kind"), *((k.value, k.value) for k in FACT_KINDS)], required=False
    )
    status = forms.ChoiceField(
        choices=[*((s.value, s.value) for s in FACT_STATUSES), ("", "any status")],
        required=False,
    )
    q = forms.CharField(required=False, max_length=200, label="text")

    def filters(self) -> FactFilters:
        """The valid filters; a bad field falls back to its default (and is shown)."""
        if not self.is_bound:
            return FactFilters()
        data = self.cleaned_data if self.is_valid() else {}
        status = data.get("status", Memory.Status.ACTIVE) if "status" in self.data else "active"
        return FactFilters(
            kind=data.get("kind", ""), status=status, text=(data.get("q") or "").strip()
        )


def _context(request: ConsoleRequest, end_user: EndUser, **extra: Any) -> dict[str, Any]:
    ids = [request.project.pk, end_user.pk]
    return {
        # a row's URLs are these plus its ids (FACT below): reversed once, not per row
        "facts_base": reverse("console-user-facts", args=ids),
        "rooms_base": reverse("console-user-rooms", args=ids),
        "project": request.project,
        "can_edit": request.can_edit,
        "end_user": end_user,
        "section": "users",
        "user_tab": "facts",
        **extra,
    }


@project_view()
@require_GET
@vary_on_headers("HX-Request")
def user_facts(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """The tab; asked by HTMX (a filter, a page), the list alone."""
    end_user = _end_user(request, user_id)
    # unbound: the default filter (active), shown as such in its select
    form = FactFilterForm(request.GET or None, initial={"status": Memory.Status.ACTIVE})
    facts = facts_page(
        project=request.project,
        end_user=end_user,
        filters=form.filters(),
        page=request.GET.get("page"),
    )
    context = _context(request, end_user, filter_form=form, facts=facts)
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, f"{TEMPLATE}#facts-list", context)
    return render(request, TEMPLATE, context)


def _fact(request: ConsoleRequest, end_user: EndUser, memory_id: Any) -> Memory:
    memory = fact_for_console(project=request.project, end_user=end_user, memory_id=memory_id)
    if memory is None:
        raise Http404("The user has no such fact, relationship or goal.")
    return memory


def _row(request: ConsoleRequest, end_user: EndUser, memory_id: Any, **extra: Any) -> HttpResponse:
    """The fact's <article> as it is now (re-read: a service changed it)."""
    memory = _fact(request, end_user, memory_id)
    [fact] = facts_views(project=request.project, memories=[memory])
    return render(request, ROW, _context(request, end_user, fact=fact, **extra))


@project_view()
@require_GET
def fact_row(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """One fact's row (the edit form's Cancel)."""
    return _row(request, _end_user(request, user_id), memory_id)


class FactEditForm(forms.Form):
    """A fact's confidence and its kind's structured fields; the API's serializer
    checks the values after (memories.structured)."""

    confidence = forms.FloatField(
        min_value=0.0,
        max_value=1.0,
        widget=forms.NumberInput(attrs={"step": "0.05", "min": "0", "max": "1"}),
    )

    def __init__(self, *args: Any, kind: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind
        for name in STRUCTURED_FIELDS.get(kind, ()):
            self.fields[name] = _structured_field(kind, name)

    def values(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        if data.get("due"):
            data["due"] = data["due"].isoformat()
        return data


def _structured_field(kind: str, name: str) -> forms.Field:
    if name == "category":
        choices = [("", "(none)"), *((c, c) for c in FACT_CATEGORIES)]
        return forms.ChoiceField(choices=choices, required=False)
    if name == "status":
        return forms.ChoiceField(choices=[(s, s) for s in GOAL_STATUSES])
    if name == "due":
        return forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    required = kind == Memory.Kind.RELATIONSHIP  # a relationship needs all three
    return forms.CharField(required=required, max_length=MAX_TERM)


def _edit_initial(memory: Memory) -> dict[str, Any]:
    data = memory.content_json or {}
    initial: dict[str, Any] = {"confidence": round(memory.confidence, 4)}
    for name in STRUCTURED_FIELDS.get(memory.kind, ()):
        initial[name] = data.get(name) or ""
    return initial


@project_view(edit=True)
@require_http_methods(["GET", "POST"])
def fact_edit(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """GET: the edit form in the row's place. POST: save through memory_update and show
    the row, or the form with its errors in place (422, nothing changed)."""
    end_user = _end_user(request, user_id)
    memory = _fact(request, end_user, memory_id)
    if request.method == "GET":
        form = FactEditForm(initial=_edit_initial(memory), kind=memory.kind)
    else:
        form = FactEditForm(request.POST, kind=memory.kind)
        if form.is_valid():
            changes, errors = fact_changes_validate(memory=memory, values=form.values())
            for name, messages in errors.items():
                form.add_error(name if name in form.fields else None, messages)
            if not errors:
                memory_update(memory=memory, changes=changes, actor=_actor(request))
                return _row(request, end_user, memory.pk, notice="Saved.")
    context = _context(request, end_user, memory=memory, form=form)
    return render(request, FORM, context, status=422 if form.is_bound else 200)


@project_view(edit=True)
@require_POST
def fact_goal(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """Mark a goal done (``done=yes``) or open again (``done=no``)."""
    end_user = _end_user(request, user_id)
    memory = _fact(request, end_user, memory_id)
    done = request.POST.get("done")
    if memory.kind != Memory.Kind.GOAL:
        return HttpResponse("kind: only a goal can be marked done.", status=400)
    if done not in ("yes", "no"):
        return HttpResponse("done: must be yes or no.", status=400)
    goal_done_set(memory=memory, done=done == "yes", actor=_actor(request))
    notice = "Marked done." if done == "yes" else "Open again."
    return _row(request, end_user, memory.pk, notice=notice)


@project_view(edit=True)
@require_POST
def fact_forget(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """Move it to the trash (memories_trash: out of contexts, erased after the project's
    pruning.trash_days), with an undo in its row."""
    end_user = _end_user(request, user_id)
    memory = _fact(request, end_user, memory_id)
    memories_trash(project=request.project, ids=[memory.pk], actor=_actor(request))
    days = project_settings_get(project=request.project).pruning.trash_days
    return _row(request, end_user, memory.pk, forgotten=True, trash_days=days)


@project_view(edit=True)
@require_POST
def fact_undo(request: ConsoleRequest, user_id: int, memory_id: Any) -> HttpResponse:
    """Take it out of the trash (the status it had, recorded as an undo)."""
    end_user = _end_user(request, user_id)
    memory = _fact(request, end_user, memory_id)
    restored = memories_untrash(project=request.project, ids=[memory.pk], actor=_actor(request))
    notice = "Back from the trash." if restored else "It was not in the trash."
    return _row(request, end_user, memory.pk, notice=notice)


FACT = f"{USER}facts/<uuid:memory_id>/"

urlpatterns: list[URLPattern] = [
    path(f"{USER}facts/", user_facts, name="console-user-facts"),
    path(FACT, fact_row, name="console-user-fact"),
    path(f"{FACT}edit/", fact_edit, name="console-user-fact-edit"),
    path(f"{FACT}goal/", fact_goal, name="console-user-fact-goal"),
    path(f"{FACT}forget/", fact_forget, name="console-user-fact-forget"),
    path(f"{FACT}undo/", fact_undo, name="console-user-fact-undo"),
]
