"""Export from the console: a user (all her memories, every room) or a room (every
user's) as the same JSON document the API's export gives and POST /api/v1/import/
reads back, downloaded as a file. ``?vectors=1`` adds each memory's embedding windows.
Reading only: viewers may export what they may read."""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.text import slugify
from django.views.decorators.http import require_GET

from console.paths import PROJECT, USER
from console.views.access import ConsoleRequest, project_view
from console.views.user_page import end_user_of
from memories.models import Room
from memories.services.exports import end_user_export, room_export


def _download(document: dict[str, Any], *, kind: str, name: str) -> HttpResponse:
    """The document as an attachment named after what it holds and when."""
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    filename = f"memoryhub-{kind}-{slugify(name)[:60] or 'export'}-{stamp}.json"
    response = HttpResponse(
        json.dumps(document, cls=DjangoJSONEncoder, ensure_ascii=False),
        content_type="application/json; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _vectors(request: ConsoleRequest) -> bool:
    return request.GET.get("vectors") in ("1", "true", "yes")


@project_view()
@require_GET
def user_export(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """The user's export document (GET /api/v1/users/{id}/export/'s), as a file."""
    end_user = end_user_of(request, user_id)
    document = end_user_export(end_user=end_user, vectors=_vectors(request))
    return _download(document, kind="user", name=end_user.external_id)


@project_view()
@require_GET
def room_export_view(request: ConsoleRequest, room_id: int) -> HttpResponse:
    """The room's export document (GET /api/v1/rooms/{id}/export/'s), as a file."""
    room = get_object_or_404(Room.objects.for_project(request.project), pk=room_id)
    document = room_export(room=room, vectors=_vectors(request))
    return _download(document, kind="room", name=room.external_id)


urlpatterns: list[URLPattern] = [
    path(f"{USER}export/", user_export, name="console-user-export"),
    path(f"{PROJECT}rooms/<int:room_id>/export/", room_export_view, name="console-room-export"),
]
