"""Serializers of memories (input and output kept apart): create, batch, update, the
list's filters, a memory, its revisions, and the pages of both."""

from __future__ import annotations

from typing import Any

import numpy as np
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
from memories.api.validators import FLOAT32_MAX, Float32Field, VectorField
from memories.models import Memory, MemoryRevision
from memories.services.embedding_spaces import project_dimension
from memories.services.erasure import ErasureReceipt
from memories.structured import (
    FACT_CATEGORIES,
    GOAL_STATUSES,
    StructuredContentError,
    structured_content_clean,
)

PINNED_HELP = "Never pruned; explicit importance counts as 1."


class VectorNumberField(Float32Field):
    """A JSON number of a stored vector: not a string or a boolean, which a FloatField
    would read as one ("0.5", true)."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


class ProjectVectorField(VectorField):
    """A vector of the space the project serves from (``context["project"]``): as many
    numbers as its dimension, counted before the numbers are read, each finite and
    within float32 (validators.Float32Field), not all zero (a cosine to it is undefined).

    Its length is the project's, not a fixed one: a project that switched models has
    another dimension (memories.services.embedding_spaces.project_dimension)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=VectorNumberField(), min_length=1, **kwargs)

    def to_internal_value(self, data: Any) -> list[float]:
        dimension = project_dimension(self.context["project"])
        if isinstance(data, list) and len(data) != dimension:
            raise serializers.ValidationError(
                f"Expected {dimension} numbers (the project's embedding space's dimension), "
                f"got {len(data)}."
            )
        # the field per number only for a vector that fails: it names the number
        vector = plain_vector(data)
        if vector is None:
            vector = super().to_internal_value(data)
        if not any(vector):
            raise serializers.ValidationError("A vector of zeros has no direction.")
        return vector


def plain_vector(data: Any) -> list[float] | None:
    """``data`` as floats if it is a list of JSON numbers, each finite and within
    float32; else None. One numpy check: a field per number took ~0.8 ms a vector of
    384, most of the time of a batch of 1,000 that carries them."""
    if not isinstance(data, list) or not set(map(type, data)) <= {float, int}:
        return None
    try:
        array = np.asarray(data, dtype=np.float64)
    except OverflowError:  # an integer past a double
        return None
    if not bool(np.all(np.abs(array) <= FLOAT32_MAX)):  # NaN compares false too
        return None
    return array.tolist()  # type: ignore[no-any-return]


class MemoryInputSerializer(serializers.Serializer):
    """One memory to write; context["project"]: the writer's (``embedding``'s dimension)."""

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
    embedding = ProjectVectorField(
        required=False,
        allow_null=True,
        help_text="The memory's own vector, made by the project's embedding model (GET "
        "/api/v1/embedding/ names it and its dimension): stored as given, and the memory "
        "is embedded at once (embedding_status done) with no worker (during a model switch, "
        "the switch's job embeds its text with the new model). Ignored when the write "
        "returns a memory already stored (the same `id`, or `unique` and the same text); "
        "null: none.",
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


class MemoryCountQuerySerializer(MemoryFilterSerializer):
    """The filters of a list or a count: the bulk delete's, and the agent and the world
    (which the bulk delete does not take)."""

    agent = external_id_field(
        required=False, help_text="Only the memories of this agent (its external id)."
    )
    world = external_id_field(
        required=False, help_text="Only the memories of the rooms of this world (world_id)."
    )


class MemoryListQuerySerializer(MemoryCountQuerySerializer):
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
            "intent",
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
    deleted = serializers.IntegerField(
        help_text="How many memories were erased, those derived from them alone included."
    )
    erased = serializers.DictField(
        child=serializers.IntegerField(),
        help_text=(
            "The erasure receipt: what went, per table or kind (only counts above 0). "
            "memories (as `deleted`), of which facts and summaries erased because they "
            "derived from the others alone; embeddings; revisions_redacted (history rows "
            "that now keep a SHA-256 instead of the words); facts_unlinked (confirmed by "
            "a message that stays: kept, the erased source removed); messages_restored (a "
            "cut summary's turns back in the buffer); synopsis_parts_cleared, "
            "synopsis_revisions_redacted, idempotency_keys, parked_tasks, "
            "admin_log_entries; for a user: users, documents, synopses, "
            "synopsis_revisions, working_memory_rooms; for a room: rooms, "
            "working_memory_rooms."
        ),
    )


def receipt_body(receipt: ErasureReceipt) -> dict[str, Any]:
    """A delete's answer (DeletedOutputSerializer): every memory erased, the receipt."""
    return {"deleted": receipt.counts["memories"], "erased": receipt.as_dict()}


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
