"""LoCoMo-format conversations (Maharana et al., 2024) for bench/evaluate.py and
bench/compare_mem0.py.

Each conversation becomes one end user; every turn a message ("Speaker: text", a shared
photo's caption appended) in a room per session, with the session date in its metadata
and as its time, a second apart per turn so their order survives sorting by time. A
question counts when its evidence names turns of the conversation; "cat1-4" leaves out
the adversarial category.

The LoCoMo file (CC BY-NC 4.0) is read where it lies, never copied into the repository.
Standard library only: bench/compare_mem0.py reads the file without Django.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.dataset import KS, Dataset, Dialogue, Message, Probe, recall_table

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ORDER = ["all", "cat1-4", *CATEGORIES.values()]
# 'D8:6', 'D30:05' (a leading zero), 'D:11:26' (a stray colon); an evidence item may
# hold several: 'D8:6; D9:17', 'D9:1 D4:4'
EVIDENCE_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


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

    @property
    def groups(self) -> tuple[str, ...]:
        """The report rows it counts in besides "all"."""
        category = CATEGORIES[self.category]
        return (category,) if self.category == 5 else (category, "cat1-4")


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question] = field(default_factory=list)
    # questions without evidence among the turns, per category name
    skipped: Counter[str] = field(default_factory=Counter)


def _parse_date(text: str) -> datetime:
    """LoCoMo session dates look like '1:56 pm on 8 May, 2023'."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def evidence_ids(raw: Iterable[str]) -> set[str]:
    """The dia_ids an evidence list names, in every form the data set writes them."""
    return {
        f"D{int(session)}:{int(turn)}"
        for item in raw
        for session, turn in EVIDENCE_ID.findall(str(item))
    }


def _turns(raw: dict[str, Any]) -> list[Turn]:
    """Every session's turns in session order; a session's turns a second apart from its
    date, so their order survives sorting by time."""
    sessions = sorted(
        int(key.split("_")[1]) for key in raw if key.startswith("session_") and key.count("_") == 1
    )
    turns = []
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
    return turns


def locomo_load(path: Path) -> list[Conversation]:
    """Conversations with their turns and the questions that have evidence among them."""
    conversations = []
    for sample in json.loads(Path(path).read_text()):
        conversation = Conversation(sample["sample_id"], _turns(sample["conversation"]))
        known = {turn.dia_id for turn in conversation.turns}
        for qa in sample.get("qa", []):
            question = Question(qa["question"], int(qa["category"]), set())
            question.evidence = evidence_ids(qa.get("evidence", [])) & known
            if question.evidence:
                conversation.questions.append(question)
            else:
                conversation.skipped[CATEGORIES[question.category]] += 1
        conversations.append(conversation)
    return conversations


def recall_scores(
    ranked: Iterable[tuple[Question, Sequence[str | None]]], ks: Sequence[int] = KS
) -> dict[str, dict[str, Any]]:
    """recall@k and hit@k in percent for each k, per category, over all questions and
    over categories 1-4, from each question's ranked dia_ids."""
    return recall_table(
        ((Probe(q.text, q.evidence, q.groups), dia_ids) for q, dia_ids in ranked), ks
    )


def _dialogue(conversation: Conversation) -> Dialogue:
    messages = [
        Message(
            key=turn.dia_id,
            room=f"{conversation.sample_id}-session-{turn.session}",
            role="user",
            content=turn.content,
            created_at=turn.date,
            metadata={
                "dia_id": turn.dia_id,
                "speaker": turn.speaker,
                "session": turn.session,
                "session_date": turn.date.date().isoformat(),
            },
        )
        for turn in conversation.turns
    ]
    probes = [Probe(q.text, q.evidence, q.groups) for q in conversation.questions]
    return Dialogue(conversation.sample_id, messages, probes)


def locomo_dataset(path: Path) -> Dataset:
    """The file as bench/evaluate.py evaluates it."""
    conversations = locomo_load(path)
    skipped: Counter[str] = Counter()
    for conversation in conversations:
        skipped.update(conversation.skipped)
    return Dataset(
        name="locomo",
        description=f"LoCoMo {Path(path).name}, {len(conversations)} conversations",
        key_field="dia_id",
        order=ORDER,
        dialogues=[_dialogue(conversation) for conversation in conversations],
        skipped=dict(skipped),
    )
