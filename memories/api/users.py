"""Users and rooms: create (idempotent on external id), get, list, update, delete."""

from __future__ import annotations

from typing import TypeVar

from django.db import transaction
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api import user_serializers as s
from memories.api.pagination import TEXT, Key, Ordering, PageQuerySerializer, page_get
from memories.api.scoping import (
    actor_of,
    end_user_get,
    idempotent,
    project_of,
    room_get,
)
from memories.api.serializers import DeletedOutputSerializer, receipt_body
from memories.api.validators import id_validate
from memories.config import SettingsError
from memories.models import EndUser, EndUserQuerySet, Room, RoomQuerySet
from memories.services.configuration import room_settings_update
from memories.services.users import (
    end_user_delete,
    end_user_get_or_create,
    end_user_update,
    room_delete,
    room_get_or_create,
    room_update,
)

# an external id is unique in its project: a total order by itself
BY_EXTERNAL_ID = Ordering(keys=(Key("external_id", TEXT),))
Rows = TypeVar("Rows", EndUserQuerySet, RoomQuerySet)


def _by_external_id(request: Request, rows: Rows) -> Rows:
    """Only the row with the `external_id` query parameter, if one is given."""
    external_id = request.query_params.get("external_id")
    if not external_id:
        return rows
    id_validate(external_id, "external_id")
    return rows.by_external_id(external_id)


def _with_agent(rooms: QuerySet[Room]) -> QuerySet[Room]:
    return rooms.select_related("agent")


@extend_schema(tags=["users"])
class EndUserListView(APIView):
    @extend_schema(
        operation_id="v1_users_list",
        responses=s.EndUserPageOutputSerializer,
        parameters=[
            OpenApiParameter(
                "external_id", str, description="Only the user with this external id."
            ),
            PageQuerySerializer,
        ],
    )
    def get(self, request: Request) -> Response:
        """The project's users by external id, with the total count and a cursor."""
        users = _by_external_id(request, EndUser.objects.for_project(project_of(request)))
        page = page_get(users, request=request, ordering=BY_EXTERNAL_ID)
        return Response(page.data(s.EndUserOutputSerializer))

    @extend_schema(
        request=s.EndUserInputSerializer,
        responses={201: s.EndUserOutputSerializer, 200: s.EndUserOutputSerializer},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Create a user; an existing external id returns that user with 200."""
        data = s.EndUserInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user, created = end_user_get_or_create(project=project_of(request), **data.validated_data)
        return Response(
            s.EndUserOutputSerializer(user).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


@extend_schema(tags=["users"])
class EndUserDetailView(APIView):
    @extend_schema(responses=s.EndUserOutputSerializer)
    def get(self, request: Request, external_id: str) -> Response:
        return Response(s.EndUserOutputSerializer(end_user_get(request, external_id)).data)

    @extend_schema(request=s.EndUserUpdateSerializer, responses=s.EndUserOutputSerializer)
    def patch(self, request: Request, external_id: str) -> Response:
        user = end_user_get(request, external_id)
        data = s.EndUserUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = end_user_update(end_user=user, changes=data.validated_data)
        return Response(s.EndUserOutputSerializer(user).data)

    @extend_schema(responses={200: DeletedOutputSerializer})
    def delete(self, request: Request, external_id: str) -> Response:
        """Erase the user: its memories, documents, synopsis, the working memory of the
        rooms it wrote in, and the words of every revision (each keeps a SHA-256 of its
        text); what derives from its memories alone goes too. Answers with the
        erasure receipt: the counts per table."""
        user = end_user_get(request, external_id)
        receipt = end_user_delete(end_user=user, actor=actor_of(request))
        return Response(receipt_body(receipt))


@extend_schema(tags=["rooms"])
class RoomListView(APIView):
    @extend_schema(
        operation_id="v1_rooms_list",
        responses=s.RoomPageOutputSerializer,
        parameters=[
            OpenApiParameter(
                "external_id", str, description="Only the room with this external id."
            ),
            PageQuerySerializer,
        ],
    )
    def get(self, request: Request) -> Response:
        """The project's rooms by external id, with the total count and a cursor."""
        rooms = _by_external_id(request, Room.objects.for_project(project_of(request)))
        page = page_get(rooms, request=request, ordering=BY_EXTERNAL_ID, load=_with_agent)
        return Response(page.data(s.RoomOutputSerializer))

    @extend_schema(
        request=s.RoomInputSerializer,
        responses={201: s.RoomOutputSerializer, 200: s.RoomOutputSerializer},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Create a room; an existing external id returns that room with 200."""
        data = s.RoomInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        room, created = room_get_or_create(project=project_of(request), **data.validated_data)
        return Response(
            s.RoomOutputSerializer(room).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


@extend_schema(tags=["rooms"])
class RoomDetailView(APIView):
    @extend_schema(responses=s.RoomOutputSerializer)
    def get(self, request: Request, external_id: str) -> Response:
        return Response(s.RoomOutputSerializer(room_get(request, external_id)).data)

    @extend_schema(request=s.RoomUpdateSerializer, responses=s.RoomOutputSerializer)
    def patch(self, request: Request, external_id: str) -> Response:
        """Change a room's name, world id, metadata and/or its own settings; a bad setting
        is a 400 naming it, and then nothing is written."""
        room = room_get(request, external_id)
        data = s.RoomUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        changes = dict(data.validated_data)
        with transaction.atomic():
            if "settings" in changes:
                try:
                    room_settings_update(
                        room=room, changes=changes.pop("settings"), actor=actor_of(request)
                    )
                except SettingsError as error:
                    raise serializers.ValidationError({"settings": error.errors}) from None
            room = room_update(room=room, changes=changes)
        return Response(s.RoomOutputSerializer(room).data)

    @extend_schema(responses={200: DeletedOutputSerializer})
    def delete(self, request: Request, external_id: str) -> Response:
        """Erase the room: its memories and working memory, the words of their
        revisions (each keeps a SHA-256), what derives from them alone. Answers with
        the erasure receipt."""
        room = room_get(request, external_id)
        return Response(receipt_body(room_delete(room=room, actor=actor_of(request))))
