"""Memories: create (single, batch), get, list, count, update, delete, bulk delete."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api import serializers as s
from memories.api.pagination import (
    INTEGER,
    UUID,
    HistoryPageQuerySerializer,
    PageQuerySerializer,
    newest_first,
    page_get,
)
from memories.api.schema import FIELD_ERRORS_REF
from memories.api.scoping import actor_of, idempotent, memory_get, parse_uuid, project_of
from memories.models import Agent, EndUser, Memory, MemoryQuerySet, MemoryRevision, Room
from memories.services.memories import (
    MemoryInput,
    memories_delete,
    memory_create_batch,
    memory_delete,
    memory_update,
)

FILTER_PARAMETERS = [
    OpenApiParameter("user", str, description="End user external id"),
    OpenApiParameter("room", str, description="Room external id"),
    OpenApiParameter("kind", str, many=True, description="One or more kinds"),
    OpenApiParameter(
        "status",
        str,
        description="active (default for list), archived, superseded, pruned, staged, "
        "trashed (forgotten in the console, restorable for pruning.trash_days), proposed "
        "(waiting in the review inbox: facts.review)",
    ),
    OpenApiParameter("category", str, description="Facts of this category"),
    OpenApiParameter("goal_status", str, description="Goals: open, done or abandoned"),
    OpenApiParameter("subject", str, description="Relationships with this subject"),
    OpenApiParameter("predicate", str, description="Relationships with this predicate"),
    OpenApiParameter("object", str, description="Relationships with this object"),
    OpenApiParameter("start", datetime, description="created_at >= start"),
    OpenApiParameter("end", datetime, description="created_at < end"),
]
# a list's and a count's: the bulk delete takes neither
SELECT_PARAMETERS = [
    *FILTER_PARAMETERS,
    OpenApiParameter("agent", str, description="Agent external id (ElizaOS agentId)"),
    OpenApiParameter(
        "world", str, description="The world_id of the memory's room (ElizaOS worldId)"
    ),
]


# list filters on the structured kinds' content_json (memories/structured.py)
STRUCTURED_FILTERS = ("category", "goal_status", "subject", "predicate", "object")


def _query_params(
    request: Request, serializer_class: type[serializers.Serializer]
) -> dict[str, Any]:
    data: dict[str, Any] = {key: request.query_params.get(key) for key in request.query_params}
    if "kind" in request.query_params:
        data["kind"] = [
            kind for value in request.query_params.getlist("kind") for kind in value.split(",")
        ]
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _filtered(request: Request, params: dict[str, Any]) -> Any:
    """The caller's memories matching the filter parameters (none for an unknown user,
    room, agent or world). A memory's world is its room's ``world_id``."""
    project = project_of(request)
    memories = Memory.objects.for_project(project)
    if "user" in params:
        users = EndUser.objects.for_project(project).by_external_id(params["user"])
        memories = memories.filter(end_user__in=users)
    if "room" in params:
        rooms = Room.objects.for_project(project).by_external_id(params["room"])
        memories = memories.filter(room__in=rooms)
    if "agent" in params:
        agents = Agent.objects.filter(project=project, external_id=params["agent"])
        memories = memories.filter(agent__in=agents)
    if "world" in params:
        memories = memories.filter(
            room__in=Room.objects.for_project(project).filter(world_id=params["world"])
        )
    if params.get("kind"):
        memories = memories.of_kind(*params["kind"])
    if params.get("status"):
        memories = memories.filter(status=params["status"])
    structured = {
        ("status" if name == "goal_status" else name): params[name]
        for name in STRUCTURED_FILTERS
        if name in params
    }
    if structured:  # content_json @> {...}
        memories = memories.filter(content_json__contains=structured)
    if params.get("start"):
        memories = memories.filter(created_at__gte=params["start"])
    if params.get("end"):
        memories = memories.filter(created_at__lt=params["end"])
    return memories


# newest first (order=desc, the default) or oldest first; the pk breaks ties of created_at
NEWEST = newest_first(pk=UUID)
REVISIONS_NEWEST = newest_first(pk=INTEGER)


CONFLICT = OpenApiResponse(
    FIELD_ERRORS_REF,
    description="The client-chosen `id` is used by a different memory of the project.",
)


def _input(data: dict[str, Any]) -> MemoryInput:
    return MemoryInput(**data)


@extend_schema(tags=["memories"])
class MemoryListView(APIView):
    @extend_schema(
        parameters=[
            *SELECT_PARAMETERS,
            PageQuerySerializer,
            OpenApiParameter("order", str, enum=["desc", "asc"], description="By created_at"),
        ],
        responses=s.MemoryPageOutputSerializer,
        operation_id="v1_memories_list",  # a page envelope, not a bare list
    )
    def get(self, request: Request) -> Response:
        """List memories newest first (or oldest first), with the total count and a cursor."""
        params = _query_params(request, s.MemoryListQuerySerializer)
        memories = _filtered(request, params)
        if not params.get("status"):
            memories = memories.active()
        ordering = NEWEST if params["order"] == "desc" else NEWEST.reversed()
        page = page_get(
            memories, request=request, ordering=ordering, load=MemoryQuerySet.with_external_ids
        )
        return Response(page.data(s.MemoryOutputSerializer))

    @extend_schema(
        request=s.MemoryInputSerializer,
        responses={
            201: s.MemoryCreatedOutputSerializer,
            200: s.MemoryCreatedOutputSerializer,
            409: CONFLICT,
        },
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Store one memory. Returns at once; embedding happens in a worker (none with
        the memory's own `embedding`)."""
        project = project_of(request)
        data = s.MemoryInputSerializer(data=request.data, context={"project": project})
        data.is_valid(raise_exception=True)
        [(memory, created)] = memory_create_batch(
            project=project,
            items=[_input(data.validated_data)],
            actor=actor_of(request),
        )
        return Response(
            {"created": created, "memory": s.MEMORY_OUTPUT.to_representation(memory)},
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        operation_id="v1_memories_bulk_destroy",  # not v1_memories_destroy_2 in clients
        parameters=FILTER_PARAMETERS,
        responses={200: s.DeletedOutputSerializer},
    )
    def delete(self, request: Request) -> Response:
        """Erase all memories of a room, a user and/or kinds (at least one filter); a
        parameter that is not one of its filters (`agent`, `world`, a typo) is a 400:
        ignored, it would widen the delete."""
        unknown = sorted(set(request.query_params) - set(s.MemoryFilterSerializer().fields))
        if unknown:
            raise serializers.ValidationError(
                {
                    name: ["Not a filter of the bulk delete; nothing was deleted."]
                    for name in unknown
                }
            )
        params = _query_params(request, s.MemoryFilterSerializer)
        if not any(params.get(name) for name in ("user", "room", "kind")):
            raise serializers.ValidationError(
                {
                    "room": [
                        "Give a room, user and/or kind: deleting every memory is not allowed here."
                    ]
                }
            )
        project = project_of(request)
        end_user = room = None
        if "user" in params:
            end_user = EndUser.objects.for_project(project).by_external_id(params["user"]).first()
            if end_user is None:
                return Response({"deleted": 0, "erased": {}})
        if "room" in params:
            room = Room.objects.for_project(project).by_external_id(params["room"]).first()
            if room is None:
                return Response({"deleted": 0, "erased": {}})
        receipt = memories_delete(
            project=project,
            actor=actor_of(request),
            end_user=end_user,
            room=room,
            kinds=params.get("kind"),
            status=params.get("status"),
            start=params.get("start"),
            end=params.get("end"),
        )
        return Response(s.receipt_body(receipt))


@extend_schema(tags=["memories"])
class MemoryBatchView(APIView):
    @extend_schema(
        request=s.MemoryBatchInputSerializer,
        responses={201: s.MemoryBatchOutputSerializer, 409: CONFLICT},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Store up to MEMORYHUB_MAX_BATCH_SIZE memories in one transaction (all or nothing)."""
        project = project_of(request)
        data = s.MemoryBatchInputSerializer(data=request.data, context={"project": project})
        data.is_valid(raise_exception=True)
        results = memory_create_batch(
            project=project,
            items=[_input(item) for item in data.validated_data["memories"]],
            actor=actor_of(request),
        )
        return Response(
            {
                "results": [
                    {"created": created, "memory": s.MEMORY_OUTPUT.to_representation(memory)}
                    for memory, created in results
                ]
            },
            status=status.HTTP_201_CREATED,
        )


@extend_schema(tags=["memories"])
class MemoryCountView(APIView):
    @extend_schema(parameters=SELECT_PARAMETERS, responses=s.CountOutputSerializer)
    def get(self, request: Request) -> Response:
        """How many memories match the filters (active ones unless a status is given)."""
        params = _query_params(request, s.MemoryCountQuerySerializer)
        memories = _filtered(request, params)
        if not params.get("status"):
            memories = memories.active()
        return Response({"count": memories.count()})


@extend_schema(tags=["memories"])
class MemoryDetailView(APIView):
    @extend_schema(responses=s.MemoryOutputSerializer)
    def get(self, request: Request, memory_id: str) -> Response:
        return Response(s.MemoryOutputSerializer(memory_get(request, memory_id)).data)

    @extend_schema(request=s.MemoryUpdateSerializer, responses=s.MemoryOutputSerializer)
    def patch(self, request: Request, memory_id: str) -> Response:
        """Change a memory; new content is re-embedded. The change is recorded."""
        memory = memory_get(request, memory_id)
        data = s.MemoryUpdateSerializer(data=request.data, context={"kind": memory.kind})
        data.is_valid(raise_exception=True)
        memory = memory_update(memory=memory, changes=data.validated_data, actor=actor_of(request))
        return Response(s.MemoryOutputSerializer(memory_get(request, str(memory.public_id))).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, memory_id: str) -> Response:
        memory_delete(memory=memory_get(request, memory_id), actor=actor_of(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["memories"])
class MemoryRevisionListView(APIView):
    @extend_schema(
        parameters=[HistoryPageQuerySerializer], responses=s.MemoryRevisionPageOutputSerializer
    )
    def get(self, request: Request, memory_id: str) -> Response:
        """Every recorded change of a memory, newest first (also after it was deleted)."""
        revisions = MemoryRevision.objects.filter(
            project=project_of(request), memory_public_id=parse_uuid(memory_id)
        )
        page = page_get(
            revisions, request=request, ordering=REVISIONS_NEWEST, query=HistoryPageQuerySerializer
        )
        if not page.count:
            raise Http404("No such memory.")
        return Response(page.data(s.MemoryRevisionOutputSerializer))
