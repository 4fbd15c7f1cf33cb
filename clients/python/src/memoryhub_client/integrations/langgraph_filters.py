"""The pure parts of ``memoryhub_client.integrations.langgraph``: LangGraph's filter
and namespace-matching rules (as its own stores apply them), the ``user=`` helper and
the reading of an item's record in a memory's metadata."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from langgraph.store.base import ListNamespacesOp, MatchCondition

from memoryhub_client.models import Memory

__all__ = [
    "FIELD",
    "UserOf",
    "expired",
    "filter_matches",
    "namespaces_listed",
    "pushed_down",
    "record_of",
    "user_from_namespace",
]

UserOf = Callable[[tuple[str, ...]], "str | None"]
FIELD = "langgraph"  # the metadata key that holds a memory's LangGraph item


def user_from_namespace(position: int) -> UserOf:
    """A ``user=`` for namespaces that name their user at ``position`` (("users", id,
    ...) -> ``user_from_namespace(1)``); a shorter namespace is the project's."""

    def user_of(namespace: tuple[str, ...]) -> str | None:
        return namespace[position] if len(namespace) > position else None

    return user_of


def filter_matches(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics (as its InMemoryStore): nested dicts, exact lists,
    the operators $eq $ne $gt $gte $lt $lte."""
    if isinstance(wanted, dict):
        if any(str(name).startswith("$") for name in wanted):
            return all(_operator(value, name, operand) for name, operand in wanted.items())
        return isinstance(value, dict) and all(
            filter_matches(value.get(name), part) for name, part in wanted.items()
        )
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(filter_matches(v, w) for v, w in zip(value, wanted, strict=True))
        )
    equal: bool = value == wanted
    return equal


def _operator(value: Any, name: str, operand: Any) -> bool:
    if name in ("$eq", "$ne"):
        same: bool = value == operand
        return same == (name == "$eq")
    if name not in ("$gt", "$gte", "$lt", "$lte"):
        raise ValueError(f"unsupported filter operator: {name}")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    left, right = float(value), float(operand)
    return {"$gt": left > right, "$gte": left >= right, "$lt": left < right}.get(
        name, left <= right
    )


def pushed_down(wanted: Mapping[str, Any] | None) -> dict[str, Any]:
    """The part of a filter the hub's containment can apply (plain equalities)."""
    plain: dict[str, Any] = {}
    for name, part in (wanted or {}).items():
        has_operator = isinstance(part, dict) and any(str(k).startswith("$") for k in part)
        if not has_operator and not isinstance(part, (list, tuple, dict)):
            plain[name] = part
    return plain


def _matches_namespace(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "suffix":
        namespace, path = namespace[::-1], path[::-1]
    elif condition.match_type != "prefix":
        raise ValueError(f"unsupported match type: {condition.match_type}")
    return all(want in ("*", got) for got, want in zip(namespace, path, strict=False))


def namespaces_listed(found: Iterable[tuple[str, ...]], op: ListNamespacesOp) -> list[Any]:
    conditions = op.match_conditions or ()
    kept = {ns for ns in found if all(_matches_namespace(ns, c) for c in conditions)}
    if op.max_depth is not None:
        kept = {ns[: op.max_depth] for ns in kept}
    return sorted(kept)[op.offset : op.offset + op.limit]


def record_of(memory: Memory) -> dict[str, Any] | None:
    """The LangGraph item a memory holds (``metadata["langgraph"]``), or None."""
    metadata = memory.metadata if isinstance(memory.metadata, dict) else {}
    record = metadata.get(FIELD)
    return record if isinstance(record, dict) and "key" in record else None


def expired(memory: Memory) -> bool:
    """Whether the memory's item is past its TTL (the expiry is in its metadata)."""
    expires_at = (record_of(memory) or {}).get("expires_at")
    return expires_at is not None and float(expires_at) <= time.time()
