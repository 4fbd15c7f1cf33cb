"""Serializers of the project's settings, generated from the configuration schema
(memories/config/) for the OpenAPI document: the API validates with memories.config,
which names each bad setting."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from memories.api.pagination import page_serializer
from memories.config import settings_schema
from memories.models import SettingsRevision


def _setting_field(entry: dict[str, Any], *, for_input: bool) -> serializers.Field:
    options: dict[str, Any] = {"help_text": entry["description"]}
    if for_input:  # PATCH: every setting optional; null puts it back to its default
        options.update(required=False, allow_null=True)
    if "choices" in entry:
        return serializers.ChoiceField(choices=entry["choices"], **options)
    if entry["type"] in ("integer", "number"):
        field_class = (
            serializers.IntegerField if entry["type"] == "integer" else serializers.FloatField
        )
        return field_class(
            min_value=entry.get("minimum"), max_value=entry.get("maximum"), **options
        )
    if entry["type"] == "boolean":
        return serializers.BooleanField(**options)
    return serializers.CharField(**options)


def _settings_serializer(suffix: str, *, for_input: bool) -> type[serializers.Serializer]:
    """A serializer of every section and setting, for the OpenAPI document: the API
    validates with memories.config, which names each bad setting."""
    sections = {}
    for section, entries in settings_schema().items():
        fields = {
            name: _setting_field(entry, for_input=for_input) for name, entry in entries.items()
        }
        section_class = type(
            f"{section.title()}Settings{suffix}Serializer", (serializers.Serializer,), fields
        )
        sections[section] = (
            section_class(required=False, allow_null=True) if for_input else section_class()
        )
    return type(f"ProjectSettings{suffix}Serializer", (serializers.Serializer,), sections)


SettingsInputSerializer = _settings_serializer("Input", for_input=True)
SettingsValuesSerializer = _settings_serializer("Values", for_input=False)


class SettingsOutputSerializer(serializers.Serializer):
    values = SettingsValuesSerializer(help_text="The effective value of every setting.")
    defaults = SettingsValuesSerializer(help_text="The schema's default of every setting.")
    overrides = serializers.JSONField(
        help_text="What this project sets itself, by section (the rest is the default)."
    )
    schema = serializers.JSONField(
        help_text="By section and name: type, default, minimum/maximum or choices, description."
    )


class SettingsRevisionOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = SettingsRevision
        fields = ["actor_type", "actor", "before", "after", "created_at"]


SettingsRevisionPageOutputSerializer = page_serializer(
    SettingsRevisionOutputSerializer, order="Newest first."
)
