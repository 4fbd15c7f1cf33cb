"""The sections of a memory's life after it is written: the facts mined from users'
messages (``facts``) and the user synopsis made from them (``synopsis``), the
importance score (``importance``) and the pruning that uses it (``pruning``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from memories.config.fields import SettingsError, setting


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
    review: bool = setting(
        False,
        "Extracted facts, relationships and goals wait in the console's review inbox and "
        "reach no context until an operator accepts them.",
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
class LlmSettings:
    """What the optional LLM (LLM_PROVIDER_URL) may spend for the project."""

    monthly_token_budget: int = setting(
        0,
        "Tokens (prompt + completion) the workers may use per calendar month (UTC); once "
        "spent they use the offline methods until the month ends (0: no limit).",
        minimum=0,
        maximum=10_000_000_000,
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
    trash_days: float = setting(
        7.0,
        "Memories an operator forgets in the console wait this many days in the trash "
        "(undo), then are erased (0: at the next purge).",
        minimum=0.0,
        maximum=3650.0,
    )
    revision_retention_days: float = setting(
        0.0,
        "Memory revisions (the history's before/after) older than this many days are "
        "deleted by the purge, those of erased memories (a hash, no words) included; "
        "0 keeps them for ever.",
        minimum=0.0,
        maximum=36500.0,
    )
