"""The per-project configuration: one declared schema of product policy.

Each section is a frozen dataclass whose fields are the settings: the type hint is
the type, the default the default, and ``setting()`` adds the range or the choices
and a one-line description. A project stores only what it overrides, nested by
section, in ``Project.settings``; ``project_settings(project)`` gives the effective
values. Infrastructure (threads, batch sizes, timeouts, limits) stays in the
environment (memoryhub/settings.py). Later capabilities add their section here.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any, get_type_hints

SEARCH_MODES = ("auto", "vector", "keyword", "hybrid")
WINDOW_AGGREGATES = ("mean", "max")


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


@dataclass(frozen=True)
class SearchSettings:
    """How search ranks memories (POST /api/v1/search/ and everything built on it)."""

    default_mode: str = setting("auto", "Mode of a search that names none.", choices=SEARCH_MODES)
    keyword_weight: float = setting(
        0.5,
        "auto mode: weight of the normalized BM25 score against the cosine score.",
        minimum=0.0,
        maximum=1.0,
    )
    neighbour_weight: float = setting(
        0.3,
        "auto mode: how much a conversation turn is raised by the turns before and after it.",
        minimum=0.0,
        maximum=1.0,
    )
    neighbour_max_bytes: int = setting(
        1000,
        "auto mode: only turns of at most this many bytes of text (characters, for "
        "ASCII) are raised by their neighbours (a longer turn is found by its own "
        "text); 0 raises every turn.",
        minimum=0,
        maximum=1_000_000,
    )
    rrf_k: int = setting(
        60, "hybrid mode: the k of reciprocal rank fusion, 1/(k + rank).", minimum=1, maximum=1000
    )
    recency_weight: float = setting(
        0.0, "Share of the final score given to recency (every mode).", minimum=0.0, maximum=1.0
    )
    recency_half_life_days: float = setting(
        30.0, "Age in days at which the recency score halves.", minimum=0.01, maximum=36500.0
    )
    importance_weight: float = setting(
        0.0,
        "Share of the final score given to a memory's importance (every mode).",
        minimum=0.0,
        maximum=1.0,
    )
    window_aggregate: str = setting(
        "mean",
        "A memory embedded as several windows (longer than the model reads at once) is "
        "scored by the mean of its windows' cosine similarities (the whole memory) or by "
        "the max (its best passage).",
        choices=WINDOW_AGGREGATES,
    )
    bm25_k1: float = setting(
        0.9, "Keyword ranking: BM25 term-frequency saturation.", minimum=0.0, maximum=10.0
    )
    bm25_b: float = setting(
        0.75, "Keyword ranking: BM25 length normalization (0 none, 1 full).", minimum=0.0,
        maximum=1.0,
    )  # fmt: skip

    def __post_init__(self) -> None:
        if self.recency_weight + self.importance_weight > 1.0:
            raise SettingsError(
                {
                    "search.importance_weight": [
                        "recency_weight + importance_weight must be at most 1."
                    ]
                }
            )


@dataclass(frozen=True)
class BufferSettings:
    """A room's conversation buffer (MUXI's buffer memory): the window of recent messages,
    the capacity kept unsummarized, and how the oldest are condensed into summaries."""

    max_size: int = setting(
        10, "The window: how many recent messages GET .../buffer/ returns.", minimum=1,
        maximum=1000,
    )  # fmt: skip
    buffer_multiplier: int = setting(
        10,
        "Capacity = max_size x buffer_multiplier unsummarized messages; beyond it the "
        "oldest are summarized and archived.",
        minimum=1,
        maximum=100,
    )
    recency_bias: float = setting(
        0.3,
        "Buffer search default: score = (1 - recency_bias) x semantic + recency_bias x recency.",
        minimum=0.0,
        maximum=1.0,
    )
    summarize: bool = setting(
        True, "Summarize and archive the oldest messages once a room is over capacity."
    )
    summary_batch_size: int = setting(
        0,
        "Messages condensed into one summary (0: max_size).",
        minimum=0,
        maximum=1000,
    )
    summary_max_tokens: int = setting(
        400,
        "Length limit of a summary in cl100k_base tokens (the chain folds the previous "
        "summary in, so this bounds the whole account of the room's older turns).",
        minimum=50,
        maximum=8000,
    )

    @property
    def capacity(self) -> int:
        return self.max_size * self.buffer_multiplier

    @property
    def batch_size(self) -> int:
        return self.summary_batch_size or self.max_size


@dataclass(frozen=True)
class WorkingSettings:
    """A room's working memory (MUXI): short-lived notes in Redis, never in PostgreSQL."""

    ttl_seconds: int = setting(
        3600, "How long an item lives unless its write names another TTL.", minimum=1,
        maximum=30 * 86400,
    )  # fmt: skip
    max_memory_mb: float = setting(
        10.0,
        "Size cap of a room's working memory; the oldest items go first (FIFO).",
        minimum=0.01,
        maximum=1024.0,
    )


@dataclass(frozen=True)
class FactSettings:
    """What is mined from users' messages (synopsis/) and how it joins what is held."""

    extract: bool = setting(True, "Extract facts from the users' messages in the background.")
    duplicate_similarity: float = setting(
        0.9,
        "A new fact at least this similar (cosine) to one held of the same user reinforces "
        "it instead of being stored again.",
        minimum=0.5,
        maximum=1.0,
    )
    min_confidence: float = setting(
        0.3, "Extracted facts less confident than this are dropped.", minimum=0.0, maximum=1.0
    )
    reinforce_step: float = setting(
        0.1,
        "How much a repeated fact's confidence rises (towards 1) each time it is confirmed.",
        minimum=0.0,
        maximum=1.0,
    )


@dataclass(frozen=True)
class ImportanceSettings:
    """MUXI's importance: recency x w1 + access frequency x w2 + explicit importance x w3,
    recomputed by beat; search's importance_weight and pruning by importance use it."""

    recency_weight: float = setting(0.3, "Weight of recency.", minimum=0.0, maximum=1.0)
    access_weight: float = setting(
        0.3,
        "Weight of access frequency: log(access_count + 1), normalized within the user.",
        minimum=0.0,
        maximum=1.0,
    )
    explicit_weight: float = setting(
        0.4,
        "Weight of the importance the agent or an operator set (pinned: 1).",
        minimum=0.0,
        maximum=1.0,
    )
    half_life_days: float = setting(
        30.0, "Age in days at which the recency part halves.", minimum=0.01, maximum=36500.0
    )
    track_access: bool = setting(
        True,
        "Count each time search returns a memory to an agent (access_count, accessed_at).",
    )

    def __post_init__(self) -> None:
        total = self.recency_weight + self.access_weight + self.explicit_weight
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            raise SettingsError(
                {
                    "importance.explicit_weight": [
                        f"The three weights must add up to 1 (they add up to {total:g})."
                    ]
                }
            )


@dataclass(frozen=True)
class PruningSettings:
    """How a project's memories are pruned (each policy optional, 0 = off). Pruned
    memories leave search and are purged with their vectors after the retention."""

    fifo_per_user_kind: int = setting(
        0,
        "FIFO: keep at most this many active memories per user and kind, the oldest go.",
        minimum=0,
        maximum=10_000_000,
    )
    max_mb_per_user: float = setting(
        0.0,
        "Size cap per user in MB of text (content + metadata), the least important go first.",
        minimum=0.0,
        maximum=1_000_000.0,
    )
    importance_cap: int = setting(
        0,
        "Importance: keep at most this many active memories per user, the least important go.",
        minimum=0,
        maximum=10_000_000,
    )
    max_age_days: float = setting(
        0.0,
        "Age: memories older than this go, unless important or often accessed (below).",
        minimum=0.0,
        maximum=36500.0,
    )
    age_keep_importance: float = setting(
        0.8,
        "Age policy: keep memories whose importance score is at least this.",
        minimum=0.0,
        maximum=1.0,
    )
    age_keep_access_count: int = setting(
        5,
        "Age policy: keep memories returned to agents at least this many times.",
        minimum=0,
        maximum=1_000_000_000,
    )
    retention_days: float = setting(
        30.0,
        "Pruned memories are purged (deleted with their vectors) after this many days.",
        minimum=0.0,
        maximum=36500.0,
    )


@dataclass(frozen=True)
class LimitSettings:
    """Rate limits of the project's API keys, each key counted on its own; a request
    over them is a 429 with Retry-After."""

    reads_per_minute: int = setting(
        1200,
        "Reads per API key per minute (GET, searches, context); 0: unlimited.",
        minimum=0,
        maximum=1_000_000,
    )
    writes_per_minute: int = setting(
        600,
        "Writes per API key per minute (POST, PATCH, DELETE that change data); 0: unlimited.",
        minimum=0,
        maximum=1_000_000,
    )


@dataclass(frozen=True)
class SynopsisSettings:
    """The user synopsis (MUXI's two-tier cache): an identity part that changes slowly
    and a context part that follows the conversation."""

    identity_ttl_hours: float = setting(
        168.0, "The identity part is regenerated after this long.", minimum=0.01, maximum=8760.0
    )
    context_ttl_hours: float = setting(
        1.0, "The context part is regenerated after this long.", minimum=0.01, maximum=8760.0
    )
    refresh_on_access: bool = setting(
        True, "A read of a stale synopsis serves it and schedules its regeneration."
    )
    refresh_after_facts: int = setting(
        5,
        "Regenerate once this many facts were created or changed since the last generation "
        "(0: only by TTL).",
        minimum=0,
        maximum=10_000,
    )
    max_tokens: int = setting(300, "Length limit of each part in tokens.", minimum=20, maximum=4000)


@dataclass(frozen=True)
class ContextSettings:
    """POST /api/v1/context/: what an agent puts in its prompt, fitted to a budget."""

    max_tokens: int = setting(
        4000, "Budget of a context that names none.", minimum=100, maximum=200_000
    )
    history_share: float = setting(
        0.5, "Share of the budget for the room's recent turns and summaries.", minimum=0.0,
        maximum=1.0,
    )  # fmt: skip
    retrieved_share: float = setting(
        0.3, "Share of the budget for older memories and knowledge found by search.",
        minimum=0.0, maximum=1.0,
    )  # fmt: skip
    similarity_weight: float = setting(
        0.6, "Facts: weight of the similarity to the query.", minimum=0.0, maximum=1.0
    )
    confidence_weight: float = setting(
        0.4, "Facts: weight of the fact's confidence.", minimum=0.0, maximum=1.0
    )
    encoding: str = setting(
        "cl100k_base", "Token counting of a context that names none.", choices=("cl100k_base",)
    )

    def __post_init__(self) -> None:
        if self.history_share + self.retrieved_share > 1.0:
            raise SettingsError(
                {"context.retrieved_share": ["history_share + retrieved_share must be at most 1."]}
            )


# the chunkers of ingestion/chunkers.py (memories imports nothing from ingestion)
CHUNKERS = ("token_window", "recursive")


@dataclass(frozen=True)
class IngestionSettings:
    """Documents uploaded to the project: how their text is cut into knowledge chunks
    when an upload names no chunker or leaves some of its settings out."""

    chunker: str = setting(
        "token_window",
        "Chunker of an upload that names none: token_window (windows of tiktoken tokens) "
        "or recursive (paragraphs, lines, sentences, words up to a size in characters).",
        choices=CHUNKERS,
    )
    window_size: int = setting(
        512, "token_window: tokens (cl100k_base) per chunk.", minimum=16, maximum=8192
    )
    window_overlap: int = setting(
        50, "token_window: tokens each chunk shares with the one before.", minimum=0,
        maximum=8191,
    )  # fmt: skip
    chunk_size: int = setting(
        1000, "recursive: characters per chunk at most.", minimum=100, maximum=20_000
    )
    chunk_overlap: int = setting(
        200, "recursive: characters each chunk shares with the one before.", minimum=0,
        maximum=19_999,
    )  # fmt: skip

    def __post_init__(self) -> None:
        if self.window_overlap >= self.window_size:
            raise SettingsError({"ingestion.window_overlap": ["Must be less than window_size."]})
        if self.chunk_overlap >= self.chunk_size:
            raise SettingsError({"ingestion.chunk_overlap": ["Must be less than chunk_size."]})


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


# the sections a room can override (PATCH /api/v1/rooms/{room}/ {"settings": ...})
ROOM_SECTIONS = ("buffer", "working")


class SettingsError(ValueError):
    """Invalid settings: ``errors`` maps a dotted setting name to its messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{name}: {' '.join(m)}" for name, m in errors.items()))
        self.errors = errors


@cache
def _sections() -> dict[str, type[Any]]:
    hints = get_type_hints(ProjectSettings)
    return {f.name: hints[f.name] for f in dataclasses.fields(ProjectSettings)}


@cache
def _section_hints(section: str) -> dict[str, Any]:
    """A section's field types (get_type_hints evaluates each annotation: a request
    reads its project's settings, and that took ~0.25 ms before this cache)."""
    return get_type_hints(_sections()[section])


def settings_schema() -> dict[str, dict[str, dict[str, Any]]]:
    """Every setting by section: type, default, range or choices, description."""
    schema: dict[str, dict[str, dict[str, Any]]] = {}
    for section, cls in _sections().items():
        hints = get_type_hints(cls)
        schema[section] = {}
        for f in dataclasses.fields(cls):
            kind = hints[f.name]
            entry: dict[str, Any] = {
                "type": {int: "integer", float: "number", str: "string", bool: "boolean"}[kind],
                "default": f.default,
                "description": f.metadata["description"],
            }
            for key in ("minimum", "maximum", "choices"):
                if f.metadata[key] is not None:
                    entry[key] = (
                        list(f.metadata[key]) if key == "choices" else kind(f.metadata[key])
                    )
            schema[section][f.name] = entry
    return schema


def _value(name: str, kind: type, meta: dict[str, Any], value: Any) -> Any:
    """``value`` as a valid setting of type ``kind``, or SettingsError naming it."""
    ok = (
        isinstance(value, bool)
        if kind is bool
        else isinstance(value, kind | int if kind is float else kind)
        and not isinstance(value, bool)
    )
    if not ok or (isinstance(value, float) and not math.isfinite(value)):
        type_name = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
        raise SettingsError({name: [f"Must be {type_name[kind]}."]})
    if meta["choices"] is not None and value not in meta["choices"]:
        raise SettingsError({name: [f"Must be one of: {', '.join(meta['choices'])}."]})
    if meta["minimum"] is not None and value < meta["minimum"]:
        raise SettingsError({name: [f"Must be at least {kind(meta['minimum'])}."]})
    if meta["maximum"] is not None and value > meta["maximum"]:
        raise SettingsError({name: [f"Must be at most {kind(meta['maximum'])}."]})
    return kind(value)


def settings_validate(overrides: Any) -> dict[str, dict[str, Any]]:
    """Stored overrides (``{"search": {"rrf_k": 40}}``), checked name by name and as a
    whole; returns them normalized (ints where a float is due become floats)."""
    if not isinstance(overrides, dict):
        raise SettingsError({"settings": ["Must be an object of sections."]})
    sections = _sections()
    errors: dict[str, list[str]] = {}
    clean: dict[str, dict[str, Any]] = {}
    for section, values in overrides.items():
        if section not in sections:
            errors[section] = [f"Unknown section; known: {', '.join(sections)}."]
            continue
        if not isinstance(values, dict):
            errors[section] = ["Must be an object of settings."]
            continue
        hints = _section_hints(section)
        fields = {f.name: f for f in dataclasses.fields(sections[section])}
        for name, value in values.items():
            dotted = f"{section}.{name}"
            if name not in fields:
                errors[dotted] = [f"Unknown setting; known: {', '.join(fields)}."]
                continue
            try:
                value = _value(dotted, hints[name], dict(fields[name].metadata), value)
            except SettingsError as error:
                errors.update(error.errors)
                continue
            clean.setdefault(section, {})[name] = value
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
    sections = _sections()
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


def settings_as_dict(config: ProjectSettings) -> dict[str, dict[str, Any]]:
    return dataclasses.asdict(config)
