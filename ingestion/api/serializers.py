"""Input and output serializers of the documents API (input and output kept apart)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ingestion.chunkers import CHUNKERS
from ingestion.models import Document
from memories.api.fields import JSONObjectField, external_id_field, no_slash
from memories.api.pagination import page_serializer
from memories.models import Memory


class _UploadOptions(serializers.Serializer):
    title = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=500,
        default="",
        help_text="Default: the document's own title (a PDF's, a first heading), else the source.",
    )
    user = external_id_field(
        required=False,
        allow_null=True,
        help_text="Only this end user's searches find it (created if new); absent: the "
        "whole project's.",
    )
    chunker = serializers.ChoiceField(
        choices=CHUNKERS, required=False, help_text="Default: the project's ingestion.chunker."
    )

    def validate_user(self, value: str | None) -> str | None:
        return no_slash(value)  # user ids appear in URL paths


class DocumentTextInputSerializer(_UploadOptions):
    """POST /documents/ as JSON: a text and the name of its source."""

    text = serializers.CharField(trim_whitespace=False, help_text="The document's text.")
    source = serializers.CharField(  # type: ignore[assignment]  # a field, not Field.source
        max_length=500,
        help_text="Its name (e.g. 'faq.md'; the extension tells Markdown from plain text); "
        "new text under a source the scope has replaces that document's.",
    )
    chunker_settings = JSONObjectField(
        required=False, help_text='Over the project\'s defaults, e.g. {"window_size": 256}.'
    )
    metadata = JSONObjectField(
        required=False, default=dict, help_text="Copied to every chunk (search filters on it)."
    )

    def validate_text(self, value: str) -> str:
        if "\x00" in value:
            raise serializers.ValidationError("Null characters are not allowed.")
        return value


class DocumentFileInputSerializer(_UploadOptions):
    """POST /documents/ as multipart/form-data: the file and the options as fields."""

    file = serializers.FileField(help_text="PDF, DOCX, Markdown, HTML, JSON or plain text.")
    source = serializers.CharField(  # type: ignore[assignment]  # a field, not Field.source
        max_length=500, required=False, help_text="Default: the file's name."
    )
    chunker_settings = JSONObjectField(
        binary=True, required=False, help_text="A JSON object, as a string."
    )
    metadata = JSONObjectField(
        binary=True, required=False, default=dict, help_text="A JSON object, as a string."
    )


class DocumentReingestInputSerializer(serializers.Serializer):
    chunker = serializers.ChoiceField(
        choices=CHUNKERS, required=False, help_text="Default: the document's chunker."
    )
    chunker_settings = JSONObjectField(
        required=False,
        help_text="Over the document's settings (or, for another chunker, the project's defaults).",
    )


class DocumentListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Document.Status.choices, required=False)
    user = external_id_field(required=False, help_text="Only this user's documents.")
    scope = serializers.ChoiceField(
        choices=["project", "user"],
        required=False,
        help_text="project: shared with the whole project; user: attached to a user.",
    )


class ChunkListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=[Memory.Status.ACTIVE.value, Memory.Status.STAGED.value],
        default=Memory.Status.ACTIVE,
        help_text="active: the served version's chunks; staged: the version being ingested.",
    )


class ProgressOutputSerializer(serializers.Serializer):
    done = serializers.IntegerField(help_text="Chunks embedded.")
    total = serializers.IntegerField(help_text="Chunks of the version (0 until chunked).")
    percent = serializers.FloatField()


class DocumentOutputSerializer(serializers.ModelSerializer):
    user = serializers.SerializerMethodField()
    scope = serializers.CharField(help_text="project or user")
    progress = ProgressOutputSerializer()

    class Meta:
        model = Document
        fields = [
            "id",
            "title",
            "source",
            "user",
            "scope",
            "mime_type",
            "size",
            "sha256",
            "status",
            "error",
            "progress",
            "timings",
            "chunker",
            "chunker_settings",
            "version",
            "served_version",
            "metadata",
            "created_at",
            "updated_at",
            "finished_at",
        ]
        extra_kwargs = {
            "timings": {"help_text": "Milliseconds: parse_ms, chunk_ms, embed_ms, total_ms."},
            "served_version": {
                "help_text": "The version whose chunks search finds (null until one is done)."
            },
        }

    def get_user(self, document: Document) -> str | None:
        return document.end_user.external_id if document.end_user else None


class DocumentUploadOutputSerializer(DocumentOutputSerializer):
    duplicate = serializers.BooleanField(
        help_text="True when the scope already had these bytes: that document, nothing queued."
    )

    class Meta(DocumentOutputSerializer.Meta):
        fields = [*DocumentOutputSerializer.Meta.fields, "duplicate"]


def document_upload_data(document: Document, duplicate: bool) -> dict[str, Any]:
    return {**DocumentOutputSerializer(document).data, "duplicate": duplicate}


class ChunkOutputSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(
        source="public_id", read_only=True, help_text="The chunk's memory id (in this project)."
    )
    citation = serializers.JSONField(
        source="content_json",
        help_text="document {id, title, source}, start and end (characters of the "
        "document's text), page and page_end (PDF), heading (its path; a JSON path for JSON).",
    )

    class Meta:
        model = Memory
        fields = [
            "id",
            "chunk_index",
            "content",
            "citation",
            "status",
            "embedding_status",
            "created_at",
        ]


DocumentPageOutputSerializer = page_serializer(DocumentOutputSerializer, order="Newest first.")
ChunkPageOutputSerializer = page_serializer(ChunkOutputSerializer, order="In document order.")
