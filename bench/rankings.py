"""The rankings bench/evaluate.py compares, each a function from a conversation to its
search: the hub's search in one mode, and plain BM25 (bench/baseline.py) over the same
stored texts; and recall@k over a ranking's answers to every question."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench.baseline import PlainBm25
from bench.dataset import KS, Dataset, Dialogue, metadata_key, recall_table

if TYPE_CHECKING:
    from memories.models import Project

BM25_MODE = "bm25 (plain)"

# a conversation's search: question text -> the ranked turn keys
Search = Callable[[str], list[str | None]]
Ranker = Callable[[Dialogue], Search]


class EvaluationError(Exception):
    """A reason the evaluation cannot run, for the user."""


def project_users(project: Project, dataset: Dataset) -> dict[str, int]:
    """The project's end user ids by external id; every conversation must have its own."""
    from memories.models import EndUser

    users = dict(EndUser.objects.for_project(project).values_list("external_id", "pk"))
    missing = [dialogue.user for dialogue in dataset.dialogues if dialogue.user not in users]
    if missing:
        raise EvaluationError(
            f"project {project.name!r} has no user {missing[0]!r}: was it loaded from this data?"
        )
    return users


def hub_ranker(*, project: Project, dataset: Dataset, mode: str) -> Ranker:
    """The hub's search in ``mode``, among the memories of the conversation's user."""
    from memories.services.search import SearchFilters, memory_search

    users = project_users(project, dataset)

    def conversation(dialogue: Dialogue) -> Search:
        filters = SearchFilters(end_user_id=users[dialogue.user])
        # the questions are asked once the conversation is over: "last year" is the year
        # before its last turn's
        asked = max((message.created_at for message in dialogue.messages), default=None)

        def search(text: str) -> list[str | None]:
            result = memory_search(
                project=project, query=text, mode=mode, filters=filters, k=max(KS), now=asked
            )
            return [metadata_key(hit.memory.metadata, dataset.key_field) for hit in result.hits]

        return search

    return conversation


def bm25_ranker(*, project: Project, dataset: Dataset) -> Ranker:
    """Plain BM25 over the texts the hub stores for the conversation's user: the set
    the hub's search ranks (its active memories)."""
    from memories.models import Memory

    users = project_users(project, dataset)

    def conversation(dialogue: Dialogue) -> Search:
        stored = list(
            Memory.objects.for_project(project)
            .active()
            .filter(end_user_id=users[dialogue.user])
            .order_by("created_at", "id")
            .values_list("content", "metadata")
        )
        index = PlainBm25([content for content, _ in stored])
        keys = [metadata_key(metadata, dataset.key_field) for _, metadata in stored]
        return lambda text: [keys[position] for position in index.top(text, max(KS))]

    return conversation


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def ranking_evaluate(
    *,
    dataset: Dataset,
    mode: str,
    ranker: Ranker,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Recall@k and hit@k over all questions and per group, and the latency of a
    question's ranking, for one way of ranking."""
    ranked = []
    latencies = []
    for dialogue in dataset.dialogues:
        search = ranker(dialogue)
        for probe in dialogue.probes:
            started = time.perf_counter()
            ranked.append((probe, search(probe.text)))
            latencies.append((time.perf_counter() - started) * 1000)
            if progress:
                progress(1)
    return {
        "mode": mode,
        "groups": recall_table(ranked),
        "latency_ms": {
            "p50": round(_percentile(latencies, 0.5), 2),
            "p95": round(_percentile(latencies, 0.95), 2),
        },
    }
