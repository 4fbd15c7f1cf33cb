"""Export and import of a user's or a room's memories as one JSON document.

The document (FORMAT, VERSION) holds the users, rooms and agents the memories refer to,
in their API representation, and every memory of any kind and status with its ids,
times, provenance and, on request, its vectors. Importing it back gives the same
document on the next export: ids, times and order are kept. An import is checked whole
before anything is written, then written in one transaction: a bad file writes nothing.
"""

from __future__ import annotations

import contextlib
import json
import math
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memories.config import ROOM_SECTIONS, SettingsError, settings_validate
from memories.models import (
    Agent,
    Embedding,
    EmbeddingSpace,
    EndUser,
    Memory,
    MemoryQuerySet,
    MemoryRevision,
    Project,
    Room,
    SettingsRevision,
    content_hash,
)
from memories.services.embedding import embedding_enqueue, embedding_space_get
from memories.services.revisions import Actor, revision_build
from memories.signals import memories_created

FORMAT = "memoryhub-export"
VERSION = 1
# rows read or written per round trip: bounds what an export or import holds at once
CHUNK_SIZE = 1000
MAX_ERRORS = 100  # an invalid file lists this many bad fields at most

Progress = Callable[[int], None]
T = TypeVar("T")


def _chunks(items: Iterable[T]) -> Iterator[list[T]]:
    chunk: list[T] = []
    size = CHUNK_SIZE
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _time(value: datetime | None) -> str | None:
    """A time as the API renders it (ISO 8601, UTC as Z)."""
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat()
    return text[: -len("+00:00")] + "Z" if text.endswith("+00:00") else text


# --- export ------------------------------------------------------------------------------

MEMORY_FIELDS = (
    "id", "kind", "role", "content", "content_json", "metadata", "importance", "confidence",
    "access_count", "accessed_at", "status", "is_unique", "source_ids", "document_id",
    "chunk_index", "created_at", "updated_at",
)  # fmt: skip


def export_memories(*, end_user: EndUser | None = None, room: Room | None = None) -> MemoryQuerySet:
    """The memories an export of this user (all rooms) or this room (all users) holds."""
    if end_user is not None:
        return Memory.objects.for_project(end_user.project_id).filter(end_user=end_user)
    if room is not None:
        return Memory.objects.for_project(room.project_id).filter(room=room)
    raise ValueError("Export a user or a room.")


def end_user_export(
    *, end_user: EndUser, vectors: bool = False, progress: Progress | None = None
) -> dict[str, Any]:
    """The export document of a user: all its memories (every status, every room), the
    rooms and agents they refer to; with ``vectors`` each memory's embedding windows."""
    with _snapshot():
        memories, refs = _memories_export(export_memories(end_user=end_user), vectors, progress)
        refs["users"].add(end_user.pk)
        return _document({"type": "user", "id": end_user.external_id}, memories, refs)


def room_export(
    *, room: Room, vectors: bool = False, progress: Progress | None = None
) -> dict[str, Any]:
    """The export document of a room: all its memories (every user, every status), those
    users and the agents; with ``vectors`` each memory's embedding windows."""
    with _snapshot():
        memories, refs = _memories_export(export_memories(room=room), vectors, progress)
        refs["rooms"].add(room.pk)
        return _document({"type": "room", "id": room.external_id}, memories, refs)


@contextlib.contextmanager
def _snapshot() -> Iterator[None]:
    """One consistent view for the whole export (a REPEATABLE READ transaction): no
    memory refers to a room deleted while the export ran. Inside the caller's
    transaction, that one."""
    if connection.in_atomic_block:
        yield
        return
    with connection.cursor():
        pass  # connect (and health-check) now: SET TRANSACTION must be the first query
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


def _memories_export(
    queryset: MemoryQuerySet, vectors: bool, progress: Progress | None
) -> tuple[list[dict[str, Any]], dict[str, set[Any]]]:
    """The memories' documents, oldest first, and the users, rooms and agents they name."""
    rows = (
        queryset.order_by("created_at", "id")
        .values(*MEMORY_FIELDS, "end_user_id", "room_id", "agent_id")
        .annotate(
            user_external_id=models.F("end_user__external_id"),
            room_external_id=models.F("room__external_id"),
            agent_external_id=models.F("agent__external_id"),
        )
    )
    refs: dict[str, set[Any]] = {"users": set(), "rooms": set(), "agents": set()}
    memories: list[dict[str, Any]] = []
    for chunk in _chunks(rows.iterator(chunk_size=CHUNK_SIZE)):
        windows = _windows_export([row["id"] for row in chunk]) if vectors else {}
        for row in chunk:
            refs["users"].add(row["end_user_id"])
            refs["rooms"].add(row["room_id"])
            refs["agents"].add(row["agent_id"])
            memory = _memory_document(row)
            if vectors:
                memory["embeddings"] = windows.get(row["id"], [])
            memories.append(memory)
        if progress is not None:
            progress(len(chunk))
    for ids in refs.values():
        ids.discard(None)
    return memories, refs


def _memory_document(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "user": row["user_external_id"],
        "room": row["room_external_id"],
        "agent": row["agent_external_id"],
        "kind": row["kind"],
        "role": row["role"],
        "content": row["content"],
        "content_json": row["content_json"],
        "metadata": row["metadata"],
        "importance": row["importance"],
        "confidence": row["confidence"],
        "access_count": row["access_count"],
        "accessed_at": _time(row["accessed_at"]),
        "status": row["status"],
        "unique": row["is_unique"],
        "source_ids": row["source_ids"],
        "document_id": str(row["document_id"]) if row["document_id"] else None,
        "chunk_index": row["chunk_index"],
        "created_at": _time(row["created_at"]),
        "updated_at": _time(row["updated_at"]),
    }


def _windows_export(memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[dict[str, Any]]]:
    """Each memory's vectors by space: ``[{"space": {...}, "windows": [[...], ...]}]``."""
    spaces = {
        space.pk: {"provider": space.provider, "model": space.model, "dimension": space.dimension}
        for space in EmbeddingSpace.objects.all()
    }
    found: dict[uuid.UUID, dict[int, list[list[float]]]] = {}
    rows = (
        Embedding.objects.filter(memory__in=memory_ids)
        .order_by("memory_id", "space_id", "window")
        .values_list("memory_id", "space_id", "vector")
    )
    for memory_id, space_id, vector in rows:
        found.setdefault(memory_id, {}).setdefault(space_id, []).append([float(x) for x in vector])
    return {
        memory_id: [
            {"space": spaces[space_id], "windows": windows}
            for space_id, windows in by_space.items()
        ]
        for memory_id, by_space in found.items()
    }


def _document(
    scope: dict[str, str], memories: list[dict[str, Any]], refs: dict[str, set[Any]]
) -> dict[str, Any]:
    users = EndUser.objects.filter(pk__in=refs["users"]).order_by("external_id")
    rooms = list(
        Room.objects.filter(pk__in=refs["rooms"]).select_related("agent").order_by("external_id")
    )
    refs["agents"] |= {room.agent_id for room in rooms if room.agent_id}
    agents = Agent.objects.filter(pk__in=refs["agents"]).order_by("external_id")
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": _time(timezone.now()),
        "scope": scope,
        "users": [
            {
                "external_id": user.external_id,
                "name": user.name,
                "metadata": user.metadata,
                "created_at": _time(user.created_at),
                "updated_at": _time(user.updated_at),
            }
            for user in users
        ],
        "rooms": [
            {
                "external_id": room.external_id,
                "name": room.name,
                "agent": room.agent.external_id if room.agent else None,
                "world_id": room.world_id,
                "metadata": room.metadata,
                "settings": room.settings,
                "created_at": _time(room.created_at),
                "updated_at": _time(room.updated_at),
            }
            for room in rooms
        ],
        "agents": [
            {"external_id": a.external_id, "name": a.name, "created_at": _time(a.created_at)}
            for a in agents
        ],
        "memories": memories,
    }


# --- checking a document -----------------------------------------------------------------


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


def _has_null_character(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_null_character(k) or _has_null_character(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_null_character(item) for item in value)
    return False


def _json_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad("Must be a JSON object.")
    max_bytes = _limit("MAX_METADATA_BYTES")
    if len(json.dumps(value)) > max_bytes:
        raise _Bad(f"Must be at most {max_bytes} bytes of JSON.")
    if _has_null_character(value):  # PostgreSQL's jsonb refuses \u0000
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
                    self.fail(f"{at}.windows[{n}]", f"Must be {space['dimension']} numbers.")
            checked.append({"space": space, "windows": windows})
        return checked


def _is_vector(value: Any, dimension: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == dimension
        and all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
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
            parts[part].append((path, parsed))
    _references_check(check, parts)
    if check.errors:
        raise ExportInvalid(check.errors)
    return {part: [item for _, item in items] for part, items in parts.items()}


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


# --- import ------------------------------------------------------------------------------


@dataclass
class ImportReport:
    """What an import wrote: rows created, rows the project had already (left as they
    were), and what became of the vectors the document carried."""

    users: dict[str, int] = field(default_factory=lambda: {"created": 0, "existing": 0})
    rooms: dict[str, int] = field(default_factory=lambda: {"created": 0, "existing": 0})
    agents: dict[str, int] = field(default_factory=lambda: {"created": 0, "existing": 0})
    memories: dict[str, int] = field(default_factory=lambda: {"created": 0, "skipped": 0})
    vectors: dict[str, int] = field(default_factory=lambda: {"stored": 0, "ignored": 0})
    notes: list[str] = field(default_factory=list)


def export_document_import(
    *, project: Project, document: Any, actor: Actor, progress: Progress | None = None
) -> ImportReport:
    """Import an export document into ``project``, all or nothing.

    The whole document is checked first: ExportInvalid names every bad field by its
    path (``memories[3].kind``) and nothing is written. Users, rooms and agents are
    matched by external id within ``project`` (created if new, else left as they are);
    memories keep their ids and times. A memory whose id the project has already is
    skipped (importing a file twice writes nothing the second time); an id in use in
    another project is an ExportInvalid. Each new memory gets a ``create`` revision by
    ``actor``. Vectors of the configured embedding space are stored; the other new
    memories are embedded by the workers, as any new memory is. ``progress`` (optional)
    is called with the number of memories handled, for progress bars.
    """
    checked = export_document_check(document)
    try:
        with transaction.atomic():
            return _import(project, checked, actor, progress)
    except IntegrityError:
        # a concurrent writer created one of the same users, rooms or memories: once
        # more, now that they exist
        with transaction.atomic():
            return _import(project, checked, actor, progress)


def _import(
    project: Project, document: dict[str, Any], actor: Actor, progress: Progress | None
) -> ImportReport:
    report = ImportReport()
    agents, _ = _get_or_create(Agent, project, document["agents"], report.agents)
    rooms, created_rooms = _get_or_create(
        Room, project, document["rooms"], report.rooms, agents=agents
    )
    _room_settings_record(created_rooms, actor)
    users, _ = _get_or_create(EndUser, project, document["users"], report.users)
    rows = {"user": users, "room": rooms, "agent": agents}
    new = _memories_new(project, document["memories"], rows)
    report.memories["skipped"] = len(document["memories"]) - len(new)
    if progress is not None and report.memories["skipped"]:
        progress(report.memories["skipped"])
    space = embedding_space_get() if any(item["embeddings"] for item in new) else None
    ignored: set[str] = set()
    for chunk in _chunks(new):
        ignored |= _memories_write(project, chunk, rows, space, actor, report)
        if progress is not None:
            progress(len(chunk))
    if ignored:
        report.notes.append(
            f"{report.vectors['ignored']} memories carried vectors of another embedding space "
            f"({', '.join(sorted(ignored))}) than the configured one ({_space_name(space)}): "
            "those vectors were ignored and these memories will be embedded again."
        )
    if new:
        if report.vectors["stored"] < len(new):
            transaction.on_commit(embedding_enqueue)
        created_ids = [item["id"] for item in new]
        # the rooms that got messages: their buffers may be over capacity now
        room_ids = sorted(
            {rooms[i["room"]].pk for i in new if i["room"] and i["kind"] == Memory.Kind.MESSAGE}
        )
        transaction.on_commit(
            lambda: memories_created.send(
                sender=Memory,
                project_id=project.pk,
                memory_ids=created_ids,
                message_room_ids=room_ids,
            )
        )
    return report


def _space_name(space: Any) -> str:
    """``provider:model (Nd)`` of an EmbeddingSpace or of a document's space."""
    if isinstance(space, EmbeddingSpace):
        space = {"provider": space.provider, "model": space.model, "dimension": space.dimension}
    return f"{space['provider']}:{space['model']} ({space['dimension']}d)"


def _build(model: type[models.Model], project: Project, item: dict[str, Any], agents: Any) -> Any:
    if model is Agent:
        return Agent(
            project=project,
            external_id=item["external_id"],
            name=item["name"],
            created_at=item["created_at"],
        )
    fields = {name: item[name] for name in ("external_id", "name", "metadata", "created_at")}
    if model is Room:
        return Room(
            project=project,
            agent=agents.get(item["agent"]),
            world_id=item["world_id"],
            settings=item["settings"],
            **fields,
        )
    return EndUser(project=project, **fields)


def _get_or_create(
    model: type[Agent] | type[Room] | type[EndUser],
    project: Project,
    items: list[dict[str, Any]],
    counts: dict[str, int],
    *,
    agents: dict[str, Agent] | None = None,
) -> tuple[dict[str, Any], list[Any]]:
    """The project's rows for the items' external ids, creating the missing ones with
    the document's times; returns them by external id, and those created."""
    manager: Any = model.objects
    found: dict[str, Any] = {}
    for chunk in _chunks([item["external_id"] for item in items]):
        found.update(
            (row.external_id, row) for row in manager.filter(project=project, external_id__in=chunk)
        )
    wanted = [item for item in items if item["external_id"] not in found]
    created = manager.bulk_create(
        [_build(model, project, item, agents or {}) for item in wanted], batch_size=CHUNK_SIZE
    )
    if model is not Agent:
        times = {row.pk: item["updated_at"] for row, item in zip(created, wanted, strict=True)}
        _updated_at_restore(model, times)
    counts["created"], counts["existing"] = len(created), len(items) - len(created)
    found.update((row.external_id, row) for row in created)
    return found, created


def _updated_at_restore(model: type[models.Model], times: dict[Any, datetime]) -> None:
    """Put the document's updated_at back (auto_now made it the time of the insert)."""
    pk = model._meta.pk
    assert pk is not None
    for chunk in _chunks(list(times)):
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {model._meta.db_table} AS t SET updated_at = v.updated_at "
                f"FROM unnest(%s::{pk.db_type(connection)}[], %s::timestamptz[]) "
                f"AS v(id, updated_at) WHERE t.{pk.column} = v.id",
                [chunk, [times[key] for key in chunk]],
            )


def _room_settings_record(rooms: list[Room], actor: Actor) -> None:
    """A settings revision for each created room that brought its own settings."""
    SettingsRevision.objects.bulk_create(
        SettingsRevision(
            project_id=room.project_id,
            room=room,
            actor_type=actor.type,
            actor=actor.name,
            before={},
            after=room.settings,
        )
        for room in rooms
        if room.settings
    )


def _pk(rows: dict[str, Any], external_id: str | None) -> Any:
    return rows[external_id].pk if external_id is not None else None


def _memories_new(
    project: Project, items: list[dict[str, Any]], rows: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The items to create: not those whose id the project has, nor a `unique` one whose
    text the same user, room and kind has. An id another project uses is invalid."""
    taken: dict[uuid.UUID, int] = {}
    for chunk in _chunks([item["id"] for item in items]):
        taken.update(Memory.objects.filter(pk__in=chunk).values_list("id", "project_id"))
    foreign = [
        f"memories[{n}].id"
        for n, item in enumerate(items)
        if taken.get(item["id"], project.pk) != project.pk
    ]
    if foreign:
        raise ExportInvalid({path: ["Id already in use."] for path in foreign[:MAX_ERRORS]})
    new = [item for item in items if item["id"] not in taken]
    for item in new:
        item["content_hash"] = content_hash(item["content"])
    stored: set[tuple[Any, ...]] = set()
    for chunk in _chunks({item["content_hash"] for item in new if item["unique"]}):
        stored.update(
            Memory.objects.filter(project=project, is_unique=True, content_hash__in=chunk)
            .values_list("end_user_id", "room_id", "kind", "content_hash")
        )  # fmt: skip
    return [
        item
        for item in new
        if not item["unique"]
        or (
            _pk(rows["user"], item["user"]),
            _pk(rows["room"], item["room"]),
            item["kind"],
            item["content_hash"],
        )
        not in stored
    ]


MEMORY_COLUMNS = (
    "id", "kind", "role", "content", "content_json", "metadata", "content_hash", "importance",
    "confidence", "access_count", "accessed_at", "status", "source_ids", "document_id",
    "chunk_index", "created_at",
)  # fmt: skip


def _windows_in(item: dict[str, Any], space: EmbeddingSpace | None) -> list[Any] | None:
    """The item's vectors in ``space``, if it carries them."""
    for entry in item["embeddings"]:
        if space is not None and _space_name(entry["space"]) == _space_name(space):
            return entry["windows"]  # type: ignore[no-any-return]
    return None


def _memories_write(
    project: Project,
    items: list[dict[str, Any]],
    rows: dict[str, dict[str, Any]],
    space: EmbeddingSpace | None,
    actor: Actor,
    report: ImportReport,
) -> set[str]:
    """Create the items' memories, their vectors in ``space`` and their revisions;
    returns the names of the other spaces whose vectors were ignored."""
    now = timezone.now()
    memories, embeddings, ignored = [], [], set()
    for item in items:
        memory = Memory(
            project=project,
            end_user=rows["user"].get(item["user"]),
            room=rows["room"].get(item["room"]),
            agent=rows["agent"].get(item["agent"]),
            is_unique=item["unique"],
            **{name: item[name] for name in MEMORY_COLUMNS},
        )
        windows = _windows_in(item, space)
        if windows is not None:
            memory.embedding_status = Memory.EmbeddingStatus.DONE
            memory.embedded_at = now
            embeddings += [
                Embedding(memory_id=item["id"], space=space, window=n, vector=v, created_at=now)
                for n, v in enumerate(windows)
            ]
            report.vectors["stored"] += 1
        elif item["embeddings"]:
            ignored |= {_space_name(entry["space"]) for entry in item["embeddings"]}
            report.vectors["ignored"] += 1
        memories.append(memory)
    Memory.objects.bulk_create(memories)
    _updated_at_restore(Memory, {item["id"]: item["updated_at"] for item in items})
    Embedding.objects.bulk_create(embeddings, batch_size=CHUNK_SIZE)
    MemoryRevision.objects.bulk_create(
        revision_build(memory=m, action="create", actor=actor, before=None, after=m.snapshot())
        for m in memories
    )
    report.memories["created"] += len(memories)
    return ignored
