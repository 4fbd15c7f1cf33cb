"""Retrieval-quality evaluation on LoCoMo-format conversations (Maharana et al., 2024).

Each conversation becomes one end user; every turn a message in a room per session,
with the session date in its metadata and as its time. Every question is then searched
through the same service the search API calls, and the evidence turns found in the
top k give recall@k (share of a question's evidence found) and hit@k (any found).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memories.models import EndUser, Project
from memories.services.memories import MemoryInput, memory_create_batch
from memories.services.revisions import Actor
from memories.services.search import SearchFilters, memory_search

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
KS = (5, 10, 20)


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int
    date: datetime
    caption: str = ""

    @property
    def content(self) -> str:
        content = f"{self.speaker}: {self.text}"
        if self.caption:
            content += f" [shares a photo of {self.caption}]"
        return content


@dataclass
class Question:
    text: str
    category: int
    evidence: set[str]


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question] = field(default_factory=list)


def _parse_date(text: str) -> datetime:
    """LoCoMo session dates look like '1:56 pm on 8 May, 2023'."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def _evidence_ids(raw: Iterable[str]) -> set[str]:
    """Evidence ids, tolerating 'D8:6; D9:17' and 'D30:05' as the data set has them."""
    ids = set()
    for item in raw:
        for part in str(item).split(";"):
            part = part.strip()
            if ":" in part:
                session, turn = part.split(":", 1)
                ids.add(
                    f"{session.strip()}:{int(turn) if turn.strip().isdigit() else turn.strip()}"
                )
    return ids


def locomo_load(path: Path) -> list[Conversation]:
    """Conversations with their turns and the questions that have evidence among them."""
    conversations = []
    for sample in json.loads(Path(path).read_text()):
        raw = sample["conversation"]
        turns = []
        sessions = sorted(
            (
                int(key.split("_")[1])
                for key in raw
                if key.startswith("session_") and key.count("_") == 1
            ),
        )
        for number in sessions:
            date = _parse_date(raw[f"session_{number}_date_time"])
            for position, turn in enumerate(raw[f"session_{number}"]):
                turns.append(
                    Turn(
                        dia_id=turn["dia_id"],
                        speaker=turn["speaker"],
                        text=turn["text"],
                        session=number,
                        date=date + timedelta(seconds=position),
                        caption=turn.get("blip_caption", ""),
                    )
                )
        known = {turn.dia_id for turn in turns}
        questions = []
        for qa in sample.get("qa", []):
            evidence = _evidence_ids(qa.get("evidence", [])) & known
            if evidence:
                questions.append(Question(qa["question"], int(qa["category"]), evidence))
        conversations.append(Conversation(sample["sample_id"], turns, questions))
    return conversations


def locomo_ingest(
    *,
    project: Project,
    conversations: list[Conversation],
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write every turn as a message memory (through the normal write service)."""
    actor = Actor.system("evaluate_locomo")
    written = 0
    for conversation in conversations:
        items = [
            MemoryInput(
                content=turn.content,
                user=conversation.sample_id,
                room=f"{conversation.sample_id}-session-{turn.session}",
                role="user",
                metadata={
                    "dia_id": turn.dia_id,
                    "speaker": turn.speaker,
                    "session": turn.session,
                    "session_date": turn.date.date().isoformat(),
                },
                created_at=turn.date,
            )
            for turn in conversation.turns
        ]
        for start in range(0, len(items), 500):
            memory_create_batch(project=project, items=items[start : start + 500], actor=actor)
            written += len(items[start : start + 500])
            if progress:
                progress(len(items[start : start + 500]))
    return written


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def locomo_evaluate(
    *,
    project: Project,
    conversations: list[Conversation],
    mode: str,
    progress: Callable[[int], None] | None = None,
    search_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Recall@k and hit@k per category and overall, and search latency, for one mode."""
    users = dict(EndUser.objects.filter(project=project).values_list("external_id", "pk"))
    per_category: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    latencies = []
    for conversation in conversations:
        filters = SearchFilters(end_user_id=users[conversation.sample_id])
        for question in conversation.questions:
            started = time.perf_counter()
            result = memory_search(
                project=project,
                query=question.text,
                mode=mode,
                filters=filters,
                k=max(KS),
                **(search_options or {}),
            )
            latencies.append((time.perf_counter() - started) * 1000)
            ranked = [hit.memory.metadata.get("dia_id") for hit in result.hits]
            for k in KS:
                found = question.evidence & set(ranked[:k])
                for bucket in (CATEGORIES[question.category], "all", "cat1-4"):
                    if bucket == "cat1-4" and question.category == 5:
                        continue
                    per_category[bucket][f"recall@{k}"].append(len(found) / len(question.evidence))
                    per_category[bucket][f"hit@{k}"].append(1.0 if found else 0.0)
            if progress:
                progress(1)
    report: dict[str, Any] = {"mode": mode, "categories": {}}
    for bucket, metrics in per_category.items():
        report["categories"][bucket] = {
            "questions": len(metrics["recall@5"]),
            **{name: round(100 * statistics.fmean(values), 1) for name, values in metrics.items()},
        }
    report["latency_ms"] = {
        "p50": round(_percentile(latencies, 0.5), 2),
        "p95": round(_percentile(latencies, 0.95), 2),
    }
    return report
