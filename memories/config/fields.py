"""What a settings section is made of: ``setting()``, a dataclass field that carries
its description and its range or choices, and ``SettingsError``, which names each bad
setting (a section's cross-field rule raises it too)."""

from __future__ import annotations

from dataclasses import field
from typing import Any


def setting(
    default: Any,
    description: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A field of a settings section, with what validation and the API need to know."""
    return field(
        default=default,
        metadata={
            "description": description,
            "minimum": minimum,
            "maximum": maximum,
            "choices": choices,
        },
    )


class SettingsError(ValueError):
    """Invalid settings: ``errors`` maps a dotted setting name to its messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{name}: {' '.join(m)}" for name, m in errors.items()))
        self.errors = errors
