"""BEAM-format conversations (Tavakoli et al., "Beyond a Million Tokens", 2025) for
bench/evaluate.py.

The layout is the upstream repository's: ``chats/<size>/<n>/chat.json`` and
``chats/<size>/<n>/probing_questions/probing_questions.json``. chat.json is a list of
batches ``{"batch_number", "time_anchor", "turns": [[turn, ...], ...]}``, a turn
``{"role", "id", "content"}`` and on some user turns ``"time_anchor": "March-15-2024"``;
user contents end with a plan marker (`` ->-> 1,2``), stripped here. The probing
questions map a question type to questions whose ``source_chat_ids`` name the evidence
turns' ids: a list, a dict of lists (their union) or nothing (abstention questions,
some summaries), which leaves the question out of recall.

Each conversation becomes one end user (``beam-<size>-<n>``), each batch a room, each
turn a message memory with its role, its text and its batch's date: the batch's
time_anchor, else the latest turn anchor (a turn's anchor holds for the turns after it
until the next). Turn number i of the conversation is stored at that date plus i
seconds, so the turns keep their order.

The data has no licence: it is read where it lies, fetched by whoever runs the
evaluation (github mohammadtavakoli78/BEAM), used for evaluation only and never copied
into the repository, not even into test fixtures. Standard library only.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.dataset import Dataset, Dialogue, Message, Probe, numbers_compact

# a few indexes carry a stray parenthesis: ' ->-> 1,5)'
MARKER = re.compile(r"\s*->->\s*\d+(?:\s*,\s*\d+)*\)?\s*$")
DATE_FORMATS = ("%B-%d-%Y", "%b-%d-%Y", "%Y-%m-%d", "%B %d, %Y")
# the date of turns before any time anchor
UNDATED = datetime(2024, 1, 1, tzinfo=UTC)
QUESTIONS = Path("probing_questions") / "probing_questions.json"


class BeamError(ValueError):
    """Why a path cannot be read as BEAM conversations, for the user."""


def conversations_parse(text: str) -> set[int]:
    """'11-20' or '11,12,15' (or both: '11-13,15') as the conversation numbers."""
    numbers: set[int] = set()
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise BeamError(f"--conversations: {text!r} is not like 11-20 or 11,12,15")
        first, last = int(match[1]), int(match[2] or match[1])
        if last < first:
            raise BeamError(f"--conversations: {part.strip()!r} runs backwards")
        numbers.update(range(first, last + 1))
    return numbers


def _size_folder(root: Path, size: str | None) -> Path:
    """chats/<size> of a BEAM checkout: the one asked for, else the only one there is."""
    sizes = sorted(folder.name for folder in (root / "chats").iterdir() if folder.is_dir())
    if size is None and len(sizes) == 1:
        size = sizes[0]
    if size is None or size not in sizes:
        asked = "choose one with --size" if size is None else f"no size {size!r}"
        raise BeamError(f"{root}: {asked} (there are {', '.join(sizes) or 'none'})")
    return root / "chats" / size


def _number(folder: Path) -> int:
    if not folder.name.isdigit():
        raise BeamError(f"{folder}: a conversation folder's name is its number")
    return int(folder.name)


def beam_folders(
    path: Path, *, size: str | None = None, only: set[int] | None = None
) -> list[Path]:
    """The conversation folders ``path`` holds (the folder holding chats/, a chats/<size>
    folder or one conversation's), in number order, restricted to ``only``."""
    if (path / "chats").is_dir():
        path = _size_folder(path, size)
    elif size is not None and not (path / "chat.json").is_file() and path.name != size:
        raise BeamError(f"--size {size}: {path} is not that size's folder")
    if (path / "chat.json").is_file():
        folders = [path]
    else:
        folders = sorted((f for f in path.iterdir() if (f / "chat.json").is_file()), key=_number)
    if not folders:
        raise BeamError(f"{path}: no BEAM conversations (chats/<size>/<n>/chat.json)")
    if only is not None:
        missing = only - {_number(folder) for folder in folders}
        if missing:
            raise BeamError(f"{path}: no conversation {numbers_compact(missing)}")
        folders = [folder for folder in folders if _number(folder) in only]
    return folders


def _date(anchor: str) -> datetime:
    for layout in DATE_FORMATS:
        try:
            return datetime.strptime(anchor.strip(), layout).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise BeamError(f"time anchor {anchor!r} is not a date like March-15-2024")


def _dated_turns(chat: list[dict[str, Any]]) -> Iterator[tuple[int, dict[str, Any], datetime]]:
    """(batch number, turn, date) in conversation order: the batch's anchor when it has
    one, else the latest turn anchor so far."""
    date = UNDATED
    for batch in chat:
        if batch.get("time_anchor"):
            date = _date(batch["time_anchor"])
        for group in batch.get("turns", []):
            for turn in group if isinstance(group, list) else [group]:
                if turn.get("time_anchor") and not batch.get("time_anchor"):
                    date = _date(turn["time_anchor"])
                yield batch["batch_number"], turn, date


def chat_messages(chat: list[dict[str, Any]], user: str) -> list[Message]:
    """Every turn of a chat.json as a message of ``user``, a room per batch."""
    messages = []
    for position, (batch, turn, date) in enumerate(_dated_turns(chat)):
        created_at = date + timedelta(seconds=position)
        messages.append(
            Message(
                key=str(turn["id"]),
                room=f"{user}-batch-{batch}",
                role=turn["role"],
                content=MARKER.sub("", turn["content"]),
                created_at=created_at,
                metadata={
                    "batch": batch,
                    "turn_id": turn["id"],
                    "session_date": created_at.date().isoformat(),
                },
            )
        )
    return messages


def _ids(source: Any) -> Iterator[str]:
    """The turn ids in a source_chat_ids value: ids, lists and dicts of them, nested."""
    if isinstance(source, dict):
        source = list(source.values())
    if isinstance(source, list):
        for item in source:
            yield from _ids(item)
    elif isinstance(source, int) or (isinstance(source, str) and source.strip().isdigit()):
        yield str(int(source))


def probes_read(
    questions: dict[str, list[dict[str, Any]]], known: set[str]
) -> tuple[list[Probe], Counter[str]]:
    """The questions with evidence among the ``known`` turn ids, and per question type
    how many have none."""
    probes = []
    skipped: Counter[str] = Counter()
    for question_type, items in questions.items():
        for item in items:
            evidence = set(_ids(item.get("source_chat_ids"))) & known
            if evidence:
                probes.append(Probe(item["question"], evidence, (question_type,)))
            else:
                skipped[question_type] += 1
    return probes, skipped


def conversation_read(folder: Path) -> tuple[Dialogue, Counter[str], list[str]]:
    """One conversation folder: its dialogue, the skipped questions per type and the
    question types in the file's order."""
    user = f"beam-{folder.parent.name}-{folder.name}"
    messages = chat_messages(json.loads((folder / "chat.json").read_text()), user)
    if not (folder / QUESTIONS).is_file():
        raise BeamError(f"{folder}: no {QUESTIONS}")
    questions = json.loads((folder / QUESTIONS).read_text())
    probes, skipped = probes_read(questions, {message.key for message in messages})
    return Dialogue(user, messages, probes), skipped, list(questions)


def beam_dataset(path: Path, *, size: str | None = None, only: set[int] | None = None) -> Dataset:
    """The conversations of ``path`` (see beam_folders) as bench/evaluate.py evaluates them."""
    folders = beam_folders(path, size=size, only=only)
    dialogues = []
    skipped: Counter[str] = Counter()
    order = ["all"]
    for folder in folders:
        dialogue, missing, types = conversation_read(folder)
        dialogues.append(dialogue)
        skipped.update(missing)
        order += [name for name in types if name not in order]
    numbers = numbers_compact(_number(folder) for folder in folders)
    return Dataset(
        name="beam",
        description=f"BEAM {folders[0].parent.name}, conversations {numbers}",
        key_field="turn_id",
        order=order,
        dialogues=dialogues,
        skipped=dict(skipped),
    )
