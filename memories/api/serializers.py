"""Input and output serializers of API v1 (input and output kept apart)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memories.api.validators import id_validator, json_depth_validate, vector_field
from memories.models import EndUser, Memory, MemoryRevision, Room
from memories.services.configuration import project_settings_get
from memories.services.search import SearchMode
from memories.structured import (
    FACT_CATEGORIES,
    GOAL_STATUSES,
    StructuredContentError,
    structured_content_clean,
)


def external_id_field(**kwargs: Any) -> serializers.CharField:
    """An id chosen by the agent platform (users, rooms, agents): no NUL or control
    characters (a 400 naming the field, in a body or a filter)."""
    return serializers.CharField(
        max_length=255, allow_blank=False, validators=[id_validator], **kwargs
    )


def _limit(name: str) -> int:
    return int(settings.MEMORYHUB[name])


def _no_slash(value: str | None) -> str | None:
    """External ids of users and rooms appear in URL paths: no '/'."""
    if value is not None and "/" in value:
        raise serializers.ValidationError("May not contain '/'.")
    return value


def _has_null_character(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_null_character(k) or _has_null_character(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_null_character(item) for item in value)
    return False


@extend_schema_field({"type": "object", "additionalProperties": {}})
class JSONObjectField(serializers.JSONField):
    """A JSON object (not a list or scalar) of bounded size and depth."""

    default_error_messages = {
        "not_object": "Must be a JSON object.",
        "too_large": "Must be at most {max_bytes} bytes of JSON.",
        # PostgreSQL's jsonb refuses \u0000: a 400 here, not a 500 at the INSERT
        "null_character": "Null characters are not allowed.",
    }

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            self.fail("not_object")
        json_depth_validate(value)  # before json.dumps recurses into it
        max_bytes = _limit("MAX_METADATA_BYTES")
        if len(json.dumps(value)) > max_bytes:
            self.fail("too_large", max_bytes=max_bytes)
        if _has_null_character(value):
            self.fail("null_character")
        return value


class ContentField(serializers.CharField):
    """Memory text: not empty, at most MEMORYHUB_MAX_CONTENT_CHARS characters."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not value.strip():
            raise serializers.ValidationError("This field may not be blank.")
        max_chars = _limit("MAX_CONTENT_CHARS")
        if len(value) > max_chars:
            raise serializers.ValidationError(
                f"Ensure this field has no more than {max_chars} characters (it has {len(value)})."
            )
        if "\x00" in value:
            raise serializers.ValidationError("Null characters are not allowed.")
        return value


PINNED_HELP = "Never pruned; explicit importance counts as 1."


class MemoryInputSerializer(serializers.Serializer):
    id = serializers.UUIDField(
        required=False,
        help_text="Client-chosen id, unique within the project; a retry returns the stored memory.",
    )
    user = external_id_field(
        required=False, allow_null=True, help_text="End user external id (created if new)."
    )
    room = external_id_field(
        required=False, allow_null=True, help_text="Room external id (created if new)."
    )
    agent = external_id_field(required=False, allow_null=True)
    kind = serializers.ChoiceField(choices=Memory.Kind.choices, default=Memory.Kind.MESSAGE)
    role = serializers.ChoiceField(
        choices=Memory.Role.choices, required=False, allow_blank=True, default=""
    )
    content = ContentField()
    content_json = JSONObjectField(
        required=False, default=dict, help_text="action, source, url, attachments"
    )
    metadata = JSONObjectField(required=False, default=dict)
    importance = serializers.FloatField(required=False, min_value=0.0, max_value=1.0)
    pinned = serializers.BooleanField(required=False, help_text=PINNED_HELP)
    confidence = serializers.FloatField(required=False, min_value=0.0, max_value=1.0)
    unique = serializers.BooleanField(
        default=False,
        help_text="Skip the write if the same text is stored for this user, room and kind.",
    )
    created_at = serializers.DateTimeField(
        required=False, help_text="When it happened (default: now)."
    )

    # as when created directly: a user or room with a '/' would have no URL of its own
    def validate_user(self, value: str | None) -> str | None:
        return _no_slash(value)

    def validate_room(self, value: str | None) -> str | None:
        return _no_slash(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs["content_json"] = structured_content_validated(
            attrs["kind"], attrs.get("content_json", {})
        )
        return attrs


def structured_content_validated(kind: str, content_json: dict[str, Any]) -> dict[str, Any]:
    """A kind's content_json checked (memories/structured.py), as a 400 naming each key."""
    try:
        return structured_content_clean(kind=kind, content_json=content_json)
    except StructuredContentError as error:
        raise serializers.ValidationError({"content_json": error.errors}) from None


class MemoryBatchInputSerializer(serializers.Serializer):
    memories = MemoryInputSerializer(many=True, allow_empty=False)

    def validate_memories(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        max_size = _limit("MAX_BATCH_SIZE")
        if len(value) > max_size:
            raise serializers.ValidationError(f"At most {max_size} memories per batch.")
        return value


class MemoryUpdateSerializer(serializers.Serializer):
    content = ContentField(required=False)
    content_json = JSONObjectField(required=False)
    metadata = JSONObjectField(required=False)
    role = serializers.ChoiceField(choices=Memory.Role.choices, required=False, allow_blank=True)
    importance = serializers.FloatField(required=False, min_value=0.0, max_value=1.0)
    pinned = serializers.BooleanField(required=False, help_text=PINNED_HELP)
    confidence = serializers.FloatField(required=False, min_value=0.0, max_value=1.0)
    status = serializers.ChoiceField(choices=Memory.Status.choices, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """context["kind"]: the memory's kind, whose content_json rules apply."""
        if not attrs:
            raise serializers.ValidationError("Give at least one field to change.")
        if "content_json" in attrs:
            attrs["content_json"] = structured_content_validated(
                self.context["kind"], attrs["content_json"]
            )
        return attrs


class MemoryFilterSerializer(serializers.Serializer):
    """Query parameters selecting memories (list, count, bulk delete)."""

    user = external_id_field(required=False)
    room = external_id_field(required=False)
    kind = serializers.ListField(
        child=serializers.ChoiceField(choices=Memory.Kind.choices), required=False
    )
    status = serializers.ChoiceField(choices=Memory.Status.choices, required=False)
    category = serializers.ChoiceField(
        choices=FACT_CATEGORIES, required=False, help_text="Facts of this category."
    )
    goal_status = serializers.ChoiceField(
        choices=GOAL_STATUSES, required=False, help_text="Goals with this status."
    )
    subject = serializers.CharField(required=False, max_length=255, help_text="Relationships.")
    predicate = serializers.CharField(required=False, max_length=255, help_text="Relationships.")
    object = serializers.CharField(required=False, max_length=255, help_text="Relationships.")
    start = serializers.DateTimeField(required=False, help_text="created_at >= start")
    end = serializers.DateTimeField(required=False, help_text="created_at < end")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("start") and attrs.get("end") and attrs["start"] >= attrs["end"]:
            raise serializers.ValidationError({"end": ["Must be after start."]})
        return attrs


class MemoryListQuerySerializer(MemoryFilterSerializer):
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=50)
    # a cursor of _cursor_encode is ~80 characters: a longer one is not ours
    cursor = serializers.CharField(required=False, max_length=200)
    order = serializers.ChoiceField(choices=["desc", "asc"], default="desc")


class MemoryOutputSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(
        source="public_id", read_only=True, help_text="Unique within the project."
    )
    user = serializers.SerializerMethodField()
    room = serializers.SerializerMethodField()
    agent = serializers.SerializerMethodField()

    class Meta:
        model = Memory
        fields = [
            "id", "user", "room", "agent", "kind", "role", "content", "content_json", "metadata",
            "importance", "pinned", "importance_score", "confidence", "access_count",
            "accessed_at", "status", "embedding_status", "source_ids", "document_id",
            "chunk_index", "created_at", "updated_at",
        ]  # fmt: skip
        extra_kwargs = {
            "pinned": {"help_text": PINNED_HELP},
            "importance_score": {
                "help_text": "MUXI importance: recency, access frequency and explicit "
                "importance, weighted by the project's importance settings; recomputed by beat."
            },
        }

    # with_external_ids() annotates these; a memory loaded otherwise reads its relations
    def get_user(self, memory: Memory) -> str | None:
        return _external_id(memory, "user_external_id", "end_user")

    def get_room(self, memory: Memory) -> str | None:
        return _external_id(memory, "room_external_id", "room")

    def get_agent(self, memory: Memory) -> str | None:
        return _external_id(memory, "agent_external_id", "agent")


def _external_id(memory: Memory, annotation: str, relation: str) -> str | None:
    if hasattr(memory, annotation):
        return getattr(memory, annotation)  # type: ignore[no-any-return]
    related = getattr(memory, relation) if getattr(memory, f"{relation}_id") else None
    return related.external_id if related is not None else None


class MemoryCreatedOutputSerializer(serializers.Serializer):
    created = serializers.BooleanField(
        help_text="False when an identical unique memory or id existed."
    )
    memory = MemoryOutputSerializer()


class MemoryRevisionOutputSerializer(serializers.ModelSerializer):
    memory_id = serializers.UUIDField(source="memory_public_id", read_only=True)

    class Meta:
        model = MemoryRevision
        fields = [
            "id",
            "memory_id",
            "action",
            "actor_type",
            "actor",
            "before",
            "after",
            "created_at",
        ]


class SearchInputSerializer(serializers.Serializer):
    query = serializers.CharField(required=False, max_length=4000, help_text="Text to search for.")
    embedding = vector_field(
        dimension=int(settings.EMBEDDING["DIMENSION"]), required=False,
        help_text="A raw query vector of the space's dimension (float32 numbers), instead "
        "of or with `query`.",
    )  # fmt: skip
    mode = serializers.ChoiceField(
        choices=SearchMode.ALL,
        required=False,
        help_text="auto (BM25 + cosine, with neighbouring turns), vector, keyword, hybrid "
        "(RRF); absent: the project's search.default_mode (auto unless changed).",
    )
    user = external_id_field(required=False)
    room = external_id_field(required=False)
    kind = serializers.ListField(
        child=serializers.ChoiceField(choices=Memory.Kind.choices), required=False
    )
    status = serializers.ListField(
        child=serializers.ChoiceField(choices=Memory.Status.choices),
        required=False,
        allow_empty=False,
        help_text="Only memories of these statuses (default: active). `archived` finds the "
        "messages a room's summaries condensed.",
    )
    metadata = JSONObjectField(
        required=False, help_text="Only memories whose metadata contains this."
    )
    start = serializers.DateTimeField(required=False)
    end = serializers.DateTimeField(required=False)
    document = serializers.UUIDField(
        required=False, help_text="Only the knowledge chunks of this document (its id)."
    )
    k = serializers.IntegerField(default=10, min_value=1)
    threshold = serializers.FloatField(required=False, min_value=0.0, max_value=1.0)
    explain = serializers.BooleanField(default=False)

    def validate_k(self, value: int) -> int:
        max_k = _limit("MAX_SEARCH_K")
        if value > max_k:
            raise serializers.ValidationError(
                f"Ensure this value is less than or equal to {max_k}."
            )
        return value

    def validate_embedding(self, value: list[float]) -> list[float]:
        dimension = int(settings.EMBEDDING["DIMENSION"])
        if len(value) != dimension:
            raise serializers.ValidationError(
                f"Expected {dimension} numbers (the embedding space's dimension), got {len(value)}."
            )
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Also sets ``mode`` when absent: the default of the project in the context."""
        if "mode" not in attrs:
            policy = project_settings_get(project=self.context["project"]).search
            attrs["mode"] = policy.default_mode
        query = (attrs.get("query") or "").strip()
        if attrs["mode"] == SearchMode.KEYWORD and not query:
            raise serializers.ValidationError({"query": ["Keyword search needs a query text."]})
        if not query and "embedding" not in attrs:
            raise serializers.ValidationError({"query": ["Give a query text or an embedding."]})
        if attrs.get("start") and attrs.get("end") and attrs["start"] >= attrs["end"]:
            raise serializers.ValidationError({"end": ["Must be after start."]})
        return attrs


# DRF builds a ModelSerializer's fields anew for every instance, which costs more than
# rendering a memory; to_representation only reads them, so one instance serves every
# request and thread
MEMORY_OUTPUT = MemoryOutputSerializer()


@extend_schema_field(MemoryOutputSerializer)
class SharedMemoryField(serializers.Field):
    """A memory, rendered by MEMORY_OUTPUT (output only)."""

    def to_representation(self, value: Memory) -> dict[str, Any]:
        return MEMORY_OUTPUT.to_representation(value)


class ExplainField(serializers.DictField):
    """Each signal's part of the score; present only when the context asks for it."""

    def get_attribute(self, instance: Any) -> Any:
        if not self.context.get("explain"):
            raise serializers.SkipField()
        return super().get_attribute(instance)


class SearchHitOutputSerializer(serializers.Serializer):
    memory = SharedMemoryField()
    score = serializers.FloatField()
    similarity = serializers.FloatField(allow_null=True, help_text="Cosine similarity, 0..1.")
    explain = ExplainField(
        required=False, help_text="Each signal's part of the score, when `explain` was asked."
    )


# renders a memories.services.search.SearchResult; context["explain"] adds each hit's explain
class SearchOutputSerializer(serializers.Serializer):
    mode = serializers.CharField(help_text="The mode used.")
    results = SearchHitOutputSerializer(many=True, source="hits")
    timings_ms = serializers.DictField(child=serializers.FloatField())


class EndUserInputSerializer(serializers.Serializer):
    external_id = external_id_field()
    name = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    metadata = JSONObjectField(required=False, default=dict)

    def validate_external_id(self, value: str) -> str:
        _no_slash(value)
        return value


class EndUserUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    metadata = JSONObjectField(required=False)


class EndUserOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = EndUser
        fields = ["external_id", "name", "metadata", "created_at", "updated_at"]


class RoomInputSerializer(EndUserInputSerializer):
    agent = external_id_field(required=False, allow_null=True)
    world_id = serializers.CharField(required=False, allow_blank=True, max_length=255, default="")


class RoomUpdateSerializer(EndUserUpdateSerializer):
    world_id = serializers.CharField(required=False, allow_blank=True, max_length=255)
    settings = serializers.JSONField(
        required=False,
        help_text="The room's own buffer and working-memory settings, over the project's "
        '(`{"buffer": {"max_size": 20}}`; null resets one to the project\'s value). '
        "Validated as in PATCH /api/v1/settings/.",
    )


class RoomOutputSerializer(serializers.ModelSerializer):
    agent = serializers.SerializerMethodField()

    class Meta:
        model = Room
        fields = [
            "external_id",
            "name",
            "agent",
            "world_id",
            "metadata",
            "settings",
            "created_at",
            "updated_at",
        ]
        extra_kwargs = {
            "settings": {"help_text": "The room's own overrides of the project's settings."}
        }

    def get_agent(self, room: Room) -> str | None:
        return room.agent.external_id if room.agent_id else None  # type: ignore[union-attr]


class DeletedOutputSerializer(serializers.Serializer):
    deleted = serializers.IntegerField(help_text="How many memories were deleted.")


class CountOutputSerializer(serializers.Serializer):
    count = serializers.IntegerField()


# Response envelopes, so the OpenAPI document describes what the views really return.


class MemoryPageOutputSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="How many memories match, over all pages.")
    next_cursor = serializers.CharField(
        allow_null=True, help_text="Pass as `cursor` for the next page; null on the last one."
    )
    results = MemoryOutputSerializer(many=True)


class MemoryBatchOutputSerializer(serializers.Serializer):
    results = MemoryCreatedOutputSerializer(many=True, help_text="In the order of the input.")


class MemoryRevisionListOutputSerializer(serializers.Serializer):
    results = MemoryRevisionOutputSerializer(many=True, help_text="Newest first.")


class EndUserPageOutputSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = EndUserOutputSerializer(many=True)


class RoomPageOutputSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = RoomOutputSerializer(many=True)
