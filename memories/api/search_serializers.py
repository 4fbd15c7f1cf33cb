"""Serializers of POST /api/v1/search/: the query and its filters in, the ranked hits
out (input and output kept apart)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from memories.api.fields import JSONObjectField, external_id_field, hub_limit
from memories.api.serializers import SharedMemoryField
from memories.api.validators import vector_field
from memories.models import Memory
from memories.services.configuration import project_settings_get
from memories.services.search import SearchMode


class SearchInputSerializer(serializers.Serializer):
    query = serializers.CharField(required=False, max_length=4000, help_text="Text to search for.")
    embedding = vector_field(
        dimension=int(settings.EMBEDDING["DIMENSION"]),
        required=False,
        help_text="A raw query vector of the space's dimension (float32 numbers), instead "
        "of or with `query`.",
    )
    mode = serializers.ChoiceField(
        choices=SearchMode.ALL,
        required=False,
        help_text="auto (BM25 + cosine, with neighbouring turns), vector, keyword, hybrid "
        "(RRF); absent: the project's search.default_mode (auto unless changed).",
    )
    user = external_id_field(required=False)
    room = external_id_field(required=False)
    agent = external_id_field(
        required=False, help_text="Only the memories of this agent (its external id)."
    )
    world = external_id_field(
        required=False, help_text="Only the memories of the rooms of this world (world_id)."
    )
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
        max_k = hub_limit("MAX_SEARCH_K")
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
