"""The base of every result type and the decoder from the hub's JSON to it.

Every result is a frozen, keyword-only dataclass whose field names are the API's. A
field a newer hub sends that this client does not know is kept, untouched, in the
result's ``extra`` dict (never an error); a field the API marks optional that an older
hub leaves out takes its default. ``__schema__`` names the OpenAPI components a class
maps, so a test can say which new field of the schema the class lacks.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar, Union

__all__ = ["Model", "Page", "decode", "decode_list", "parse_datetime"]

M = TypeVar("M", bound="Model")
T = TypeVar("T")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Model:
    """A result of the hub; ``extra`` holds the fields this client does not know."""

    __schema__: ClassVar[tuple[str, ...]] = ()

    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls: type[M], data: Mapping[str, Any]) -> M:
        """Build one from the hub's JSON object (unknown fields go to ``extra``)."""
        return decode(cls, data)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Page(Generic[T]):
    """One page of a list: ``count`` matches over all pages; ``next_cursor`` fetches the
    next page (None on the last)."""

    count: int
    next_cursor: str | None
    results: list[T]


def parse_datetime(value: Any) -> datetime | None:
    """An ISO 8601 string as an aware datetime ('Z' accepted on every Python)."""
    if value is None or isinstance(value, datetime):
        return value
    text = str(value)
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text)


Convert = Callable[[Any], Any]
# per class: (field name, converter, required) for each field but ``extra``, made once
_PLANS: dict[type, tuple[tuple[str, Convert, bool], ...]] = {}


def _keep(value: Any) -> Any:
    return value


def _converter(hint: Any) -> Convert:
    """A function turning a JSON value into what the annotation ``hint`` says (nested
    results, lists and dicts of them, times); None stays None."""
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return _converter(inner[0]) if len(inner) == 1 else _keep
    if origin is list:
        item = _converter((typing.get_args(hint) or (Any,))[0])
        if item is _keep:
            return _keep
        return lambda value: [item(v) for v in value] if isinstance(value, list) else value
    if origin is dict:
        element = _converter((typing.get_args(hint) or (str, Any))[-1])
        if element is _keep:
            return _keep
        return lambda value: (
            {key: element(v) for key, v in value.items()} if isinstance(value, Mapping) else value
        )
    if isinstance(hint, type) and issubclass(hint, Model):
        return lambda value: decode(hint, value) if isinstance(value, Mapping) else value
    if hint is datetime:
        return parse_datetime
    return _keep


def _plan(cls: type) -> tuple[tuple[str, Convert, bool], ...]:
    if cls not in _PLANS:
        hints = typing.get_type_hints(cls)
        _PLANS[cls] = tuple(
            (
                field.name,
                _converter(hints[field.name]),
                field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING,
            )
            for field in dataclasses.fields(cls)
            if field.init and field.name != "extra"
        )
    return _PLANS[cls]


def decode(cls: type[M], data: Mapping[str, Any]) -> M:
    """``data`` (one JSON object of the hub) as ``cls``; raises ValueError naming a
    required field the object lacks."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
    values: dict[str, Any] = {}
    for name, convert, required in _plan(cls):
        if name in data:
            value = data[name]
            values[name] = None if value is None else convert(value)
        elif required:
            raise ValueError(f"{cls.__name__}: the hub's answer has no {name!r}")
    extra = {key: value for key, value in data.items() if key not in values}
    return cls(**values, extra=extra)


def decode_list(cls: type[M], data: Any) -> list[M]:
    return [decode(cls, item) for item in data]
