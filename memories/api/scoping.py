"""The caller's key, project and actor, and objects fetched through its project:
another tenant's object is a 404."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.db import transaction
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from memories.models import ApiKey, EndUser, Memory, Project, Room
from memories.services.idempotency import (
    idempotency_key_lock,
    idempotency_key_lookup,
    idempotency_key_store,
    request_fingerprint,
)
from memories.services.revisions import Actor


def api_key_of(request: Request) -> ApiKey:
    """The key the request authenticated with (ApiKeyAuthentication makes it request.auth)."""
    key = request.auth
    if not isinstance(key, ApiKey):  # only a view without HasProjectScope gets here
        raise exceptions.NotAuthenticated()
    return key


def project_of(request: Request) -> Project:
    return api_key_of(request).project  # loaded with the key: no query


def actor_of(request: Request) -> Actor:
    """Who a change is recorded as: the key, by its visible prefix."""
    return Actor.api_key(api_key_of(request).prefix)


def parse_uuid(value: str, field: str = "id") -> uuid.UUID:
    """A UUID from a path or query value; a malformed one is a 400 naming the field."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise serializers.ValidationError({field: ["Must be a valid UUID."]}) from None


def memory_get(request: Request, memory_id: str) -> Memory:
    """The caller's memory of this public id (Memory.public_id); anything else a 404."""
    memory = (
        Memory.objects.for_project(project_of(request))
        .select_related("end_user", "room", "agent")
        .filter(public_id=parse_uuid(memory_id))
        .first()
    )
    if memory is None:
        raise Http404("No such memory.")
    return memory


def end_user_get(request: Request, external_id: str) -> EndUser:
    user = EndUser.objects.for_project(project_of(request)).by_external_id(external_id).first()
    if user is None:
        raise Http404("No such user.")
    return user


def room_get(request: Request, external_id: str) -> Room:
    room = (
        Room.objects.for_project(project_of(request))
        .by_external_id(external_id)
        .select_related("agent")
        .first()
    )
    if room is None:
        raise Http404("No such room.")
    return room


def idempotent(view_method: Callable[..., Response]) -> Callable[..., Response]:
    """Honour an `Idempotency-Key` header on a POST: a retry replays the first response."""

    @wraps(view_method)
    def wrapper(self: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get("Idempotency-Key", "").strip()
        if not key:
            return view_method(self, request, *args, **kwargs)
        if len(key) > 255:
            raise serializers.ValidationError({"Idempotency-Key": ["At most 255 characters."]})
        project = project_of(request)
        fingerprint = request_fingerprint(
            method=request.method or "", path=request.path, body=request.data
        )
        with transaction.atomic():  # one request per key at a time: a retry waits, then replays
            idempotency_key_lock(project=project, key=key)
            stored = idempotency_key_lookup(project=project, key=key, fingerprint=fingerprint)
            if stored is not None:
                return Response(
                    stored.response,
                    status=stored.status_code,
                    headers={"Idempotent-Replayed": "true"},
                )
            response = view_method(self, request, *args, **kwargs)
            if status.is_success(response.status_code):
                idempotency_key_store(
                    project=project,
                    key=key,
                    fingerprint=fingerprint,
                    status_code=response.status_code,
                    response=json.loads(JSONRenderer().render(response.data)),
                )
        return response

    wrapper.idempotency_key = True  # type: ignore[attr-defined]  # read by the schema
    return wrapper
