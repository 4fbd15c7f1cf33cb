"""Export a user or a room as one JSON document; import such a document."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api import export_serializers as s
from memories.api.scoping import actor_of, end_user_get, idempotent, project_of, room_get
from memories.services.export_checks import ExportInvalid
from memories.services.exports import end_user_export, room_export
from memories.services.imports import export_document_import

VECTORS = OpenApiParameter(
    "vectors", bool, description="Add each memory's embedding windows with their space."
)


def _vectors(request: Request) -> bool:
    query = s.ExportQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return bool(query.validated_data["vectors"])


@extend_schema(tags=["export"])
class EndUserExportView(APIView):
    @extend_schema(parameters=[VECTORS], responses=s.ExportDocumentSerializer)
    def get(self, request: Request, external_id: str) -> Response:
        """All of a user's memories (every status, every room), the rooms and agents they
        refer to, as one document that POST /api/v1/import/ reads back."""
        user = end_user_get(request, external_id)
        return Response(end_user_export(end_user=user, vectors=_vectors(request)))


@extend_schema(tags=["export"])
class RoomExportView(APIView):
    @extend_schema(parameters=[VECTORS], responses=s.ExportDocumentSerializer)
    def get(self, request: Request, external_id: str) -> Response:
        """All of a room's memories (every user, every status), those users and the
        agents, as one document that POST /api/v1/import/ reads back."""
        room = room_get(request, external_id)
        return Response(room_export(room=room, vectors=_vectors(request)))


@extend_schema(tags=["export"])
class ImportView(APIView):
    @extend_schema(
        request=s.ExportDocumentSerializer,
        responses={201: s.ImportOutputSerializer, 200: s.ImportOutputSerializer},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Import an export document into this key's project, all or nothing: a bad
        field is a 400 naming its path (`memories[3].kind`) and nothing is written.
        Memories keep their ids and times; those the project has already are skipped
        (200 when nothing was new)."""
        try:
            report = export_document_import(
                project=project_of(request), document=request.data, actor=actor_of(request)
            )
        except ExportInvalid as error:
            raise serializers.ValidationError(error.errors) from None
        created = any(
            counts["created"]
            for counts in (report.users, report.rooms, report.agents, report.memories)
        )
        return Response(
            s.ImportOutputSerializer(report).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )
