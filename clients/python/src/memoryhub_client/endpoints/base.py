"""A call of the API as data: method, path, query, body, how to read the answer and
whether it may be sent again after an attempt that may have reached the hub.

The endpoint modules build calls; the sync and async clients only send them, so both
share every rule but the I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from memoryhub_client.models.base import Model, Page, decode

__all__ = [
    "API_PREFIX",
    "Call",
    "as_count",
    "as_model",
    "as_models",
    "as_nothing",
    "as_page",
    "as_raw",
    "body",
    "query",
    "required",
    "segment",
    "vector",
]

API_PREFIX = "/api/v1/"

T = TypeVar("T")
M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request of the API and how to read its answer.

    ``path`` is relative to ``/api/v1/`` with each segment already quoted. ``gone_ok``: a
    delete whose
    retry finds nothing (404) after an attempt that may have reached the hub counts as
    done by that attempt.
    """

    method: str
    path: str
    parse: Callable[[Any], T]
    params: tuple[tuple[str, str], ...] = ()
    json: Any = None
    files: Mapping[str, tuple[str, bytes, str]] | None = None
    data: Mapping[str, str] | None = None
    gone_ok: bool = False

    @property
    def name(self) -> str:
        """``METHOD /api/v1/path``, for messages (never a header)."""
        return f"{self.method} {API_PREFIX}{self.path}"


def required(value: str | None, name: str) -> str:
    """``value``, or a ValueError saying how to give it (the client's default)."""
    if value is None or value == "":
        raise ValueError(
            f"{name} is required: pass {name}=... or give the client a default "
            f"(MemoryHub({name}=...))"
        )
    return value


def segment(value: str | None, name: str) -> str:
    """A path segment (an external id or object id), quoted whole: ``a b`` -> ``a%20b``."""
    return quote(str(required(value, name)), safe="")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return str(value)


def query(**values: Any) -> tuple[tuple[str, str], ...]:
    """Query parameters: None left out, lists repeated, booleans and times as text."""
    pairs: list[tuple[str, str]] = []
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            pairs.extend((name, _text(item)) for item in value)
        else:
            pairs.append((name, _text(value)))
    return tuple(pairs)


def jsonable(value: Any) -> Any:
    """Times as ISO 8601 text, inside dicts and lists too; the rest as it is."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {key: jsonable(inner) for key, inner in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(inner) for inner in value]
    return value


def body(**values: Any) -> dict[str, Any]:
    """A JSON body: None left out (the hub's default applies), times as text."""
    return {name: jsonable(value) for name, value in values.items() if value is not None}


def vector(value: Iterable[float] | None) -> list[float] | None:
    """A vector as a JSON list of floats (a numpy array's numbers are not JSON)."""
    return None if value is None else [float(number) for number in value]


def kinds(value: str | Iterable[str] | None) -> list[str] | None:
    """One kind or several as a list (``"fact"`` -> ``["fact"]``)."""
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def as_model(cls: type[M]) -> Callable[[Any], M]:
    return lambda data: decode(cls, data)


def as_models(cls: type[M], key: str) -> Callable[[Any], list[M]]:
    return lambda data: [decode(cls, item) for item in data[key]]


def as_page(cls: type[M]) -> Callable[[Any], Page[M]]:
    def parse(data: Any) -> Page[M]:
        results = [decode(cls, item) for item in data["results"]]
        return Page(count=data["count"], next_cursor=data.get("next_cursor"), results=results)

    return parse


def as_count(key: str) -> Callable[[Any], int]:
    return lambda data: int(data[key])


def as_nothing(data: Any) -> None:
    return None


def as_raw(data: Any) -> dict[str, Any]:
    return dict(data)
