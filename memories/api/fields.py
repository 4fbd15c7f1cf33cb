"""Serializer fields the API's bodies and filters share: ids chosen by the agent
platform, JSON objects and memory text, each with the limits that keep hostile input
from reaching PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memories.api.validators import id_validator, json_depth_validate
from memories.services.export_checks import has_null_character


def external_id_field(**kwargs: Any) -> serializers.CharField:
    """An id chosen by the agent platform (users, rooms, agents): no NUL or control
    characters (a 400 naming the field, in a body or a filter)."""
    return serializers.CharField(
        max_length=255, allow_blank=False, validators=[id_validator], **kwargs
    )


def hub_limit(name: str) -> int:
    """An input limit of MEMORYHUB (read per request: tests and operators change it)."""
    return int(settings.MEMORYHUB[name])


def no_slash(value: str | None) -> str | None:
    """External ids of users and rooms appear in URL paths: no '/'."""
    if value is not None and "/" in value:
        raise serializers.ValidationError("May not contain '/'.")
    return value


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
        max_bytes = hub_limit("MAX_METADATA_BYTES")
        if len(json.dumps(value)) > max_bytes:
            self.fail("too_large", max_bytes=max_bytes)
        if has_null_character(value):
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
        max_chars = hub_limit("MAX_CONTENT_CHARS")
        if len(value) > max_chars:
            raise serializers.ValidationError(
                f"Ensure this field has no more than {max_chars} characters (it has {len(value)})."
            )
        if "\x00" in value:
            raise serializers.ValidationError("Null characters are not allowed.")
        return value
