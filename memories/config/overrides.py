"""A project's stored overrides (``Project.settings``, only what differs from the
defaults, nested by section): validated name by name and as a whole, merged with a
change, cleaned of what no longer validates, and built into ``ProjectSettings``."""

from __future__ import annotations

import dataclasses
import json
import math
from functools import lru_cache
from typing import Any

from memories.config.fields import SettingsError
from memories.config.schema import ProjectSettings, settings_section_hints, settings_sections

TYPE_PHRASES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _value(name: str, kind: type, meta: dict[str, Any], value: Any) -> Any:
    """``value`` as a valid setting of type ``kind``, or SettingsError naming it."""
    ok = (
        isinstance(value, bool)
        if kind is bool
        else isinstance(value, kind | int if kind is float else kind)
        and not isinstance(value, bool)
    )
    if not ok or (isinstance(value, float) and not math.isfinite(value)):
        raise SettingsError({name: [f"Must be {TYPE_PHRASES[kind]}."]})
    if meta["choices"] is not None and value not in meta["choices"]:
        raise SettingsError({name: [f"Must be one of: {', '.join(meta['choices'])}."]})
    if meta["minimum"] is not None and value < meta["minimum"]:
        raise SettingsError({name: [f"Must be at least {kind(meta['minimum'])}."]})
    if meta["maximum"] is not None and value > meta["maximum"]:
        raise SettingsError({name: [f"Must be at most {kind(meta['maximum'])}."]})
    return kind(value)


def _section_clean(
    section: str, values: dict[str, Any], errors: dict[str, list[str]]
) -> dict[str, Any]:
    """The section's values, each checked; what is wrong goes into ``errors``."""
    hints = settings_section_hints(section)
    fields = {f.name: f for f in dataclasses.fields(settings_sections()[section])}
    clean: dict[str, Any] = {}
    for name, value in values.items():
        dotted = f"{section}.{name}"
        if name not in fields:
            errors[dotted] = [f"Unknown setting; known: {', '.join(fields)}."]
            continue
        try:
            clean[name] = _value(dotted, hints[name], dict(fields[name].metadata), value)
        except SettingsError as error:
            errors.update(error.errors)
    return clean


def settings_validate(overrides: Any) -> dict[str, dict[str, Any]]:
    """Stored overrides (``{"search": {"rrf_k": 40}}``), checked name by name and as a
    whole; returns them normalized (ints where a float is due become floats)."""
    if not isinstance(overrides, dict):
        raise SettingsError({"settings": ["Must be an object of sections."]})
    sections = settings_sections()
    errors: dict[str, list[str]] = {}
    clean: dict[str, dict[str, Any]] = {}
    for section, values in overrides.items():
        if section not in sections:
            errors[section] = [f"Unknown section; known: {', '.join(sections)}."]
        elif not isinstance(values, dict):
            errors[section] = ["Must be an object of settings."]
        elif values_clean := _section_clean(section, values, errors):
            clean[section] = values_clean
    if errors:
        raise SettingsError(errors)
    _build(clean)  # cross-field rules (__post_init__)
    return clean


def settings_merge(
    stored: dict[str, dict[str, Any]], changes: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """``stored`` overrides with ``changes`` applied; a null value (or a null section)
    removes an override, so the setting is back at its default."""
    merged = {section: dict(values) for section, values in stored.items()}
    for section, values in changes.items():
        if values is None:
            merged.pop(section, None)
            continue
        if not isinstance(values, dict):
            merged[section] = values  # settings_validate names the error
            continue
        target = merged.setdefault(section, {})
        for name, value in values.items():
            if value is None:
                target.pop(name, None)
            else:
                target[name] = value
        if not target:
            merged.pop(section)
    return merged


def _build(overrides: dict[str, dict[str, Any]]) -> ProjectSettings:
    sections = settings_sections()
    return ProjectSettings(
        **{name: cls(**overrides.get(name, {})) for name, cls in sections.items()}
    )


@lru_cache(maxsize=1024)
def _cached(canonical: str) -> ProjectSettings:
    return _build(json.loads(canonical))


def settings_overrides_clean(overrides: Any) -> dict[str, dict[str, Any]]:
    """The valid part of stored overrides: a value that no longer validates (a setting
    removed or narrowed by an upgrade, a row edited by hand) is dropped, so the
    setting is back at its default."""
    try:
        return settings_validate(overrides if overrides is not None else {})
    except SettingsError as error:
        if not isinstance(overrides, dict):
            return {}
        part = {
            section: {
                name: value
                for name, value in values.items()
                if f"{section}.{name}" not in error.errors
            }
            for section, values in overrides.items()
            if isinstance(values, dict) and section not in error.errors
        }
        try:
            return settings_validate(part)
        except SettingsError:  # a cross-field rule: keep none of them
            return {}


def settings_from_overrides(overrides: Any) -> ProjectSettings:
    """The effective settings for stored overrides. Cached by content: a process sees a
    change as soon as it reads the project row again (every API request and task
    does), so there is nothing to invalidate and no process can serve stale values."""
    try:
        stored = json.dumps(overrides, sort_keys=True)
    except (TypeError, ValueError):  # not JSON: no stored row holds that; never cached
        return _cached(json.dumps(settings_overrides_clean(overrides), sort_keys=True))
    return _from_stored(stored)


@lru_cache(maxsize=1024)
def _from_stored(stored: str) -> ProjectSettings:
    """Stored overrides as JSON: cleaned and built once per content."""
    clean = settings_overrides_clean(json.loads(stored))
    return _cached(json.dumps(clean, sort_keys=True))
