"""A user's Rooms tab and a room's view: her rooms with their counts; one room's buffer
window (capacity, unsummarized turns; it polls while a summary is due), the chain of
its summaries (each expands to the turns it covers), its own settings (the buffer and
working overrides of PATCH /api/v1/rooms/{room}/, through room_settings_update), its
working memory (delete an item) and its messages, paginated. Reads:
console/services/rooms_page.py.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import URLPattern, path
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from console.forms import SettingsSectionForm
from console.paths import USER
from console.services.rooms_page import (
    buffer_panel,
    room_settings_view,
    summaries_page,
    summary_turns,
    turn_page,
    user_room_get,
    user_rooms_page,
    working_panel,
)
from console.services.user_page import room_messages_page
from console.views.access import ConsoleRequest, project_view
from memories.config import ROOM_SECTIONS, SettingsError, settings_as_dict
from memories.models import EndUser, Room
from memories.services.configuration import room_settings_get, room_settings_update
from memories.services.revisions import Actor
from memories.services.working import working_delete
from memories.services.working_store import WorkingMemoryUnavailable

LIST = "console/user_rooms.html"
ROOM = "console/room.html"
PARTS = "console/rooms"


def _end_user(request: ConsoleRequest, user_id: int) -> EndUser:
    return get_object_or_404(EndUser.objects.for_project(request.project), pk=user_id)


def _room(request: ConsoleRequest, end_user: EndUser, room_id: int) -> Room:
    room = user_room_get(project=request.project, end_user=end_user, room_id=room_id)
    if room is None:
        raise Http404("The user has no memories in such a room.")
    return room


def _context(request: ConsoleRequest, end_user: EndUser, **extra: Any) -> dict[str, Any]:
    return {
        "project": request.project,
        "can_edit": request.can_edit,
        "end_user": end_user,
        "section": "users",
        "user_tab": "rooms",
        **extra,
    }


@project_view()
@require_GET
@vary_on_headers("HX-Request")
def user_rooms(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """Her rooms, the most recently active first, with their counts (paginated)."""
    end_user = _end_user(request, user_id)
    rooms = user_rooms_page(
        project=request.project, end_user=end_user, page=request.GET.get("page")
    )
    context = _context(request, end_user, rooms=rooms)
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, f"{LIST}#rooms-list", context)
    return render(request, LIST, context)


def _messages(request: ConsoleRequest, room: Room) -> Any:
    """The page of messages asked (``page``), or the page of ``turn`` (a fact's source)."""
    page = request.GET.get("page")
    turn = request.GET.get("turn")
    if not page and turn:
        try:
            number = turn_page(project=request.project, room=room, turn_id=uuid.UUID(turn))
        except ValueError:  # not a memory id: the default page
            number = None
        page = str(number) if number else None
    return room_messages_page(project=request.project, room=room, page=page)


class RoomSettingsForm(SettingsSectionForm):
    """A room section's form; ``rows`` pairs each field with its RoomSetting (the
    project's value, whether the room overrides it)."""

    rows: list[tuple[Any, Any]] = []


def _settings_forms(room: Room, bound: RoomSettingsForm | None = None) -> list[RoomSettingsForm]:
    """A form per room section on the effective values."""
    values = settings_as_dict(room_settings_get(room=room))
    view = room_settings_view(room=room)
    forms = []
    for section in ROOM_SECTIONS:
        if bound is not None and bound.section == section:
            form = bound
        else:
            form = RoomSettingsForm(section=section, initial=values[section])
        form.overrides = set((room.settings or {}).get(section) or {})
        form.rows = [(form[setting.name], setting) for setting in view.sections[section]]
        forms.append(form)
    return forms


@project_view()
@require_GET
@vary_on_headers("HX-Request")
def room_view(request: ConsoleRequest, user_id: int, room_id: int) -> HttpResponse:
    """The room's view; asked by HTMX (a page of messages), the messages alone."""
    end_user = _end_user(request, user_id)
    room = _room(request, end_user, room_id)
    messages = _messages(request, room)
    context = _context(request, end_user, room=room, messages=messages)
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, f"{ROOM}#room-messages", context)
    context.update(
        buffer=buffer_panel(room=room),
        summaries=summaries_page(project=request.project, room=room, page=None),
        settings_forms=_settings_forms(room),
        working=working_panel(room=room),
        turn=request.GET.get("turn", ""),
    )
    return render(request, ROOM, context)


@project_view()
@require_GET
def room_buffer(request: ConsoleRequest, user_id: int, room_id: int) -> HttpResponse:
    """The buffer panel alone (it polls itself while a summary is due)."""
    end_user = _end_user(request, user_id)
    room = _room(request, end_user, room_id)
    context = _context(request, end_user, room=room, buffer=buffer_panel(room=room))
    return render(request, f"{PARTS}/buffer.html", context)


@project_view()
@require_GET
def room_summaries(request: ConsoleRequest, user_id: int, room_id: int) -> HttpResponse:
    """A page of the room's summaries chain."""
    end_user = _end_user(request, user_id)
    room = _room(request, end_user, room_id)
    page = summaries_page(project=request.project, room=room, page=request.GET.get("page"))
    context = _context(request, end_user, room=room, summaries=page)
    return render(request, f"{PARTS}/summaries.html", context)


@project_view()
@require_GET
def room_summary_turns(
    request: ConsoleRequest, user_id: int, room_id: int, summary_id: Any
) -> HttpResponse:
    """The turns one summary of the room covers, oldest first."""
    end_user = _end_user(request, user_id)
    room = _room(request, end_user, room_id)
    turns = summary_turns(project=request.project, room=room, summary_id=summary_id)
    if turns is None:
        raise Http404("The room has no such summary.")
    context = _context(request, end_user, room=room, turns=turns)
    return render(request, f"{PARTS}/summary_turns.html", context)


def _settings_render(
    request: ConsoleRequest, end_user: EndUser, room: Room, **extra: Any
) -> HttpResponse:
    room.refresh_from_db(fields=["settings"])
    context = _context(
        request,
        end_user,
        room=room,
        settings_forms=_settings_forms(room, extra.pop("bound", None)),
        **extra,
    )
    status = 422 if extra.get("error") or extra.get("invalid") else 200
    return render(request, f"{PARTS}/settings.html", context, status=status)


@project_view(edit=True)
@require_POST
def room_settings(
    request: ConsoleRequest, user_id: int, room_id: int, section: str
) -> HttpResponse:
    """Save the room's overrides of one section (``reset=<name>``: drop that override,
    back to the project's value) through the API's room_settings_update (recorded);
    bad values come back in place (422) and nothing is written."""
    end_user = _end_user(request, user_id)
    room = _room(request, end_user, room_id)
    if section not in ROOM_SECTIONS:
        raise Http404("Rooms override only: " + ", ".join(ROOM_SECTIONS))
    actor = Actor.operator(request.user.get_username())
    reset = request.POST.get("reset", "")
    values = settings_as_dict(room_settings_get(room=room))[section]
    if reset:
        if reset not in values:
            return _settings_render(request, end_user, room, error=f"reset: no setting {reset}.")
        room_settings_update(room=room, changes={section: {reset: None}}, actor=actor)
        return _settings_render(request, end_user, room, saved=section)
    form = RoomSettingsForm(request.POST, section=section, initial=values)
    if form.is_valid() and form.changed_data:
        try:
            room_settings_update(room=room, changes=form.changes(), actor=actor)
        except SettingsError as error:
            form.errors_add(error.errors)
    if not form.is_valid():
        return _settings_render(request, end_user, room, bound=form, invalid=True)
    return _settings_render(request, end_user, room, saved=section if form.changed_data else "")


@project_view(edit=True)
@require_POST
def room_working_delete(
    request: ConsoleRequest, user_id: int, room_id: int, item_id: str
) -> HttpResponse:
    """Delete one item of the room's working memory; the panel again."""
    end_user = _end_user(request, user_id)
    room = _room(request, end_user, room_id)
    try:
        deleted = working_delete(room=room, item_id=item_id)
        notice = "Deleted." if deleted else "It had expired or was gone already."
    except WorkingMemoryUnavailable as error:
        notice = f"Not deleted: working memory is unavailable ({error})."
    context = _context(request, end_user, room=room, working=working_panel(room=room))
    return render(request, f"{PARTS}/working.html", {**context, "notice": notice})


ROOM_URL = f"{USER}rooms/<int:room_id>/view/"

urlpatterns: list[URLPattern] = [
    path(f"{USER}rooms/", user_rooms, name="console-user-rooms"),
    path(ROOM_URL, room_view, name="console-user-room-view"),
    path(f"{ROOM_URL}buffer/", room_buffer, name="console-user-room-buffer"),
    path(f"{ROOM_URL}summaries/", room_summaries, name="console-user-room-summaries"),
    path(
        f"{ROOM_URL}summaries/<uuid:summary_id>/turns/",
        room_summary_turns,
        name="console-user-room-summary-turns",
    ),
    path(f"{ROOM_URL}settings/<str:section>/", room_settings, name="console-user-room-settings"),
    path(
        f"{ROOM_URL}working/<str:item_id>/delete/",
        room_working_delete,
        name="console-user-room-working-delete",
    ),
]
