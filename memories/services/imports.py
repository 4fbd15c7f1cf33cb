"""Import of an export document (memories.services.exports) into a project: checked
whole first (memories.services.export_checks), then written in one transaction, so a
bad file writes nothing. Users, rooms and agents are matched by external id; memories
keep their ids and times."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, models
from django.utils import timezone

from memories.models import (
    Agent,
    Embedding,
    EmbeddingSpace,
    EndUser,
    Memory,
    Project,
    Room,
    SettingsRevision,
    content_hash,
)
from memories.services.concurrency import conflict_retried
from memories.services.embedding_spaces import project_space
from memories.services.export_checks import export_document_check
from memories.services.exports import CHUNK_SIZE, MEMORY_FIELDS, Progress, chunked
from memories.services.revisions import Actor
from memories.services.stored import memories_stored


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
    memories keep their ids (as public ids, Memory) and times. A memory whose id the
    project has already is skipped (importing a file twice writes nothing the second
    time); another project's use of an id is invisible (an export of one project
    imports into another). The new memories are stored as any created memory is
    (memories_stored): a ``create`` revision each by ``actor``, then, after the commit,
    memories_created (the rooms' summaries, the facts of the users' messages). Vectors
    of the configured embedding space are stored; the other new memories are embedded
    by the workers. ``progress`` (optional) is called with the number of memories
    handled, for progress bars.
    """
    checked = export_document_check(document)
    # a concurrent writer that creates one of the same users, rooms, agents or memories
    # first makes an attempt fail; the next one finds it (concurrency.conflict_retried)
    keys = sum(len(checked[name]) for name in ("users", "rooms", "agents"))
    return conflict_retried(
        lambda: _import(project, checked, actor, progress), keys=keys + 3 * len(checked["memories"])
    )


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
    space = project_space(project) if any(item["embeddings"] for item in new) else None
    ignored: set[str] = set()
    for chunk in chunked(new):
        memories, chunk_ignored = _memories_write(project, chunk, rows, space, report)
        # chunk by chunk, so that a large import holds one chunk's rows at a time
        memories_stored(project=project, memories=memories, actor=actor)
        ignored |= chunk_ignored
        if progress is not None:
            progress(len(chunk))
    if ignored:
        report.notes.append(
            f"{report.vectors['ignored']} memories carried vectors of another embedding space "
            f"({', '.join(sorted(ignored))}) than the configured one ({_space_name(space)}): "
            "those vectors were ignored and these memories will be embedded again."
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
    for chunk in chunked([item["external_id"] for item in items]):
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
    for chunk in chunked(list(times)):
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
    text the same user, room and kind has. Ids are public ids (Memory), scoped to the
    project: another project's use of an id changes nothing but the pk given to the
    memory here (``item["pk"]``: the id itself when no memory anywhere has it as pk)."""
    stored_ids: set[uuid.UUID] = set()
    for chunk in chunked([item["id"] for item in items]):
        stored_ids.update(
            Memory.objects.filter(project=project, public_id__in=chunk).values_list(
                "public_id", flat=True
            )
        )
    new = [item for item in items if item["id"] not in stored_ids]
    taken: set[uuid.UUID] = set()
    for chunk in chunked([item["id"] for item in new]):
        taken.update(Memory.objects.filter(pk__in=chunk).values_list("pk", flat=True))
    for item in new:
        item["pk"] = uuid.uuid4() if item["id"] in taken else item["id"]
    for item in new:
        item["content_hash"] = content_hash(item["content"])
    stored: set[tuple[Any, ...]] = set()
    for chunk in chunked({item["content_hash"] for item in new if item["unique"]}):
        stored.update(
            Memory.objects.filter(
                project=project, is_unique=True, content_hash__in=chunk
            ).values_list("end_user_id", "room_id", "kind", "content_hash")
        )
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


# the memory fields an item gives as they are: the ids, `unique` and updated_at are set
# apart (_memories_write, _updated_at_restore); content_hash is _memories_new's
MEMORY_COLUMNS = (
    *(name for name in MEMORY_FIELDS if name not in {"id", "public_id", "is_unique", "updated_at"}),
    "content_hash",
)


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
    report: ImportReport,
) -> tuple[list[Memory], set[str]]:
    """Create the items' memories and their vectors in ``space``; returns the memories
    and the names of the other spaces whose vectors were ignored."""
    now = timezone.now()
    memories, embeddings, ignored = [], [], set()
    for item in items:
        memory = Memory(
            project=project,
            end_user=rows["user"].get(item["user"]),
            room=rows["room"].get(item["room"]),
            agent=rows["agent"].get(item["agent"]),
            is_unique=item["unique"],
            id=item["pk"],
            public_id=item["id"],
            **{name: item[name] for name in MEMORY_COLUMNS},
        )
        windows = _windows_in(item, space)
        if windows is not None:
            memory.embedding_status = Memory.EmbeddingStatus.DONE
            memory.embedded_at = now
            embeddings += [
                Embedding(memory_id=item["pk"], space=space, window=n, vector=v, created_at=now)
                for n, v in enumerate(windows)
            ]
            report.vectors["stored"] += 1
        elif item["embeddings"]:
            ignored |= {_space_name(entry["space"]) for entry in item["embeddings"]}
            report.vectors["ignored"] += 1
        memories.append(memory)
    Memory.objects.bulk_create(memories)
    _updated_at_restore(Memory, {item["pk"]: item["updated_at"] for item in items})
    Embedding.objects.bulk_create(embeddings, batch_size=CHUNK_SIZE)
    report.memories["created"] += len(memories)
    return memories, ignored
