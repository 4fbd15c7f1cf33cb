"""The structured part (``content_json``) of the kinds that have one: a fact's category
and slot, a relationship's subject, predicate and object, a goal's status and due date.
Checked on every write (API, import, extraction), so filters can rely on it."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

FACT_CATEGORIES = (
    "identity",
    "preference",
    "location",
    "work",
    "health",
    "relationship",
    "goal",
    "other",
)
GOAL_STATUSES = ("open", "done", "abandoned")
MAX_TERM = 255  # subject, predicate, object, slot, value
MAX_DESCRIPTION = 2000


class StructuredContentError(ValueError):
    """``errors`` maps each bad key of content_json to its messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{key}: {' '.join(m)}" for key, m in errors.items()))
        self.errors = errors


def _text(
    value: Any, key: str, errors: dict[str, list[str]], *, limit: int = MAX_TERM
) -> str | None:
    if not isinstance(value, str) or not value.strip():
        errors[key] = ["Must be a non-empty string."]
        return None
    if len(value) > limit:
        errors[key] = [f"Must be at most {limit} characters."]
        return None
    return value.strip()


def _due(value: Any, errors: dict[str, list[str]]) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        for parse in (date.fromisoformat, lambda text: datetime.fromisoformat(text).date()):
            try:
                return parse(value).isoformat()
            except ValueError:
                continue
    errors["due"] = ["Must be a date (YYYY-MM-DD) or null."]
    return None


def structured_content_clean(*, kind: str, content_json: dict[str, Any]) -> dict[str, Any]:
    """``content_json`` checked for the kind, normalized (trimmed terms, a goal's status
    defaulting to open, its due date as YYYY-MM-DD); other keys are kept as they are.
    Raises StructuredContentError naming each bad key."""
    clean = dict(content_json)
    errors: dict[str, list[str]] = {}
    if kind == "fact":
        category = clean.get("category")
        if category is not None and category not in FACT_CATEGORIES:
            errors["category"] = [f"Must be one of: {', '.join(FACT_CATEGORIES)}."]
        for key in ("slot", "value"):
            if clean.get(key) is not None:
                clean[key] = _text(clean[key], key, errors)
    elif kind == "relationship":
        for key in ("subject", "predicate", "object"):
            if key not in clean:
                errors[key] = ["Required for a relationship."]
            else:
                clean[key] = _text(clean[key], key, errors)
    elif kind == "goal":
        clean["status"] = clean.get("status", "open")
        if clean["status"] not in GOAL_STATUSES:
            errors["status"] = [f"Must be one of: {', '.join(GOAL_STATUSES)}."]
        clean["due"] = _due(clean.get("due"), errors)
        if clean.get("description") is not None:
            clean["description"] = _text(
                clean["description"], "description", errors, limit=MAX_DESCRIPTION
            )
    if errors:
        raise StructuredContentError(errors)
    return clean
