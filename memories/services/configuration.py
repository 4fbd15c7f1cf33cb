"""A project's configuration: read the effective settings, change them (recorded)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memories.config import (
    ROOM_SECTIONS,
    ProjectSettings,
    SettingsError,
    settings_from_overrides,
    settings_merge,
    settings_overrides_clean,
    settings_validate,
)
from memories.models import Project, Room, SettingsRevision
from memories.services.revisions import Actor


def project_settings_get(*, project: Project) -> ProjectSettings:
    """The project's effective settings: its overrides over the schema's defaults."""
    return settings_from_overrides(project.settings)


@transaction.atomic
def project_settings_update(
    *, project: Project, changes: Any, actor: Actor, replace: bool = False
) -> ProjectSettings:
    """Apply ``changes`` (``{"search": {"rrf_k": 40}}``; a null value resets a setting,
    a null section all of it) to the project's overrides, or with ``replace`` make them
    the overrides, and record the change. Raises SettingsError naming every bad
    setting; then nothing is written."""
    if not isinstance(changes, dict):
        raise SettingsError({"settings": ["Must be an object of sections."]})
    locked = Project.objects.select_for_update().get(pk=project.pk)
    before = settings_overrides_clean(locked.settings)
    after = settings_validate(changes if replace else settings_merge(before, changes))
    if after != locked.settings:
        locked.settings = after
        locked.save(update_fields=["settings"])
        SettingsRevision.objects.create(
            project=locked,
            actor_type=actor.type,
            actor=actor.name,
            before=before,
            after=after,
        )
    project.settings = after
    return settings_from_overrides(after)


def _room_overrides(project_overrides: Any, room_overrides: Any) -> dict[str, dict[str, Any]]:
    """The project's valid overrides with the room's applied over them."""
    merged = settings_overrides_clean(project_overrides)
    for section, values in (room_overrides or {}).items():
        if section in ROOM_SECTIONS and isinstance(values, dict):
            merged = settings_merge(merged, {section: values})
    return merged


def room_settings_get(*, room: Room) -> ProjectSettings:
    """The room's effective settings: its own buffer and working-memory overrides over
    the project's effective settings."""
    return settings_from_overrides(_room_overrides(room.project.settings, room.settings))


def _room_settings_validate(room_changes: Any) -> None:
    if not isinstance(room_changes, dict):
        raise SettingsError({"settings": ["Must be an object of sections."]})
    errors = {
        section: [f"Cannot be set per room; rooms override: {', '.join(ROOM_SECTIONS)}."]
        for section in room_changes
        if section not in ROOM_SECTIONS
    }
    if errors:
        raise SettingsError(errors)


@transaction.atomic
def room_settings_update(*, room: Room, changes: Any, actor: Actor) -> ProjectSettings:
    """Apply ``changes`` (``{"buffer": {"max_size": 20}}``; null resets a setting to the
    project's value) to the room's overrides and record the change. Only the sections
    of ROOM_SECTIONS can be overridden. Raises SettingsError naming every bad setting;
    then nothing is written."""
    _room_settings_validate(changes)
    locked = Room.objects.select_for_update().select_related("project").get(pk=room.pk)
    before = locked.settings or {}
    after = settings_merge(before, changes)
    _room_settings_validate(after)
    clean = settings_validate(after)  # each room value on its own...
    settings_validate(_room_overrides(locked.project.settings, clean))  # ...and merged
    if clean != before:
        locked.settings = clean
        locked.save(update_fields=["settings", "updated_at"])
        SettingsRevision.objects.create(
            project=locked.project,
            room=locked,
            actor_type=actor.type,
            actor=actor.name,
            before=before,
            after=clean,
        )
    room.settings = clean
    return room_settings_get(room=locked)
