"""The workload of bench/compare_mem0.py: LoCoMo turns to store and questions to search,
the same for both systems, a small warm-up apart, and recall@k of what each returned."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.locomo import Conversation, Question, locomo_load, recall_scores

WARMUP_USER = "bench-warmup"
WARMUP_WEATHER = ("sunny", "rainy", "cold", "windy", "warm", "grey", "hot", "mild")
WARMUP_TOPICS = ("books", "hiking", "music", "work", "cooking", "travel", "pets", "art")


def locomo_conversations(path: Path, count: int | None) -> list[Conversation]:
    """The first ``count`` conversations of the file (all with None)."""
    conversations = locomo_load(path)
    return conversations[:count] if count else conversations


def _messages(conversation: Conversation) -> list[dict[str, Any]]:
    return [
        {
            "user_id": conversation.sample_id,
            "content": turn.content,
            "metadata": {
                "dia_id": turn.dia_id,
                "speaker": turn.speaker,
                "session": turn.session,
                "session_date": turn.date.date().isoformat(),
            },
            # MemoryHub only (bench/evaluate.py's dataset_ingest does the same): a room per
            # session and the turn's time
            "room": f"{conversation.sample_id}-session-{turn.session}",
            "created_at": turn.date.isoformat(),
        }
        for turn in conversation.turns
    ]


def _warmup() -> dict[str, Any]:
    """Texts unlike LoCoMo's for a user of its own, so the warm-up leaves nothing the
    measured searches could find or the query cache could serve."""
    start = datetime(2020, 1, 1, tzinfo=UTC)
    pairs = [(w, t) for w in WARMUP_WEATHER for t in WARMUP_TOPICS]
    questions = (("sunny", "books"), ("cold", "music"), ("hot", "travel"), ("grey", "art"))
    return {
        "user_id": WARMUP_USER,
        "messages": [
            {
                "user_id": WARMUP_USER,
                "content": f"Warm-up note {i}: the weather was {w} and we talked about {t}.",
                "metadata": {"dia_id": f"W{i}"},
                "room": f"{WARMUP_USER}-room",
                "created_at": (start + timedelta(seconds=i)).isoformat(),
            }
            for i, (w, t) in enumerate(pairs)
        ],
        "queries": [f"What did they say about {t} when it was {w}?" for w, t in questions]
        + ["warm-up question one", "warm-up question two"],
    }


def workload_build(conversations: list[Conversation]) -> dict[str, Any]:
    """Every turn as a message of its conversation's user, every question with its
    evidence, and the warm-up."""
    messages: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    for conversation in conversations:
        messages += _messages(conversation)
        for question in conversation.questions:
            queries.append(
                {
                    "qid": len(queries),
                    "user_id": conversation.sample_id,
                    "text": question.text,
                    "category": question.category,
                    "evidence": sorted(question.evidence),
                }
            )
    return {"messages": messages, "queries": queries, "warmup": _warmup()}


def repeated_questions(workload: dict[str, Any]) -> int:
    """Questions that repeat an earlier one of the same user."""
    queries = workload["queries"]
    return len(queries) - len({(q["user_id"], q["text"]) for q in queries})


def recall(
    workload: dict[str, Any], ranked: dict[int, list[str | None]], ks: Sequence[int]
) -> dict[str, Any]:
    """bench/locomo.py's recall@k and hit@k for each k of ``ks``, per category, over all
    and 1-4, of the dia_ids each query returned (recall@5 of a list of 20 is that of its
    first 5, as bench/evaluate.py counts it)."""
    return recall_scores(
        (
            (Question(q["text"], q["category"], set(q["evidence"])), ranked[q["qid"]])
            for q in workload["queries"]
        ),
        ks=ks,
    )
