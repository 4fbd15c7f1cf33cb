"""The check of an export document before an import writes anything: every field
parsed as the memories API would (ids as UUIDs, times as datetimes, defaults filled in),
ids unique within the document, every user, room and agent named present in it.
ExportInvalid names each bad field by its path (``memories[3].kind``)."""

from __future__ import annotations

import contextlib
import json
import math
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memories.config import ROOM_SECTIONS, SettingsError, settings_validate
from memories.models import Memory, content_hash
from memories.services.exports import FORMAT, VERSION
from memories.structured import StructuredContentError, structured_content_clean

MAX_ERRORS = 100  # an invalid file lists this many bad fields at most


class ExportInvalid(ValueError):
    """A document that cannot be imported: ``errors`` maps each bad field's path
    (``memories[3].kind``) to its messages. Nothing was written."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{path}: {' '.join(m)}" for path, m in errors.items()))
        self.errors = errors


class _Bad(ValueError):
    """One field's value is wrong (the message says why)."""


Parser = Callable[[Any], Any]
_REQUIRED: Any = object()


def _limit(name: str) -> int:
    return int(settings.MEMORYHUB[name])  # the limits the memories API applies


def _string(max_length: int, *, blank: bool = True, slash: bool = True) -> Parser:
    def parse(value: Any) -> str:
        if not isinstance(value, str):
            raise _Bad("Must be a string.")
        if not blank and not value.strip():
            raise _Bad("This field may not be blank.")
        if len(value) > max_length:
            raise _Bad(f"Ensure this field has no more than {max_length} characters.")
        if not slash and "/" in value:
            raise _Bad("May not contain '/'.")
        if "\x00" in value:
            raise _Bad("Null characters are not allowed.")
        return value

    return parse


def _content(value: Any) -> str:
    text: str = _string(_limit("MAX_CONTENT_CHARS"), blank=False)(value)
    return text


def has_null_character(value: Any) -> bool:
    """Whether a JSON value holds a NUL character anywhere (PostgreSQL's jsonb refuses it)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_null_character(k) or has_null_character(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_null_character(item) for item in value)
    return False


def _json_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad("Must be a JSON object.")
    max_bytes = _limit("MAX_METADATA_BYTES")
    if len(json.dumps(value)) > max_bytes:
        raise _Bad(f"Must be at most {max_bytes} bytes of JSON.")
    if has_null_character(value):  # PostgreSQL's jsonb refuses \u0000
        raise _Bad("Null characters are not allowed.")
    return value


def _choice(choices: Iterable[str]) -> Parser:
    allowed = list(choices)

    def parse(value: Any) -> str:
        if value not in allowed:
            raise _Bad(f"Must be one of: {', '.join(c or '(empty)' for c in allowed)}.")
        return str(value)

    return parse


def _uuid(value: Any) -> uuid.UUID:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return uuid.UUID(value)
    raise _Bad("Must be a valid UUID.")


def _moment(value: Any) -> datetime:
    try:
        moment = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None:
        raise _Bad("Must be an ISO 8601 date and time.")
    return moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)


def _number(minimum: float, maximum: float, *, integer: bool = False) -> Parser:
    def parse(value: Any) -> float:
        kinds = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
            raise _Bad("Must be an integer." if integer else "Must be a number.")
        if not minimum <= value <= maximum:
            raise _Bad(f"Must be between {minimum:g} and {maximum:g}.")
        return value if integer else float(value)

    return parse


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Bad("Must be true or false.")
    return value


def _optional(parse: Parser) -> Parser:
    return lambda value: None if value is None else parse(value)


def _source_ids(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise _Bad("Must be a list of memory ids.")
    try:
        return [str(_uuid(item)) for item in value]
    except _Bad:
        raise _Bad("Must be a list of memory ids (UUIDs).") from None


MAX_INT = 2**31 - 1
EXTERNAL_ID = _string(255, blank=False, slash=False)  # users and rooms: in URL paths
AGENT_ID = _string(255, blank=False)
NAME = _string(200)
MEMORY_PARSERS: dict[str, tuple[Parser, Any]] = {  # field: (parser, default when absent)
    "id": (_uuid, _REQUIRED),
    "user": (_optional(EXTERNAL_ID), None),
    "room": (_optional(EXTERNAL_ID), None),
    "agent": (_optional(AGENT_ID), None),
    "kind": (_choice(Memory.Kind.values), Memory.Kind.MESSAGE),
    "role": (_choice(["", *Memory.Role.values]), ""),
    "content": (_content, _REQUIRED),
    "content_json": (_json_object, dict),
    "metadata": (_json_object, dict),
    "importance": (_number(0.0, 1.0), 0.5),
    "confidence": (_number(0.0, 1.0), 1.0),
    "access_count": (_number(0, MAX_INT, integer=True), 0),
    "accessed_at": (_optional(_moment), None),
    "status": (_choice(Memory.Status.values), Memory.Status.ACTIVE),
    "unique": (_boolean, False),
    "pinned": (_boolean, False),
    "source_ids": (_source_ids, list),
    "document_id": (_optional(_uuid), None),
    "chunk_index": (_optional(_number(0, MAX_INT, integer=True)), None),
    "created_at": (_moment, timezone.now),
    "updated_at": (_optional(_moment), None),
}
SPACE_PARSERS: dict[str, tuple[Parser, Any]] = {
    "provider": (_string(32, blank=False), _REQUIRED),
    "model": (_string(200, blank=False), _REQUIRED),
    "dimension": (_number(1, 16_000, integer=True), _REQUIRED),  # pgvector's maximum
}
USER_PARSERS: dict[str, tuple[Parser, Any]] = {
    "external_id": (EXTERNAL_ID, _REQUIRED),
    "name": (NAME, ""),
    "metadata": (_json_object, dict),
    "created_at": (_moment, timezone.now),
    "updated_at": (_optional(_moment), None),
}
ROOM_PARSERS: dict[str, tuple[Parser, Any]] = {
    **USER_PARSERS,
    "agent": (_optional(AGENT_ID), None),
    "world_id": (_string(255), ""),
}
AGENT_PARSERS: dict[str, tuple[Parser, Any]] = {
    "external_id": (AGENT_ID, _REQUIRED),
    "name": (NAME, ""),
    "created_at": (_moment, timezone.now),
}


PART_PARSERS = {
    "agents": AGENT_PARSERS,
    "rooms": ROOM_PARSERS,
    "users": USER_PARSERS,
    "memories": MEMORY_PARSERS,
}
MAX_WINDOWS = 1000


class _Check:
    """Reads a document's parts, collecting every bad field by its path."""

    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}

    def fail(self, path: str, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.setdefault(path, []).append(message)

    def fields(
        self, item: dict[str, Any], path: str, parsers: dict[str, tuple[Parser, Any]]
    ) -> dict[str, Any]:
        """The item's fields parsed (None where bad), defaults where absent."""
        parsed: dict[str, Any] = {}
        for name, (parse, default) in parsers.items():
            if name not in item:
                if default is _REQUIRED:
                    self.fail(f"{path}.{name}", "This field is required.")
                parsed[name] = default() if callable(default) else default
                continue
            try:
                parsed[name] = parse(item[name])
            except _Bad as bad:
                self.fail(f"{path}.{name}", str(bad))
                parsed[name] = None
        return parsed

    def objects(self, value: Any, path: str) -> list[tuple[str, dict[str, Any]]]:
        """The JSON objects of a list, each with its path."""
        if not isinstance(value, list):
            self.fail(path, "Must be a list.")
            return []
        found = []
        for index, item in enumerate(value):
            if isinstance(item, dict):
                found.append((f"{path}[{index}]", item))
            else:
                self.fail(f"{path}[{index}]", "Must be a JSON object.")
        return found

    def distinct(self, items: list[tuple[str, dict[str, Any]]], key: str) -> set[Any]:
        """The values of ``key``; a value seen before is an error."""
        first: dict[Any, str] = {}
        for path, item in items:
            value = item.get(key)
            if value is not None and value in first:
                self.fail(f"{path}.{key}", f"Duplicate of {first[value]}.{key}.")
            first.setdefault(value, path)
        return set(first) - {None}

    def known(self, path: str, value: str | None, names: set[str], what: str) -> None:
        if value is not None and value not in names:
            self.fail(path, f"{value!r} is not among the document's {what}.")

    def room_settings(self, value: Any, path: str) -> dict[str, Any]:
        """A room's own overrides, validated as PATCH /api/v1/rooms/{room}/ does."""
        try:
            if not isinstance(value, dict):
                raise SettingsError({"": ["Must be an object of sections."]})
            outside = [section for section in value if section not in ROOM_SECTIONS]
            if outside:
                only = f"Rooms override only: {', '.join(ROOM_SECTIONS)}."
                raise SettingsError({section: [only] for section in outside})
            return settings_validate(value)
        except SettingsError as error:
            for name, messages in error.errors.items():
                for message in messages:
                    self.fail(f"{path}.settings{'.' + name if name else ''}", message)
            return {}

    def embeddings(self, value: Any, path: str) -> list[dict[str, Any]]:
        """``[{"space": {provider, model, dimension}, "windows": [[numbers], ...]}]``."""
        checked = []
        for at, entry in self.objects(value, f"{path}.embeddings"):
            if not isinstance(entry.get("space"), dict):
                self.fail(f"{at}.space", "Must be a JSON object.")
                continue
            space = self.fields(entry["space"], f"{at}.space", SPACE_PARSERS)
            windows = entry.get("windows")
            if not isinstance(windows, list) or not 1 <= len(windows) <= MAX_WINDOWS:
                self.fail(f"{at}.windows", f"Must be a list of 1 to {MAX_WINDOWS} vectors.")
                continue
            for n, vector in enumerate(windows if space["dimension"] else []):
                if not _is_vector(vector, space["dimension"]):
                    self.fail(
                        f"{at}.windows[{n}]",
                        f"Must be {space['dimension']} numbers within float32 range.",
                    )
            checked.append({"space": space, "windows": windows})
        return checked


# pgvector stores float4: a finite double past this overflows and PostgreSQL refuses it
FLOAT32_MAX = 3.4028235e38


def _is_vector(value: Any, dimension: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == dimension
        and all(
            isinstance(x, int | float)
            and not isinstance(x, bool)
            and math.isfinite(x)
            and abs(x) <= FLOAT32_MAX
            for x in value
        )
    )


def export_document_check(document: Any) -> dict[str, Any]:
    """The document's users, rooms, agents and memories, parsed (ids as UUIDs, times as
    datetimes, defaults filled in); ExportInvalid names every bad field."""
    if not isinstance(document, dict):
        raise ExportInvalid({"document": ["Must be a JSON object (an export document)."]})
    check = _Check()
    if document.get("format") != FORMAT:
        check.fail("format", f"Must be {FORMAT!r}: this is not a MemoryHub export.")
    if document.get("version") != VERSION or isinstance(document.get("version"), bool):
        check.fail("version", f"Unsupported version; this server reads version {VERSION}.")
    if "memories" not in document:
        check.fail("memories", "This field is required.")
    scope = document.get("scope")
    if scope is not None and (not isinstance(scope, dict) or "type" not in scope):
        check.fail("scope", 'Must be an object such as {"type": "user", "id": "alice"}.')
    if check.errors:
        raise ExportInvalid(check.errors)

    parts: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for part, parsers in PART_PARSERS.items():
        parts[part] = []
        for path, item in check.objects(document.get(part, []), part):
            parsed = check.fields(item, path, parsers)
            if "updated_at" in parsers and parsed["updated_at"] is None:
                parsed["updated_at"] = parsed["created_at"]
            if part == "rooms":
                parsed["settings"] = check.room_settings(item.get("settings", {}), path)
            elif part == "memories":
                parsed["embeddings"] = check.embeddings(item.get("embeddings", []), path)
                _structured_check(check, parsed, path)
            parts[part].append((path, parsed))
    _references_check(check, parts)
    if check.errors:
        raise ExportInvalid(check.errors)
    return {part: [item for _, item in items] for part, items in parts.items()}


def _structured_check(check: _Check, memory: dict[str, Any], path: str) -> None:
    """A fact's, relationship's or goal's content_json, as the API checks it."""
    if memory.get("kind") is None or not isinstance(memory.get("content_json"), dict):
        return  # already named by the field checks
    try:
        memory["content_json"] = structured_content_clean(
            kind=memory["kind"], content_json=memory["content_json"]
        )
    except StructuredContentError as error:
        for key, messages in error.errors.items():
            check.fail(f"{path}.content_json.{key}", " ".join(messages))


def _references_check(check: _Check, parts: dict[str, list[tuple[str, dict[str, Any]]]]) -> None:
    """Ids unique within the document; every user, room and agent named is in it."""
    agents = check.distinct(parts["agents"], "external_id")
    rooms = check.distinct(parts["rooms"], "external_id")
    users = check.distinct(parts["users"], "external_id")
    check.distinct(parts["memories"], "id")
    for path, room in parts["rooms"]:
        check.known(f"{path}.agent", room["agent"], agents, "agents")
    unique: dict[tuple[Any, ...], str] = {}
    for path, memory in parts["memories"]:
        check.known(f"{path}.user", memory["user"], users, "users")
        check.known(f"{path}.room", memory["room"], rooms, "rooms")
        check.known(f"{path}.agent", memory["agent"], agents, "agents")
        if memory["unique"] and memory["content"] is not None:
            key = (memory["user"], memory["room"], memory["kind"], content_hash(memory["content"]))
            if key in unique:
                check.fail(
                    f"{path}.unique",
                    f"{unique[key]} is a unique memory of the same user, room, kind and text.",
                )
            unique.setdefault(key, path)
