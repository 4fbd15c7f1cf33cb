"""Checks of hostile input that would otherwise reach PostgreSQL or the stack and come
back as a 500: ids with NUL or control characters, vectors outside float32, JSON nested
too deep. Each refusal is a 400 naming the field."""

from __future__ import annotations

import unicodedata
from typing import Any

from django.conf import settings
from rest_framework import serializers

# pgvector stores float4: a finite double beyond this overflows and PostgreSQL refuses it
FLOAT32_MAX = 3.4028235e38  # rounds to float32's largest finite value


def max_json_depth() -> int:
    """Levels of nesting a JSON body or field may have (MEMORYHUB_MAX_JSON_DEPTH)."""
    return int(settings.MEMORYHUB["MAX_JSON_DEPTH"])


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be an id (a path segment, a filter, a stored external id), or
    None. PostgreSQL refuses NUL in text; other control characters and lone surrogates
    make ids that cannot be shown, typed or encoded."""
    if "\x00" in value:
        return "Null characters are not allowed."
    for char in value:
        if unicodedata.category(char) in ("Cc", "Cs"):
            return f"Control characters are not allowed (found U+{ord(char):04X})."
    return None


def id_validate(value: Any, field: str) -> None:
    """A 400 naming ``field`` if ``value`` is a string that cannot be an id."""
    if isinstance(value, str):
        problem = id_problem(value)
        if problem:
            raise serializers.ValidationError({field: [problem]})


def id_validator(value: Any) -> None:
    """The same check as a DRF field validator (the field names itself)."""
    if isinstance(value, str):
        problem = id_problem(value)
        if problem:
            raise serializers.ValidationError(problem)


def json_depth(value: Any, limit: int) -> int:
    """The nesting depth of a parsed JSON value (a scalar is 0, ``{}`` 1), counted
    without recursion; stops counting once past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def json_depth_validate(value: Any) -> None:
    """A field validator: at most MEMORYHUB_MAX_JSON_DEPTH levels of nesting."""
    limit = max_json_depth()
    if json_depth(value, limit) > limit:
        raise serializers.ValidationError(f"Nested deeper than {limit} levels of JSON.")


class Float32Field(serializers.FloatField):
    """A finite number that a float4 (pgvector's element type) can hold."""

    default_error_messages = {
        "float32": "Must be within float32 range (|x| <= 3.4028235e38).",
    }

    def to_internal_value(self, data: Any) -> float:
        value: float = super().to_internal_value(data)  # refuses NaN and infinities
        if abs(value) > FLOAT32_MAX:
            self.fail("float32")
        return value


class VectorField(serializers.ListField):
    """A list of float32 numbers; its length is checked before its items (a list of a
    million numbers is refused at once, not after a million checks)."""

    def to_internal_value(self, data: Any) -> list[float]:
        if isinstance(data, list) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)  # type: ignore[no-any-return]


def vector_field(*, dimension: int | None = None, **kwargs: Any) -> VectorField:
    """A vector of float32 numbers; with ``dimension``, of exactly that many (the OpenAPI
    schema then says so with minItems/maxItems)."""
    if dimension is not None:
        kwargs.setdefault("min_length", dimension)
        kwargs.setdefault("max_length", dimension)
        expected = "Expected {n} numbers (the embedding space's dimension)."
        kwargs.setdefault(
            "error_messages",
            {
                "min_length": expected.replace("{n}", "{min_length}"),
                "max_length": expected.replace("{n}", "{max_length}"),
            },
        )
    return VectorField(child=Float32Field(min_value=-FLOAT32_MAX, max_value=FLOAT32_MAX), **kwargs)
