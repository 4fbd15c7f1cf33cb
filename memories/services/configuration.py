"""A project's configuration: read the effective settings, change them (recorded)."""

from __future__ import annotations

from memories.config import ProjectSettings, settings_from_overrides
from memories.models import Project


def project_settings_get(*, project: Project) -> ProjectSettings:
    """The project's effective settings: its overrides over the schema's defaults."""
    return settings_from_overrides(project.settings)
