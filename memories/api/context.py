"""POST /api/v1/context/: what an agent puts in its prompt, fitted to a token budget."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api.fields import external_id_field
from memories.api.schema import ERROR_REF
from memories.api.scoping import end_user_get, project_of, room_get
from memories.providers.tokens import ENCODINGS
from memories.services.context import ContextResult, context_build
from memories.services.context.fitting import SECTIONS, Section
from memories.services.context.query import MessagesInvalid, messages_check

MIN_TOKENS, MAX_TOKENS = 100, 200_000


class ContextInputSerializer(serializers.Serializer):
    user = external_id_field(help_text="The end user's external id.")
    room = external_id_field(required=False, help_text="The room whose conversation it is.")
    agent = external_id_field(
        required=False,
        help_text="Retrieve only the user's memories of this agent (its external id; "
        "ElizaOS agentId). The project's shared documents, of no agent, still come.",
    )
    world = external_id_field(
        required=False,
        help_text="Retrieve only the user's memories in the rooms of this world (world_id; "
        "ElizaOS worldId). The project's shared documents, of no room, still come.",
    )
    query = serializers.CharField(
        required=False, max_length=10_000, help_text="What the agent is about to answer."
    )
    messages = serializers.JSONField(
        required=False,
        help_text="Instead of `query`: the conversation ([{role, content, tool_calls?}]); the "
        "query is its last 3 user messages and final assistant replies (tool messages and "
        "assistant messages that call tools are skipped).",
    )
    max_tokens = serializers.IntegerField(
        required=False,
        min_value=MIN_TOKENS,
        max_value=MAX_TOKENS,
        help_text="The budget (default: the project's context.max_tokens, 4000).",
    )
    budgets = serializers.DictField(
        child=serializers.FloatField(min_value=0.0, max_value=1.0),
        required=False,
        help_text="Share of the budget per section (synopsis, facts, working, history, "
        "retrieved), adding up to at most 1; unused tokens flow to the next section. "
        "Default: history 0.5, retrieved 0.3, the rest split evenly.",
    )
    encoding = serializers.CharField(
        required=False, help_text=f"Token counting: one of {', '.join(ENCODINGS)}."
    )
    similarity_weight = serializers.FloatField(required=False, min_value=0.0, max_value=1.0)
    confidence_weight = serializers.FloatField(required=False, min_value=0.0, max_value=1.0)
    explain = serializers.BooleanField(
        default=False, help_text="Say why each item was chosen, and what was dropped and why."
    )

    def validate_encoding(self, value: str) -> str:
        if value not in ENCODINGS:
            raise serializers.ValidationError(
                f"Unknown encoding; the encodings available offline are: {', '.join(ENCODINGS)}."
            )
        return value

    def validate_budgets(self, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(SECTIONS))
        if unknown:
            raise serializers.ValidationError(
                f"Unknown section(s) {', '.join(unknown)}; sections: {', '.join(SECTIONS)}."
            )
        if sum(value.values()) > 1.0 + 1e-9:
            raise serializers.ValidationError("The shares must add up to at most 1.")
        return value

    def validate_messages(self, value: Any) -> Any:
        try:
            return messages_check(value)
        except MessagesInvalid as error:
            raise serializers.ValidationError(error.errors) from None

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not (attrs.get("query") or "").strip() and not attrs.get("messages"):
            raise serializers.ValidationError({"query": ["Give a query or messages."]})
        return attrs


class ContextItemOutputSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The memory's id (working notes: working:<id>).")
    kind = serializers.CharField()
    text = serializers.CharField(help_text="As rendered in the prompt.")
    score = serializers.FloatField(help_text="The item's priority in its section.")
    tokens = serializers.IntegerField()
    why = serializers.CharField(required=False)


class ContextSectionOutputSerializer(serializers.Serializer):
    name = serializers.ChoiceField(choices=SECTIONS)
    budget = serializers.IntegerField(help_text="Its share plus what earlier sections left.")
    tokens = serializers.IntegerField()
    items = ContextItemOutputSerializer(many=True)
    dropped = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="With explain: what did not fit."
    )


class ContextOutputSerializer(serializers.Serializer):
    query = serializers.CharField(allow_null=True)
    prompt = serializers.CharField(help_text="The text to put in the prompt.")
    total_tokens = serializers.IntegerField(help_text="The prompt re-counted: <= max_tokens.")
    max_tokens = serializers.IntegerField()
    encoding = serializers.CharField()
    sections = ContextSectionOutputSerializer(many=True)
    notes = serializers.ListField(child=serializers.CharField(), help_text="What was degraded.")
    full_history_tokens = serializers.IntegerField(
        help_text="What the whole conversation (the room's, else the user's) would have taken."
    )
    saved_tokens = serializers.IntegerField()
    duplicates = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="With explain: items left out as already in a more valuable section.",
    )
    timings_ms = serializers.DictField(child=serializers.FloatField())


def _item(candidate: Any, explain: bool) -> dict[str, Any]:
    item = {
        "id": candidate.key,
        "kind": candidate.kind,
        "text": candidate.text,
        "score": round(candidate.score, 4),
        "tokens": candidate.tokens,
    }
    if explain:
        parts = f" ({', '.join(f'{k} {v}' for k, v in candidate.parts.items())})"
        item["why"] = (candidate.why or "ranked by score") + (parts if candidate.parts else "")
    return item


def _section(section: Section, explain: bool) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "name": section.name,
        "budget": section.budget,
        "tokens": section.tokens,
        "items": [_item(c, explain) for c in section.items],
    }
    if explain:
        payload["dropped"] = [
            {"id": c.key, "text": c.text, "score": round(c.score, 4), "why": why}
            for c, why in section.dropped
        ]
    return payload


def _payload(result: ContextResult, explain: bool) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "query": result.query,
        "prompt": result.prompt,
        "total_tokens": result.total_tokens,
        "max_tokens": result.max_tokens,
        "encoding": result.encoding,
        "sections": [_section(s, explain) for s in result.sections],
        "notes": result.notes,
        "full_history_tokens": result.full_history_tokens,
        "saved_tokens": result.saved_tokens,
        "timings_ms": result.timings_ms,
    }
    if explain:
        payload["duplicates"] = [
            {"id": c.key, "section": c.section, "text": c.text} for c in result.duplicates
        ]
    return payload


@extend_schema(tags=["context"])
class ContextView(APIView):
    read_only_post = True  # building a context changes nothing an agent wrote

    @extend_schema(
        request=ContextInputSerializer,
        responses={
            200: ContextOutputSerializer,
            404: OpenApiResponse(ERROR_REF, description="No such user or room in the project."),
        },
    )
    def post(self, request: Request) -> Response:
        """Everything to put in the prompt for this user and query: the synopsis, the
        facts ranked by 0.6 x similarity + 0.4 x confidence (the project's weights), working
        notes, the room's recent turns and newest summary, and older memories by search;
        de-duplicated across sections and fitted to `max_tokens` (re-counted). Each
        section's items come with their tokens; `full_history_tokens` and `saved_tokens`
        say what the whole conversation would have cost."""
        data = ContextInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        end_user = end_user_get(request, params["user"])
        end_user.project = project_of(request)  # loaded already: the synopsis cache needs it
        room = room_get(request, params["room"]) if params.get("room") else None
        result = context_build(
            end_user=end_user,
            room=room,
            agent=params.get("agent"),
            world=params.get("world"),
            query=(params.get("query") or "").strip() or None,
            messages=params.get("messages"),
            max_tokens=params.get("max_tokens"),
            shares=params.get("budgets"),
            encoding=params.get("encoding"),
            similarity_weight=params.get("similarity_weight"),
            confidence_weight=params.get("confidence_weight"),
        )
        # the payload is made of what ContextOutputSerializer would render (it documents
        # the response; a test holds the two equal): rendering ~30 items through DRF's
        # nested serializers took ~1.3 ms of each context
        return Response(_payload(result, params["explain"]))
