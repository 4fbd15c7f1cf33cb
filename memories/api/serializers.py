"""Serializers of memories (input and output kept apart): create, batch, update, the
list's filters, a memory, its revisions, and the pages of both."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memories.api.fields import (
    ContentField,
    JSONObjectField,
    external_id_field,
    hub_limit,
    no_slash,
)
from memories.api.pagination import page_serializer
from memories.models import Memory, MemoryRevision
from memories.structured import (
    FACT_CATEGORIES,
    GOAL_STATUSES,
    StructuredContentError,
    structured_content_clean,
)

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
        return no_slash(value)

    def validate_room(self, value: str | None) -> str | None:
        return no_slash(value)

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
        max_size = hub_limit("MAX_BATCH_SIZE")
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
    """The list's filters and its order (its pages: pagination.PageQuerySerializer)."""

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
            "id",
            "user",
            "room",
            "agent",
            "kind",
            "role",
            "content",
            "content_json",
            "metadata",
            "importance",
            "pinned",
            "importance_score",
            "confidence",
            "access_count",
            "accessed_at",
            "status",
            "embedding_status",
            "source_ids",
            "document_id",
            "chunk_index",
            "created_at",
            "updated_at",
        ]
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


# DRF builds a ModelSerializer's fields anew for every instance, which costs more than
# rendering a memory; to_representation only reads them, so one instance serves every
# request and thread
MEMORY_OUTPUT = MemoryOutputSerializer()


@extend_schema_field(MemoryOutputSerializer)
class SharedMemoryField(serializers.Field):
    """A memory, rendered by MEMORY_OUTPUT (output only)."""

    def to_representation(self, value: Memory) -> dict[str, Any]:
        return MEMORY_OUTPUT.to_representation(value)


class DeletedOutputSerializer(serializers.Serializer):
    deleted = serializers.IntegerField(help_text="How many memories were deleted.")


class CountOutputSerializer(serializers.Serializer):
    count = serializers.IntegerField()


MemoryPageOutputSerializer = page_serializer(
    MemoryOutputSerializer, order="Newest first (oldest first with order=asc)."
)
MemoryRevisionPageOutputSerializer = page_serializer(
    MemoryRevisionOutputSerializer, order="Newest first."
)


class MemoryBatchOutputSerializer(serializers.Serializer):
    results = MemoryCreatedOutputSerializer(many=True, help_text="In the order of the input.")
