#!/usr/bin/env python
"""What the memory tallies' triggers (migration 0025) cost a write, and what reading
them costs: writes through the services as the API makes them, timed with the
triggers on and off in interleaved blocks, on one database.

    MEMORYHUB_DATA_DIR=var/bench-tally .venv/bin/python bench/tally_cost.py

Timed: a single memory written (memory_create_batch of one, POST memories/), a batch
of 100, an embedding worker's update of 64 rows' embedding status, and a single
delete (memory_delete). Then the fold and the reads the console makes. Prints one
JSON object; not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.evaluation_command import evaluation_main  # noqa: E402

TRIGGERS = ("memory_tally_add", "memory_tally_remove", "memory_tally_change")


def _triggers(on: bool) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for name in TRIGGERS:
            cursor.execute(
                f"ALTER TABLE memories_memory {'ENABLE' if on else 'DISABLE'} TRIGGER {name}"
            )


def _timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


class Writes:
    """The timed actions on one bench project, as the API and the worker make them.
    Django's models are imported here, once Django is set up (evaluation_main)."""

    def __init__(self) -> None:
        from memories.models import Memory, Project
        from memories.services import memories
        from memories.services.revisions import Actor

        self.memory, self.memories = Memory, memories
        self.project = Project.objects.create(name=f"bench-tally-{uuid.uuid4().hex[:8]}")
        self.actor = Actor.system("bench")
        self.written = 0

    def _items(self, count: int) -> list[Any]:
        first, self.written = self.written, self.written + count
        return [
            self.memories.MemoryInput(
                content=f"Turn {i}: we spoke about topic {i % 97} and place {i}.",
                user=f"user-{i % 20}",
                room=f"room-{i % 200}",
                role="user",
            )
            for i in range(first, self.written)
        ]

    def _create(self, count: int) -> None:
        items = self._items(count)
        self.memories.memory_create_batch(project=self.project, items=items, actor=self.actor)

    def single(self) -> None:
        self._create(1)

    def batch(self) -> None:
        self._create(100)

    def embedded(self) -> None:
        """An embedding worker's batch: 64 pending memories marked done."""
        pending = self.memory.objects.filter(project=self.project, embedding_status="pending")
        ids = list(pending.values_list("pk", flat=True)[:64])
        self.memory.objects.filter(pk__in=ids).update(embedding_status="done")

    def delete(self) -> None:
        memory = self.memory.objects.filter(project=self.project).order_by("?").first()
        assert memory is not None
        self.memories.memory_delete(memory=memory, actor=self.actor)

    def actions(self) -> dict[str, Callable[[], None]]:
        return {
            "single_write": self.single,
            "batch_100": self.batch,
            "embedded_64": self.embedded,
            "single_delete": self.delete,
        }


def interleaved(
    actions: dict[str, Callable[[], None]], args: argparse.Namespace
) -> dict[str, dict[str, list[float]]]:
    """Each action's times with the triggers on and off, in alternating blocks."""
    times: dict[str, dict[str, list[float]]] = {name: {"on": [], "off": []} for name in actions}
    for _ in range(args.warmup):
        for action in actions.values():
            action()
    for block in range(args.blocks):
        for on in (block % 2 == 0, block % 2 == 1):
            _triggers(on)
            for _ in range(args.per_block):
                for name, action in actions.items():
                    times[name]["on" if on else "off"].append(_timed(action))
    _triggers(True)
    return times


def reads_timed(project: Any) -> dict[str, float]:
    """The fold and the console's reads, once, after the tallies are counted afresh."""
    from memories.models import EndUser
    from memories.services import tallies

    tallies.tallies_rebuild(project=project)
    users = list(EndUser.objects.filter(project=project).values_list("pk", flat=True))
    return {
        "fold_ms": round(_timed(tallies.tallies_fold), 1),
        "project_counts_ms": round(_timed(lambda: tallies.project_counts(project=project)), 1),
        "users_figures_ms": round(
            _timed(lambda: tallies.users_figures(project=project, user_ids=users)), 1
        ),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    writes = Writes()
    times = interleaved(writes.actions(), args)
    result: dict[str, Any] = {
        "memories": writes.memory.objects.filter(project=writes.project).count()
    }
    for name, by in times.items():
        on, off = statistics.median(by["on"]), statistics.median(by["off"])
        result[name] = {
            "p50_ms_on": round(on, 2),
            "p50_ms_off": round(off, 2),
            "p50_ms_added": round(on - off, 2),
            "samples_each": len(by["on"]),
        }
    result.update(reads_timed(writes.project))
    writes.project.delete()
    return result


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=10, help="on/off pairs of blocks")
    parser.add_argument("--per-block", type=int, default=20, help="of each action a block")
    parser.add_argument("--warmup", type=int, default=20)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return evaluation_main(argv, parse, lambda args: print(json.dumps(run(args), indent=2)))


if __name__ == "__main__":
    sys.exit(main())
