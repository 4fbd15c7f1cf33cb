"""A project's configuration: read the effective settings, change them (recorded)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memories.config import (
    ProjectSettings,
    SettingsError,
    settings_from_overrides,
    settings_merge,
    settings_overrides_clean,
    settings_validate,
)
from memories.models import Project, SettingsRevision
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
