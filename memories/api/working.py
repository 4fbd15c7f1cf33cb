"""A room's working memory (MUXI): short-lived items in Redis, listed, searched by
meaning (FAISS), deleted. Never written to PostgreSQL; a Redis restart loses them."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api.fields import ContentField, JSONObjectField
from memories.api.scoping import idempotent, parse_uuid, project_of, room_get
from memories.models import Room
from memories.services.users import room_get_or_create
from memories.services.working import (
    MAX_TTL_SECONDS,
    WorkingItemTooLarge,
    WorkingMemoryUnavailable,
    working_add,
    working_clear,
    working_delete,
    working_list,
    working_search,
)

MAX_LIMIT = 100
RETRY_AFTER_SECONDS = 5
ROOM_EXTERNAL_ID_MAX = 255

REDIS_NOTE = (
    "Working memory lives in Redis only, never in PostgreSQL: a Redis restart loses every "
    "room's working memory, by design. Redis unreachable: a 503 with Retry-After."
)


def redis_noted(view_method: Callable[..., Response]) -> Callable[..., Response]:
    """The method's docstring with the Redis note, as its OpenAPI description."""
    doc = inspect.cleandoc(view_method.__doc__ or "")
    return extend_schema(description=f"{doc}\n\n{REDIS_NOTE}")(view_method)


class WorkingItemInputSerializer(serializers.Serializer):
    content = ContentField(help_text="The item's text (tool output, note), 1-32,000 characters.")
    metadata = JSONObjectField(required=False, default=dict)
    ttl_seconds = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_TTL_SECONDS,
        help_text="How long the item lives (1 s to 30 days); default the room's "
        "working.ttl_seconds (3600).",
    )


class WorkingItemOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    content = serializers.CharField()
    metadata = serializers.DictField()
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()


class WorkingListOutputSerializer(serializers.Serializer):
    room = serializers.CharField()
    count = serializers.IntegerField()
    bytes = serializers.IntegerField(
        help_text="What the live items take: content + metadata + vector (dimension x 4)."
    )
    max_bytes = serializers.IntegerField(help_text="The room's cap (working.max_memory_mb).")
    ttl_seconds = serializers.IntegerField(help_text="The default TTL of a new item.")
    results = WorkingItemOutputSerializer(many=True, help_text="Live items, oldest first.")


class WorkingSearchInputSerializer(serializers.Serializer):
    query = serializers.CharField(max_length=10_000, trim_whitespace=True)
    limit = serializers.IntegerField(default=10, min_value=1, max_value=MAX_LIMIT)
    filter_metadata = JSONObjectField(
        required=False,
        help_text="Only items whose metadata has each of these keys with exactly this value.",
    )


class WorkingHitOutputSerializer(serializers.Serializer):
    item = WorkingItemOutputSerializer()
    score = serializers.FloatField(
        allow_null=True, help_text="Cosine similarity to the query; null when ranked by recency."
    )


class WorkingSearchOutputSerializer(serializers.Serializer):
    method = serializers.ChoiceField(
        choices=["semantic", "recency"],
        help_text="semantic: by cosine similarity (FAISS); recency: the embedding model was "
        "unavailable, the newest items first.",
    )
    reason = serializers.CharField(allow_null=True, help_text="Why recency, if it was.")
    searched = serializers.IntegerField(help_text="Live items that matched filter_metadata.")
    embedded = serializers.IntegerField(
        help_text="Items this search embedded (new since the last search); the rest had "
        "their vector."
    )
    results = WorkingHitOutputSerializer(many=True)
    timings_ms = serializers.DictField(child=serializers.FloatField())


class WorkingClearedOutputSerializer(serializers.Serializer):
    deleted = serializers.IntegerField()


class ErrorOutputSerializer(serializers.Serializer):
    detail = serializers.CharField()


class WorkingMemoryUnavailableError(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "Working memory is unavailable (Redis unreachable); retry later."
    default_code = "working_memory_unavailable"
    wait = RETRY_AFTER_SECONDS  # DRF's handler sends it as Retry-After


UNAVAILABLE = OpenApiResponse(ErrorOutputSerializer, description="Redis unreachable.")


def _item(item: Any) -> dict[str, Any]:
    return WorkingItemOutputSerializer(item).data


class WorkingBaseView(APIView):
    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, WorkingMemoryUnavailable):
            exc = WorkingMemoryUnavailableError()
        return super().handle_exception(exc)


def _room_for_write(request: Request, external_id: str) -> Room:
    """The caller's room, created if new (as memory writes create theirs)."""
    if len(external_id) > ROOM_EXTERNAL_ID_MAX:
        raise serializers.ValidationError(
            {"room": [f"Ensure this field has no more than {ROOM_EXTERNAL_ID_MAX} characters."]}
        )
    room, _ = room_get_or_create(project=project_of(request), external_id=external_id)
    return room


@extend_schema(tags=["working memory"])
class WorkingMemoryView(WorkingBaseView):
    @extend_schema(
        operation_id="v1_rooms_working_list",
        responses={200: WorkingListOutputSerializer, 503: UNAVAILABLE},
    )
    @redis_noted
    def get(self, request: Request, external_id: str) -> Response:
        """The room's live items, oldest first, with its usage and cap in bytes."""
        room = room_get(request, external_id)
        listed = working_list(room=room)
        return Response(
            WorkingListOutputSerializer(
                {
                    "room": room.external_id,
                    "count": len(listed.items),
                    "bytes": listed.bytes,
                    "max_bytes": listed.max_bytes,
                    "ttl_seconds": listed.ttl_seconds,
                    "results": listed.items,
                }
            ).data
        )

    @extend_schema(
        operation_id="v1_rooms_working_create",
        request=WorkingItemInputSerializer,
        responses={201: WorkingItemOutputSerializer, 503: UNAVAILABLE},
    )
    @redis_noted
    @idempotent
    def post(self, request: Request, external_id: str) -> Response:
        """Keep an item in the room's working memory (the room is created if new) for
        `ttl_seconds`. Returns at once: the item is embedded by the first search that
        needs it. The room's oldest items are dropped (FIFO) while it is over
        `working.max_memory_mb`; an item larger than the whole cap is a 400."""
        data = WorkingItemInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        room = _room_for_write(request, external_id)
        try:
            item = working_add(room=room, **data.validated_data)
        except WorkingItemTooLarge as error:
            raise serializers.ValidationError({"content": [str(error)]}) from None
        return Response(_item(item), status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="v1_rooms_working_clear",
        responses={200: WorkingClearedOutputSerializer, 503: UNAVAILABLE},
    )
    @redis_noted
    def delete(self, request: Request, external_id: str) -> Response:
        """Clear the room's working memory; returns how many live items were deleted."""
        return Response({"deleted": working_clear(room=room_get(request, external_id))})


@extend_schema(tags=["working memory"])
class WorkingItemView(WorkingBaseView):
    @extend_schema(
        operation_id="v1_rooms_working_item_destroy",
        responses={204: None, 503: UNAVAILABLE},
    )
    @redis_noted
    def delete(self, request: Request, external_id: str, item_id: str) -> Response:
        """Delete one item; 404 if the room has no such live item."""
        room = room_get(request, external_id)
        if not working_delete(room=room, item_id=str(parse_uuid(item_id, "item_id"))):
            raise exceptions.NotFound("No such working-memory item.")
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["working memory"])
class WorkingSearchView(WorkingBaseView):
    read_only_post = True  # a search changes nothing an agent sees: read-only keys may use it

    @extend_schema(
        operation_id="v1_rooms_working_search",
        request=WorkingSearchInputSerializer,
        responses={200: WorkingSearchOutputSerializer, 503: UNAVAILABLE},
    )
    @redis_noted
    def post(self, request: Request, external_id: str) -> Response:
        """The room's live items ranked by cosine similarity to `query` (FAISS, the same
        model as memories), `filter_metadata` applied before the top `limit`. Items not
        embedded yet are embedded now in one batch. Without the model, the newest items
        with `method: "recency"` and the `reason`."""
        room = room_get(request, external_id)
        data = WorkingSearchInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        result = working_search(
            room=room,
            query=params["query"],
            limit=params["limit"],
            filter_metadata=params.get("filter_metadata"),
        )
        payload = {
            "method": result.method,
            "reason": result.reason,
            "searched": result.searched,
            "embedded": result.embedded,
            "results": [{"item": hit.item, "score": hit.score} for hit in result.hits],
            "timings_ms": result.timings_ms,
        }
        return Response(WorkingSearchOutputSerializer(payload).data)
