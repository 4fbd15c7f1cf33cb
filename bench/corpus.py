"""Benchmark texts from LoCoMo: conversation turns to write, questions to search with.

The LoCoMo file (CC BY-NC 4.0) is read from ../shared/data, never copied into the
repository. Its ~2,800 turns are cycled through to make as many messages as a run
needs; each cycle renumbers the sessions, so every message's text (and content hash)
differs and the worker's embedding cache cannot make ingestion look faster than it is.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

USERS = 100  # end users the messages are spread over
TURNS_PER_ROOM = 25  # consecutive turns of one user form one room (a session)


@dataclass(frozen=True)
class Turn:
    conversation: str
    session: int
    dia_id: str
    speaker: str
    role: str
    text: str


@dataclass
class Corpus:
    turns: list[Turn]
    questions: list[str]
    sessions_per_conversation: int

    def message(self, index: int) -> dict[str, Any]:
        """The ``index``-th message of the endless stream, as the write API takes it."""
        turn = self.turns[index % len(self.turns)]
        cycle = index // len(self.turns)
        session = turn.session + cycle * self.sessions_per_conversation
        run = index // TURNS_PER_ROOM
        return {
            "user": f"user-{run % USERS:03d}",
            "room": f"room-{run:05d}",
            "role": turn.role,
            "content": f"{turn.speaker} (session {session}): {turn.text}",
            "metadata": {
                "source": "locomo",
                "conversation": turn.conversation,
                "dia_id": turn.dia_id,
            },
        }

    def messages(self, start: int, count: int) -> list[dict[str, Any]]:
        return [self.message(index) for index in range(start, start + count)]


def corpus_load(path: Path) -> Corpus:
    """Every dialogue turn (in conversation and session order) and every QA question."""
    data = json.loads(path.read_text())
    turns: list[Turn] = []
    questions: list[str] = []
    most_sessions = 1
    for sample in data:
        conversation = sample["conversation"]
        name = str(sample.get("sample_id", len(questions)))
        sessions = sorted(
            (int(match.group(1)), value)
            for key, value in conversation.items()
            if (match := re.fullmatch(r"session_(\d+)", key)) and isinstance(value, list)
        )
        most_sessions = max(most_sessions, max((number for number, _ in sessions), default=1))
        for number, session in sessions:
            for turn in session:
                text = " ".join(str(turn.get("text", "")).split())
                if not text:
                    continue
                speaker = turn["speaker"]
                role = "user" if speaker == conversation.get("speaker_a") else "assistant"
                turns.append(Turn(name, number, turn.get("dia_id", ""), speaker, role, text))
        questions += [
            str(qa["question"]).strip() for qa in sample.get("qa", []) if qa.get("question")
        ]
    if not turns or not questions:
        raise ValueError(f"{path} holds no LoCoMo turns or questions")
    return Corpus(turns, sorted(set(questions)), most_sessions)


def distinct_texts(corpus: Corpus, count: int) -> int:
    """How many distinct content hashes the first ``count`` messages have (as the hub hashes)."""
    return len(
        {
            hashlib.sha256(" ".join(corpus.message(i)["content"].split()).encode()).digest()
            for i in range(count)
        }
    )


def query_stream(corpus: Corpus, seed: int = 7) -> Iterator[str]:
    """LoCoMo questions in a shuffled order, endlessly.

    The web process caches query vectors (an LRU of 1,024 texts). Each later pass
    over the ~1,000 questions changes their case, which gives the same vector (the
    model lowercases its input) but a new cache key, so every search pays for its
    query embedding as a new question would.
    """
    questions = list(corpus.questions)
    random.Random(seed).shuffle(questions)
    variants = (str, str.lower, str.upper, str.swapcase, str.title, str.capitalize)
    round_ = 0
    while True:
        variant = variants[round_ % len(variants)]
        for question in questions:
            yield variant(question)
        round_ += 1
