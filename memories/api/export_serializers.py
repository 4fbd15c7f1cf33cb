"""Serializers of export and import. The document's serializers describe it for the
OpenAPI document; an import is checked by memories.services.export_checks, which names
each bad field by its path (``memories[3].kind``)."""

from __future__ import annotations

from rest_framework import serializers

from memories.models import Memory


class ExportQuerySerializer(serializers.Serializer):
    vectors = serializers.BooleanField(
        default=False, help_text="Add each memory's embedding windows with their space."
    )


class ExportUserSerializer(serializers.Serializer):
    external_id = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    metadata = serializers.JSONField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ExportRoomSerializer(ExportUserSerializer):
    agent = serializers.CharField(allow_null=True, help_text="Agent external id.")
    world_id = serializers.CharField(allow_blank=True)
    settings = serializers.JSONField(help_text="The room's own overrides of the settings.")


class ExportAgentSerializer(serializers.Serializer):
    external_id = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()


class ExportSpaceSerializer(serializers.Serializer):
    provider = serializers.CharField()
    model = serializers.CharField()
    dimension = serializers.IntegerField()


class ExportEmbeddingSerializer(serializers.Serializer):
    space = ExportSpaceSerializer()
    windows = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField()),
        help_text="One vector per window of the text, in text order.",
    )


class ExportMemorySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    user = serializers.CharField(allow_null=True, help_text="End user external id.")
    room = serializers.CharField(allow_null=True, help_text="Room external id.")
    agent = serializers.CharField(allow_null=True, help_text="Agent external id.")
    kind = serializers.ChoiceField(choices=Memory.Kind.choices)
    role = serializers.ChoiceField(choices=Memory.Role.choices, allow_blank=True)
    content = serializers.CharField()
    content_json = serializers.JSONField()
    metadata = serializers.JSONField()
    importance = serializers.FloatField()
    confidence = serializers.FloatField()
    access_count = serializers.IntegerField()
    accessed_at = serializers.DateTimeField(allow_null=True)
    status = serializers.ChoiceField(choices=Memory.Status.choices)
    unique = serializers.BooleanField()
    source_ids = serializers.ListField(
        child=serializers.UUIDField(), help_text="The memories this one was derived from."
    )
    document_id = serializers.UUIDField(allow_null=True)
    chunk_index = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    embeddings = ExportEmbeddingSerializer(
        many=True, required=False, help_text="With ?vectors=true: the vectors, by space."
    )


class ExportScopeSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["user", "room"])
    id = serializers.CharField(help_text="The user's or room's external id.")


class ExportDocumentSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=["memoryhub-export"])
    version = serializers.IntegerField(help_text="The format's version: 1.")
    exported_at = serializers.DateTimeField(required=False)
    scope = ExportScopeSerializer(required=False)
    users = ExportUserSerializer(many=True, required=False)
    rooms = ExportRoomSerializer(many=True, required=False)
    agents = ExportAgentSerializer(many=True, required=False)
    memories = ExportMemorySerializer(many=True, help_text="Oldest first (created_at, id).")


class CreatedExistingSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    existing = serializers.IntegerField(help_text="Already in the project: left as they were.")


class ImportMemoriesSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    skipped = serializers.IntegerField(
        help_text="Already in the project (same id, or the same unique text)."
    )


class ImportVectorsSerializer(serializers.Serializer):
    stored = serializers.IntegerField(help_text="Memories whose vectors were stored.")
    ignored = serializers.IntegerField(
        help_text="Memories whose vectors were of another embedding space: embedded again."
    )


class ImportOutputSerializer(serializers.Serializer):
    users = CreatedExistingSerializer()
    rooms = CreatedExistingSerializer()
    agents = CreatedExistingSerializer()
    memories = ImportMemoriesSerializer()
    vectors = ImportVectorsSerializer()
    notes = serializers.ListField(child=serializers.CharField())
