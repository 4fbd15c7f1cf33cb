"""A room's conversation buffer: the recent window with the newest summary, and the
search over the messages still in capacity."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api.fields import JSONObjectField
from memories.api.scoping import room_get
from memories.api.serializers import SharedMemoryField
from memories.services.access import accesses_record
from memories.services.buffer import buffer_get, buffer_search

MAX_LIMIT = 100


class BufferSettingsOutputSerializer(serializers.Serializer):
    max_size = serializers.IntegerField()
    buffer_multiplier = serializers.IntegerField()
    capacity = serializers.IntegerField(help_text="max_size x buffer_multiplier.")
    recency_bias = serializers.FloatField()
    summarize = serializers.BooleanField()


class BufferOutputSerializer(serializers.Serializer):
    room = serializers.CharField(source="room.external_id")
    settings = BufferSettingsOutputSerializer(
        help_text="The room's effective buffer settings (its overrides over the project's)."
    )
    messages = serializers.ListField(
        child=SharedMemoryField(), help_text="The window: the last max_size messages, oldest first."
    )
    summary = SharedMemoryField(
        allow_null=True,
        help_text="The newest summary: it folds in every earlier one, so with the window "
        "it accounts for the whole room. Null until the room first overflowed.",
    )
    unsummarized = serializers.IntegerField(
        help_text="Active messages not yet summarized (summarized ones are archived)."
    )


class BufferSearchInputSerializer(serializers.Serializer):
    query = serializers.CharField(max_length=10_000, trim_whitespace=True)
    limit = serializers.IntegerField(default=10, min_value=1, max_value=MAX_LIMIT)
    recency_bias = serializers.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        help_text="Weight of recency against meaning; default the room's buffer.recency_bias.",
    )
    filter_metadata = JSONObjectField(
        required=False, help_text="Only messages whose metadata has each of these values."
    )


class BufferHitOutputSerializer(serializers.Serializer):
    memory = SharedMemoryField()
    score = serializers.FloatField()
    semantic = serializers.FloatField(
        allow_null=True, help_text="Cosine similarity to the query; null: scored by recency."
    )
    recency = serializers.FloatField(help_text="1 for the newest message, 0 for the oldest.")


class BufferSearchOutputSerializer(serializers.Serializer):
    method = serializers.ChoiceField(
        choices=["semantic", "recency"],
        help_text="semantic: (1 - recency_bias) x semantic + recency_bias x recency; "
        "recency: the model was unavailable, by recency alone.",
    )
    reason = serializers.CharField(allow_null=True, help_text="Why recency alone, if it was.")
    unembedded = serializers.IntegerField(
        help_text="Messages not embedded yet, scored by recency alone."
    )
    searched = serializers.IntegerField(help_text="Messages in capacity that were ranked.")
    recency_bias = serializers.FloatField()
    results = BufferHitOutputSerializer(many=True)
    timings_ms = serializers.DictField(child=serializers.FloatField())


def _hit(pair: tuple[Any, Any]) -> dict[str, Any]:
    memory, hit = pair
    return {"memory": memory, "score": hit.score, "semantic": hit.semantic, "recency": hit.recency}


@extend_schema(tags=["buffer"])
class BufferView(APIView):
    @extend_schema(responses=BufferOutputSerializer)
    def get(self, request: Request, external_id: str) -> Response:
        """The room's window (its last `max_size` active messages, oldest first) and its
        newest summary. Older messages are summarized by a worker once the room holds
        more than `max_size x buffer_multiplier`, then archived (still listed with
        `status=archived`)."""
        view = buffer_get(room=room_get(request, external_id))
        return Response(BufferOutputSerializer(view).data)


@extend_schema(tags=["buffer"])
class BufferSearchView(APIView):
    read_only_post = True  # a search changes nothing: read-only keys may use it

    @extend_schema(request=BufferSearchInputSerializer, responses=BufferSearchOutputSerializer)
    def post(self, request: Request, external_id: str) -> Response:
        """The room's messages in capacity ranked by `(1 - recency_bias) x semantic +
        recency_bias x recency`. Messages not embedded yet, or every message if the
        model is unavailable, are ranked by recency alone; `method` and `unembedded`
        say which happened."""
        room = room_get(request, external_id)
        data = BufferSearchInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        result = buffer_search(
            room=room,
            query=params["query"],
            limit=params["limit"],
            recency_bias=params.get("recency_bias"),
            filter_metadata=params.get("filter_metadata"),
        )
        accesses_record(project=room.project, memory_ids=[memory.pk for memory, _ in result.hits])
        payload = {
            "method": result.method,
            "reason": result.reason,
            "unembedded": result.unembedded,
            "searched": result.searched,
            "recency_bias": result.recency_bias,
            "results": [_hit(pair) for pair in result.hits],
            "timings_ms": result.timings_ms,
        }
        return Response(BufferSearchOutputSerializer(payload).data)
