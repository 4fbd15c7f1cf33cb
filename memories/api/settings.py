"""The project's configuration: read the effective settings, change them, their history."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api import settings_serializers as s
from memories.api.pagination import (
    INTEGER,
    HistoryPageQuerySerializer,
    newest_first,
    page_get,
)
from memories.api.scoping import actor_of, project_of
from memories.config import SettingsError, settings_as_dict, settings_schema
from memories.models import Project, SettingsRevision
from memories.services.configuration import (
    project_settings_get,
    project_settings_update,
)

NEWEST = newest_first(pk=INTEGER)


def _settings_payload(project: Project) -> dict[str, Any]:
    schema = settings_schema()
    return {
        "values": settings_as_dict(project_settings_get(project=project)),
        "defaults": {
            section: {name: entry["default"] for name, entry in entries.items()}
            for section, entries in schema.items()
        },
        "overrides": project.settings,
        "schema": schema,
    }


@extend_schema(tags=["settings"])
class SettingsView(APIView):
    @extend_schema(responses=s.SettingsOutputSerializer)
    def get(self, request: Request) -> Response:
        """The project's effective settings, their defaults, its overrides and the schema."""
        project = project_of(request)
        # read again: the key's project may be kept from a request up to 2 s ago
        # (LOOKUP_CACHE_SECONDS), and this answer shows what is stored now
        project.refresh_from_db(fields=["settings"])
        return Response(_settings_payload(project))

    @extend_schema(request=s.SettingsInputSerializer, responses=s.SettingsOutputSerializer)
    def patch(self, request: Request) -> Response:
        """Change some settings (`{"search": {"keyword_weight": 0.7}}`); null resets one to
        its default. A bad name or value is a 400 naming the setting; nothing is written.
        The change is recorded (GET /api/v1/settings/revisions/)."""
        project = project_of(request)
        try:
            project_settings_update(project=project, changes=request.data, actor=actor_of(request))
        except SettingsError as error:
            raise serializers.ValidationError(error.errors) from None
        return Response(_settings_payload(project))


@extend_schema(tags=["settings"])
class SettingsRevisionListView(APIView):
    @extend_schema(
        parameters=[HistoryPageQuerySerializer], responses=s.SettingsRevisionPageOutputSerializer
    )
    def get(self, request: Request) -> Response:
        """Every change of the project's settings, newest first."""
        revisions = SettingsRevision.objects.filter(project=project_of(request), room__isnull=True)
        page = page_get(
            revisions, request=request, ordering=NEWEST, query=HistoryPageQuerySerializer
        )
        return Response(page.data(s.SettingsRevisionOutputSerializer))
