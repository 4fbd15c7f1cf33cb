"""The user page's panels on what is built from her memories: the synopsis (both parts,
their freshness; editors edit, lock, unlock and ask for a refresh) and the context
preview (exactly what an agent would get for a query, and why).

Each panel is a tab of the user's page (its URL, console/user_panel_tab.html) and answers
HTMX with the panel alone (templates/console/partials/panel_*.html): the overview loads
the synopsis into its slot, a form inside a panel replaces it. Changes go through
the services the API uses, recorded as ``Actor.operator(username)``. The preview calls
``context_build`` with ``record_access=False``: an operator looking is not an agent
using the memories, so nothing counts as an access or towards the user's savings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django import forms
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.services.user_page import user_recent_rooms, user_room_find
from console.views.access import ConsoleRequest, project_view
from console.views.user_page import end_user_of
from memories.api.context import MAX_TOKENS, MIN_TOKENS
from memories.models import EndUser, Room, Synopsis
from memories.models.synopsis import PARTS
from memories.providers.tokens import ENCODINGS
from memories.services.configuration import project_settings_get
from memories.services.context import ContextResult, context_build
from memories.services.context.fitting import SECTIONS
from memories.services.revisions import Actor
from memories.services.synopsis import (
    MAX_TEXT_CHARS,
    SynopsisError,
    SynopsisUnavailable,
    SynopsisView,
    synopsis_get,
    synopsis_part_edit,
    synopsis_part_lock,
    synopsis_refresh_request,
    synopsis_view,
)

PARTIALS = "console/partials"
SYNOPSIS = f"{PARTIALS}/panel_synopsis.html"
CONTEXT = f"{PARTIALS}/panel_context.html"
# the preview's size stays bounded: a section lists its best few dropped candidates
# (a user with thousands of memories drops thousands), the rest as a count
DROPPED_SHOWN = 5
REFRESH_WAIT_SECONDS = 120  # how long the panel polls for a refreshed synopsis
QUERY_MAX_CHARS = 2_000  # asked by GET: the query string stays under MAX_QUERY_BYTES


def _actor(request: ConsoleRequest) -> Actor:
    return Actor.operator(request.user.get_username())


def _base(request: ConsoleRequest, end_user: EndUser, **extra: Any) -> dict[str, Any]:
    return {
        "project": request.project,
        "can_edit": request.can_edit,
        "end_user": end_user,
        **extra,
    }


# --- the synopsis ----------------------------------------------------------------------


def _panel(
    request: ConsoleRequest, template: str, context: dict[str, Any], *, tab: str, status: int = 200
) -> HttpResponse:
    """The panel alone for HTMX, else the user's tab page around it."""
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, template, context, status=status)
    page = {**context, "user_tab": tab, "section": "users", "panel_template": template}
    return render(request, "console/user_panel_tab.html", page, status=status)


def _duration(seconds: float) -> str:
    """A TTL for reading: '7 days', '1 hour', '30 minutes'."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = round(seconds / size, 1)
            text = f"{count:g}"
            return f"{text} {unit}{'' if text == '1' else 's'}"
    return f"{seconds:g} seconds"


class SynopsisPartForm(forms.Form):
    text = forms.CharField(
        required=False,
        strip=False,
        max_length=MAX_TEXT_CHARS,
        widget=forms.Textarea(attrs={"rows": 5}),
    )
    lock = forms.BooleanField(required=False, initial=True, label="Lock it against regeneration")


def _synopsis_panel(
    request: ConsoleRequest,
    end_user: EndUser,
    *,
    row: Synopsis | None = None,
    status: int = 200,
    **extra: Any,
) -> HttpResponse:
    """The synopsis panel: ``row`` as just written, else as an agent would read it now
    (from the cache; this read queues no regeneration)."""
    view: SynopsisView
    if row is not None:
        config = project_settings_get(project=end_user.project).synopsis
        view = synopsis_view(synopsis=row, config=config)
    else:
        view = synopsis_get(end_user=end_user, refresh_on_access=False)
    context = _base(
        request,
        end_user,
        synopsis=view,
        ttls={part.part: _duration(part.ttl_seconds) for part in view.parts},
        **extra,
    )
    return _panel(request, SYNOPSIS, context, tab="synopsis", status=status)


def _part(part: str) -> str:
    if part not in PARTS:
        raise Http404("No such synopsis part.")
    return part


@project_view()
@require_GET
def user_synopsis(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """The synopsis panel: both parts with their freshness against the project's TTLs.
    ``?since=<epoch seconds>`` (a refresh asked then): the panel keeps polling until a
    part was generated after it, or REFRESH_WAIT_SECONDS passed."""
    end_user = end_user_of(request, user_id)
    since = _epoch(request.GET.get("since"))
    if since is None:
        return _synopsis_panel(request, end_user)
    view = synopsis_get(end_user=end_user, refresh_on_access=False)
    written = [p.generated_at.timestamp() for p in view.parts if p.generated_at is not None]
    waiting = not any(stamp > since for stamp in written)
    if waiting and time.time() - since < REFRESH_WAIT_SECONDS:
        return _synopsis_panel(request, end_user, refreshing=True, since=int(since))
    notice = "" if not waiting else "No new version yet: the worker may be busy; look again later."
    return _synopsis_panel(request, end_user, notice=notice)


def _epoch(raw: str | None) -> float | None:
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


@project_view(edit=True)
@require_http_methods(["GET", "POST"])
def user_synopsis_edit(request: ConsoleRequest, user_id: int, part: str) -> HttpResponse:
    """GET: the panel with the part's edit form. POST: save the text through
    synopsis_part_edit (recorded; locked unless ``lock`` is unticked), or the form
    with its errors in place (422)."""
    end_user = end_user_of(request, user_id)
    part = _part(part)
    if request.method == "GET":
        current = getattr(synopsis_get(end_user=end_user, refresh_on_access=False), part)
        form = SynopsisPartForm(initial={"text": current.text, "lock": True})
        return _synopsis_panel(request, end_user, editing=part, form=form)
    form = SynopsisPartForm(request.POST)
    if form.is_valid():
        try:
            row = synopsis_part_edit(
                end_user=end_user,
                part=part,
                text=form.cleaned_data["text"],
                actor=_actor(request),
                lock=form.cleaned_data["lock"],
            )
        except SynopsisError as error:
            for messages in error.errors.values():
                form.add_error("text", messages)
        else:
            locked = " and locked" if form.cleaned_data["lock"] else ""
            notice = f"The {part} part is saved{locked}."
            return _synopsis_panel(request, end_user, row=row, notice=notice)
    return _synopsis_panel(request, end_user, editing=part, form=form, status=422)


@project_view(edit=True)
@require_POST
def user_synopsis_lock(request: ConsoleRequest, user_id: int, part: str) -> HttpResponse:
    """Lock (``locked=true``) or unlock (``locked=false``) a part; recorded."""
    end_user = end_user_of(request, user_id)
    part = _part(part)
    locked = request.POST.get("locked")
    if locked not in ("true", "false"):
        return HttpResponse("locked must be true or false", status=400)
    row = synopsis_part_lock(
        end_user=end_user, part=part, locked=locked == "true", actor=_actor(request)
    )
    state = "locked" if locked == "true" else "unlocked: it is regenerated once stale"
    return _synopsis_panel(request, end_user, row=row, notice=f"The {part} part is {state}.")


@project_view(edit=True)
@require_POST
def user_synopsis_refresh(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """Ask a worker to regenerate the unlocked parts now, fresh or not (as the API's
    POST .../synopsis/refresh/); the panel reads itself again a few seconds later."""
    end_user = end_user_of(request, user_id)
    row = Synopsis.objects.filter(end_user=end_user).first()  # the locks as stored
    parts = [part for part in PARTS if row is None or not row.part(part).locked]
    if not parts:
        return _synopsis_panel(
            request, end_user, error="Both parts are locked: unlock one to regenerate it."
        )
    try:
        queued = synopsis_refresh_request(end_user=end_user, parts=parts, force=True)
    except SynopsisUnavailable as error:
        return _synopsis_panel(request, end_user, error=f"Not queued: {error}. Retry later.")
    if not queued:
        return _synopsis_panel(
            request, end_user, error="Not queued: no synopsis generator is installed."
        )
    return _synopsis_panel(
        request,
        end_user,
        notice=f"Regeneration asked for: {', '.join(queued)}. A worker writes it.",
        refreshing=True,
        since=int(time.time()) - 1,
    )


# --- the context preview ---------------------------------------------------------------


class ContextPreviewForm(forms.Form):
    """What an agent sends to POST /api/v1/context/, for the preview."""

    room = forms.CharField(
        required=False,
        max_length=255,
        empty_value=None,
        widget=forms.TextInput(
            attrs={"list": "context-rooms", "placeholder": "none", "autocomplete": "off"}
        ),
    )
    query = forms.CharField(
        max_length=QUERY_MAX_CHARS,
        widget=forms.Textarea(
            attrs={"rows": 2, "placeholder": "What the agent is about to answer"}
        ),
    )
    max_tokens = forms.IntegerField(min_value=MIN_TOKENS, max_value=MAX_TOKENS, label="max tokens")
    encoding = forms.ChoiceField(choices=[(name, name) for name in ENCODINGS])

    def __init__(self, *args: Any, end_user: EndUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.end_user = end_user
        self.chosen_room: Room | None = None

    def clean_room(self) -> str | None:
        """The room's id as an agent sends it; one of the user's rooms (a user may have
        thousands: a text field with her recent ones suggested, not a select)."""
        external_id = self.cleaned_data["room"]
        if external_id is None:
            return None
        self.chosen_room = user_room_find(
            project=self.end_user.project, end_user=self.end_user, external_id=external_id
        )
        if self.chosen_room is None:
            raise forms.ValidationError("This user has no memories in a room of that id.")
        return str(external_id)


@dataclass
class ItemView:
    """One item of a section as the preview shows it."""

    key: str
    kind: str
    text: str
    score: float
    tokens: int
    why: str


@dataclass
class SectionView:
    name: str
    budget: int
    tokens: int
    percent: float  # of max_tokens: the width of its part of the bar
    items: list[ItemView]
    dropped: list[ItemView]  # the best DROPPED_SHOWN of those left out
    dropped_total: int

    @property
    def dropped_more(self) -> int:
        return self.dropped_total - len(self.dropped)


def _why(candidate: Any) -> str:
    """Why it was chosen, with its score's parts (as the API's ``explain`` says it)."""
    parts = ", ".join(f"{name} {value}" for name, value in candidate.parts.items())
    return (candidate.why or "ranked by score") + (f" ({parts})" if parts else "")


def _item(candidate: Any, why: str | None = None) -> ItemView:
    return ItemView(
        key=candidate.key,
        kind=candidate.kind,
        text=candidate.text,
        score=candidate.score,
        tokens=candidate.tokens,
        why=why if why is not None else _why(candidate),
    )


def _sections(result: ContextResult) -> list[SectionView]:
    scale = 100.0 / max(result.max_tokens, 1)
    return [
        SectionView(
            name=section.name,
            budget=section.budget,
            tokens=section.tokens,
            percent=round(section.tokens * scale, 2),
            items=[_item(c) for c in section.items],
            dropped=[
                _item(c, f"{why}; it was: {_why(c)}") for c, why in section.dropped[:DROPPED_SHOWN]
            ],
            dropped_total=len(section.dropped),
        )
        for section in result.sections
    ]


def _preview(
    end_user: EndUser, form: ContextPreviewForm
) -> tuple[ContextResult, list[SectionView]]:
    data = form.cleaned_data
    result = context_build(
        end_user=end_user,
        room=form.chosen_room,
        query=data["query"],
        max_tokens=data["max_tokens"],
        encoding=data["encoding"],
        record_access=False,
    )
    return result, _sections(result)


@project_view()
@require_GET
def user_context_preview(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """The preview's form; with a query, exactly what an agent would get: the rendered
    prompt, its tokens against the budget, each section's items with score and why,
    what was dropped and why, and what the full history would have cost. Read-only:
    viewers may use it, and it records nothing."""
    project = request.project
    end_user = end_user_of(request, user_id)
    settings = project_settings_get(project=project).context
    initial = {"max_tokens": settings.max_tokens, "encoding": settings.encoding}
    asked = "query" in request.GET
    form = ContextPreviewForm(
        {**initial, **request.GET.dict()} if asked else None, initial=initial, end_user=end_user
    )
    context = _base(
        request,
        end_user,
        form=form,
        sections_order=SECTIONS,
        recent_rooms=user_recent_rooms(project=project, end_user=end_user),
    )
    if asked and form.is_valid():
        result, sections = _preview(end_user, form)
        full = result.full_history_tokens
        saving = round(100 * result.saved_tokens / full, 1) if full else 0.0
        context.update(result=result, sections=sections, saving_percent=saving)
    status = 422 if asked and not form.is_valid() else 200
    return _panel(request, CONTEXT, context, tab="context", status=status)
