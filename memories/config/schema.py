"""The whole configuration: ``ProjectSettings`` (every section), the sections a room
may override, and the schema the API and the console describe it by."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cache
from typing import Any, get_type_hints

from memories.config.intake import IngestionSettings, LimitSettings
from memories.config.lifecycle import (
    FactSettings,
    ImportanceSettings,
    LlmSettings,
    PruningSettings,
    SynopsisSettings,
)
from memories.config.retrieval import ContextSettings, SearchSettings
from memories.config.rooms import BufferSettings, WorkingSettings


@dataclass(frozen=True)
class ProjectSettings:
    """Every section of a project's configuration."""

    search: SearchSettings = field(default_factory=SearchSettings)
    buffer: BufferSettings = field(default_factory=BufferSettings)
    working: WorkingSettings = field(default_factory=WorkingSettings)
    facts: FactSettings = field(default_factory=FactSettings)
    importance: ImportanceSettings = field(default_factory=ImportanceSettings)
    pruning: PruningSettings = field(default_factory=PruningSettings)
    limits: LimitSettings = field(default_factory=LimitSettings)
    synopsis: SynopsisSettings = field(default_factory=SynopsisSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    ingestion: IngestionSettings = field(default_factory=IngestionSettings)
    llm: LlmSettings = field(default_factory=LlmSettings)


# the sections a room can override (PATCH /api/v1/rooms/{room}/ {"settings": ...})
ROOM_SECTIONS = ("buffer", "working")

TYPE_NAMES = {int: "integer", float: "number", str: "string", bool: "boolean"}


@cache
def settings_sections() -> dict[str, type[Any]]:
    """Each section's name and its dataclass, in ProjectSettings' order."""
    hints = get_type_hints(ProjectSettings)
    return {f.name: hints[f.name] for f in dataclasses.fields(ProjectSettings)}


@cache
def settings_section_hints(section: str) -> dict[str, Any]:
    """A section's field types (get_type_hints evaluates each annotation: a request
    reads its project's settings, and that took ~0.25 ms before this cache)."""
    return get_type_hints(settings_sections()[section])


def settings_schema() -> dict[str, dict[str, dict[str, Any]]]:
    """Every setting by section: type, default, range or choices, description."""
    return {
        section: {
            f.name: _entry(f, settings_section_hints(section)[f.name])
            for f in dataclasses.fields(cls)
        }
        for section, cls in settings_sections().items()
    }


def _entry(setting: dataclasses.Field[Any], kind: type) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": TYPE_NAMES[kind],
        "default": setting.default,
        "description": setting.metadata["description"],
    }
    for key in ("minimum", "maximum", "choices"):
        if setting.metadata[key] is not None:
            entry[key] = (
                list(setting.metadata[key]) if key == "choices" else kind(setting.metadata[key])
            )
    return entry


def settings_as_dict(config: ProjectSettings) -> dict[str, dict[str, Any]]:
    """Every setting's value, by section."""
    return dataclasses.asdict(config)
