"""Keyset (cursor) pages: the one way every list endpoint of the API pages.

A page answers `{"count": ..., "next_cursor": ..., "results": [...]}`: `count` is how
many rows match the filters over all pages, `next_cursor` is null on the last page and
otherwise goes back as `cursor` for the next one. A cursor is opaque to clients: the
base64url JSON of the ordering's name and the last row's ordering values. Rows after it
are found with a WHERE on those values (no OFFSET: a page deep in a long list costs what
the first one does, and rows written meanwhile neither repeat nor skip rows). The
ordering ends with a unique key, so it is total and pages never overlap or leave gaps.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import reduce
from operator import or_
from typing import Any, TypeVar

from django.db.models import Model, Q, QuerySet
from rest_framework import serializers
from rest_framework.request import Request

DEFAULT_LIMIT, MAX_LIMIT = 50, 500
# the longest cursor of ours holds a 255-character external id, 4 UTF-8 bytes each at
# worst: about 1,400 characters; anything longer is not one (and is refused unread)
CURSOR_MAX_CHARS = 2048
BIGINT = 2**63  # PostgreSQL's bigint: a key beyond it cannot be a row's
INVALID_CURSOR = "Invalid cursor."
PAGE_PARAMETERS = ("limit", "cursor")
Rows = TypeVar("Rows", bound=QuerySet[Any])
BASE64URL = re.compile(r"[A-Za-z0-9_-]+")


def _datetime_read(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:  # ours carry their offset; a naive one is not ours
        raise ValueError
    return moment.astimezone(UTC)  # OverflowError at the ends of the calendar


def _uuid_read(value: Any) -> uuid.UUID:
    if not isinstance(value, str):
        raise ValueError
    return uuid.UUID(value)


def _int_read(value: Any) -> int:
    if type(value) is not int or not -BIGINT <= value < BIGINT:  # not bool, not float
        raise ValueError
    return value


def _text_read(value: Any) -> str:
    # PostgreSQL refuses NUL in text, and a lone surrogate cannot be sent to it as UTF-8
    if not isinstance(value, str) or "\x00" in value:
        raise ValueError
    value.encode()  # UnicodeEncodeError (a ValueError) on a lone surrogate
    return value


@dataclass(frozen=True)
class Kind:
    """How one ordering value is written in a cursor and read back (ValueError,
    TypeError or OverflowError when it cannot be one)."""

    write: Callable[[Any], Any]
    read: Callable[[Any], Any]


DATETIME = Kind(write=lambda value: value.isoformat(), read=_datetime_read)
UUID = Kind(write=str, read=_uuid_read)
INTEGER = Kind(write=int, read=_int_read)
TEXT = Kind(write=str, read=_text_read)


@dataclass(frozen=True)
class Key:
    """One field of an ordering: the model field (or annotation) and its kind."""

    field: str
    kind: Kind


@dataclass(frozen=True)
class Ordering:
    """A total order of a list: its keys all ascending or all descending, the last one
    unique among the rows listed (a pk, or an id unique in the project). No key may be
    NULL in a listed row."""

    keys: tuple[Key, ...]
    descending: bool = False

    @property
    def order_by(self) -> list[str]:
        sign = "-" if self.descending else ""
        return [f"{sign}{key.field}" for key in self.keys]

    @property
    def name(self) -> str:
        """What a cursor says it was made for: a cursor of another ordering is refused."""
        return ",".join(self.order_by)

    def reversed(self) -> Ordering:
        return Ordering(keys=self.keys, descending=not self.descending)

    def after(self, values: Sequence[Any]) -> Q:
        """The rows after the one with these values, in this order:
        (a, b) > (x, y) as a > x OR (a = x AND b > y)."""
        lookup = "lt" if self.descending else "gt"
        clauses = [
            Q(
                **{key.field: value for key, value in zip(self.keys[:n], values[:n], strict=True)},
                **{f"{self.keys[n].field}__{lookup}": values[n]},
            )
            for n in range(len(self.keys))
        ]
        return reduce(or_, clauses)

    def cursor_of(self, row: Model) -> str:
        """The cursor of the page that starts after ``row``."""
        values = [key.kind.write(getattr(row, key.field)) for key in self.keys]
        raw = json.dumps({"o": self.name, "v": values}, ensure_ascii=False, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def cursor_read(self, cursor: str) -> list[Any]:
        """The ordering values a cursor of ``cursor_of`` holds; anything else (not
        base64url, not JSON, another shape, wrong types, too long, made for another
        ordering) is a 400 naming `cursor`."""
        try:
            if len(cursor) > CURSOR_MAX_CHARS or not BASE64URL.fullmatch(cursor):
                raise ValueError
            data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
            if not isinstance(data, dict) or set(data) != {"o", "v"} or data["o"] != self.name:
                raise ValueError
            values = data["v"]
            if not isinstance(values, list) or len(values) != len(self.keys):
                raise ValueError
            return [key.kind.read(value) for key, value in zip(self.keys, values, strict=True)]
        # binascii.Error and UnicodeError are ValueErrors
        except (ValueError, TypeError, OverflowError, RecursionError):
            raise serializers.ValidationError({"cursor": [INVALID_CURSOR]}) from None


def newest_first(*, pk: Kind, moment: str = "created_at") -> Ordering:
    """Newest first by ``moment``, rows of one moment by their pk (a list's usual order)."""
    return Ordering(keys=(Key(moment, DATETIME), Key("pk", pk)), descending=True)


class CursorField(serializers.CharField):
    """A page's `cursor` parameter: any string that is not a cursor is the same
    "Invalid cursor." (Ordering.cursor_read checks the rest)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", CURSOR_MAX_CHARS)
        super().__init__(trim_whitespace=False, **kwargs)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        try:
            return super().run_validation(data)
        except serializers.ValidationError:
            raise serializers.ValidationError(INVALID_CURSOR) from None


def _limit_field(default: int) -> serializers.IntegerField:
    return serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_LIMIT,
        default=default,
        help_text=f"Page size (1-{MAX_LIMIT}, default {default}).",
    )


class PageQuerySerializer(serializers.Serializer):
    """The query parameters of every page: `limit` and `cursor` (documented once: each
    list view names this class, or HistoryPageQuerySerializer, in its parameters)."""

    limit = _limit_field(DEFAULT_LIMIT)
    cursor = CursorField(
        required=False, help_text="The `next_cursor` of the previous page (opaque)."
    )


class HistoryPageQuerySerializer(PageQuerySerializer):
    """For the histories (a memory's revisions, the settings' revisions), which answered
    with up to 500 rows (or all) before they had pages: the same first page by default."""

    limit = _limit_field(MAX_LIMIT)


@dataclass(frozen=True)
class Page:
    """One page of a list: its rows, the total matching the filters, the next cursor."""

    rows: list[Any]
    count: int
    next_cursor: str | None

    def data(self, item: type[serializers.Serializer]) -> dict[str, Any]:
        """The page envelope, each row rendered by ``item``."""
        return {
            "count": self.count,
            "next_cursor": self.next_cursor,
            "results": item(self.rows, many=True).data,
        }


def page_get(
    rows: Rows,
    *,
    request: Request,
    ordering: Ordering,
    query: type[PageQuerySerializer] = PageQuerySerializer,
    load: Callable[[Rows], QuerySet[Any]] | None = None,
) -> Page:
    """The page of ``rows`` (filtered already, not ordered) that the request's `limit` and
    `cursor` ask for, in ``ordering``, its rows read through ``load`` (annotations and
    related rows the items render: joins the count does without); a bad limit or cursor
    is a 400 naming it."""
    # a plain dict, not the QueryDict: DRF reads an empty value in a QueryDict as no value,
    # and `cursor=` (a client sending a null next_cursor back) would restart the list
    given = request.query_params
    params = query(data={name: given[name] for name in PAGE_PARAMETERS if name in given})
    params.is_valid(raise_exception=True)
    limit: int = params.validated_data["limit"]
    count = rows.count()
    if "cursor" in params.validated_data:
        rows = rows.filter(ordering.after(ordering.cursor_read(params.validated_data["cursor"])))
    loaded = load(rows) if load is not None else rows
    found = list(loaded.order_by(*ordering.order_by)[: limit + 1])
    next_cursor = ordering.cursor_of(found[limit - 1]) if len(found) > limit else None
    return Page(rows=found[:limit], count=count, next_cursor=next_cursor)


def page_serializer(
    item: type[serializers.Serializer], *, order: str
) -> type[serializers.Serializer]:
    """The page envelope of a list whose rows ``item`` renders (``XOutputSerializer`` ->
    ``XPageOutputSerializer``, the OpenAPI component ``XPageOutput``); ``order`` says in
    which order the results come."""
    name = item.__name__.replace("OutputSerializer", "PageOutputSerializer")
    fields = {
        "__module__": item.__module__,
        "__doc__": f"A page of {item.__name__.removesuffix('OutputSerializer')} rows.",
        "count": serializers.IntegerField(
            help_text="How many rows match the filters, over all pages."
        ),
        "next_cursor": serializers.CharField(
            allow_null=True,
            help_text="Pass as `cursor` for the next page; null on the last one.",
        ),
        "results": item(many=True, help_text=order),
    }
    return type(name, (serializers.Serializer,), fields)
