"""The per-project configuration: one declared schema of product policy.

Each section is a frozen dataclass whose fields are the settings: the type hint is
the type, the default the default, and ``setting()`` adds the range or the choices
and a one-line description. A project stores only what it overrides, nested by
section, in ``Project.settings``; ``project_settings_get(project=...)``
(memories/services/configuration.py) gives the effective values. Infrastructure
(threads, batch sizes, timeouts, limits) stays in the environment
(memoryhub/settings.py). A new capability adds its section to the module of its
topic and to ``ProjectSettings``.

This package is the public face: import from ``memories.config``. Its modules are
``fields`` (``setting()``, ``SettingsError``), the sections by topic (``retrieval``,
``rooms``, ``lifecycle``, ``intake``), ``schema`` (``ProjectSettings`` and its
description) and ``overrides`` (stored overrides validated, merged and built).
"""

from memories.config.fields import SettingsError, setting
from memories.config.intake import CHUNKERS, IngestionSettings, LimitSettings
from memories.config.lifecycle import (
    FactSettings,
    ImportanceSettings,
    LlmSettings,
    PruningSettings,
    SynopsisSettings,
)
from memories.config.overrides import (
    settings_from_overrides,
    settings_merge,
    settings_overrides_clean,
    settings_validate,
)
from memories.config.retrieval import (
    SEARCH_MODES,
    WINDOW_AGGREGATES,
    ContextSettings,
    SearchSettings,
)
from memories.config.rooms import BufferSettings, WorkingSettings
from memories.config.schema import (
    ROOM_SECTIONS,
    ProjectSettings,
    settings_as_dict,
    settings_schema,
)

__all__ = [
    "CHUNKERS",
    "ROOM_SECTIONS",
    "SEARCH_MODES",
    "WINDOW_AGGREGATES",
    "BufferSettings",
    "ContextSettings",
    "FactSettings",
    "ImportanceSettings",
    "IngestionSettings",
    "LimitSettings",
    "LlmSettings",
    "ProjectSettings",
    "PruningSettings",
    "SearchSettings",
    "SettingsError",
    "SynopsisSettings",
    "WorkingSettings",
    "setting",
    "settings_as_dict",
    "settings_from_overrides",
    "settings_merge",
    "settings_overrides_clean",
    "settings_schema",
    "settings_validate",
]
