"""The shape every evaluation data set is read into (bench/locomo.py, bench/beam.py) for
bench/evaluate.py, and recall@k over it. Standard library only: the readers run in
processes without Django (bench/compare_mem0.py)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

KS = (5, 10, 20)


@dataclass(frozen=True)
class Message:
    """One turn as it is written to the hub. ``key`` is the id evidence names; the
    memory keeps it in its metadata under the data set's ``key_field``."""

    key: str
    room: str
    role: str
    content: str
    created_at: datetime
    metadata: dict[str, Any]


@dataclass
class Probe:
    """A question and the keys of its evidence turns; ``groups`` are the report rows it
    counts in besides "all" (a category, a question type)."""

    text: str
    evidence: set[str]
    groups: tuple[str, ...]


@dataclass
class Dialogue:
    """One conversation: one end user (``user`` is its external id), searched alone."""

    user: str
    messages: list[Message]
    probes: list[Probe]


@dataclass
class Dataset:
    """Conversations to write and questions to search, and how to report them:
    ``order`` lists the report rows ("all" first), ``skipped`` counts per group the
    questions left out for want of evidence among the turns."""

    name: str
    description: str
    key_field: str
    order: list[str]
    dialogues: list[Dialogue]
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def turns(self) -> int:
        return sum(len(dialogue.messages) for dialogue in self.dialogues)

    @property
    def questions(self) -> int:
        return sum(len(dialogue.probes) for dialogue in self.dialogues)


def metadata_key(metadata: dict[str, Any], key_field: str) -> str | None:
    """The turn key a stored memory's metadata holds (None for another memory)."""
    value = metadata.get(key_field)
    return None if value is None else str(value)


def recall_table(
    ranked: Iterable[tuple[Probe, Sequence[str | None]]], ks: Sequence[int] = KS
) -> dict[str, dict[str, Any]]:
    """recall@k (share of a question's evidence in the top k) and hit@k (any of it) in
    percent for each k, over all questions and per group, from each question's ranked
    turn keys; each row also counts its questions."""
    buckets: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for probe, keys in ranked:
        for k in ks:
            found = probe.evidence & set(keys[:k])
            for bucket in ("all", *probe.groups):
                buckets[bucket][f"recall@{k}"].append(len(found) / len(probe.evidence))
                buckets[bucket][f"hit@{k}"].append(1.0 if found else 0.0)
    return {
        bucket: {
            "questions": len(metrics[f"recall@{ks[0]}"]),
            **{name: round(100 * statistics.fmean(values), 1) for name, values in metrics.items()},
        }
        for bucket, metrics in buckets.items()
    }


def numbers_compact(numbers: Iterable[int]) -> str:
    """11, 12, 13, 15 as '11-13,15'."""
    runs: list[list[int]] = []
    for number in sorted(set(numbers)):
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ",".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)
