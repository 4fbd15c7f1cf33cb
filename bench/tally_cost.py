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


def run(args: argparse.Namespace) -> dict[str, Any]:
    from memories.models import EndUser, Memory, Project
    from memories.services.memories import MemoryInput, memory_create_batch, memory_delete
    from memories.services.revisions import Actor
    from memories.services.tallies import (
        project_counts,
        tallies_fold,
        tallies_rebuild,
        users_figures,
    )

    project = Project.objects.create(name=f"bench-tally-{uuid.uuid4().hex[:8]}")
    actor = Actor.system("bench")
    n = 0

    def items(count: int) -> list[MemoryInput]:
        nonlocal n
        n += count
        return [
            MemoryInput(
                content=f"Turn {i}: we spoke about topic {i % 97} and place {i}.",
                user=f"user-{i % 20}",
                room=f"room-{i % 200}",
                role="user",
            )
            for i in range(n - count, n)
        ]

    def single() -> None:
        memory_create_batch(project=project, items=items(1), actor=actor)

    def batch() -> None:
        memory_create_batch(project=project, items=items(100), actor=actor)

    def embedded() -> None:
        ids = list(
            Memory.objects.filter(project=project, embedding_status="pending").values_list(
                "pk", flat=True
            )[:64]
        )
        Memory.objects.filter(pk__in=ids).update(embedding_status="done")

    def delete() -> None:
        memory = Memory.objects.filter(project=project).order_by("?").first()
        assert memory is not None
        memory_delete(memory=memory, actor=actor)

    actions = {"single_write": single, "batch_100": batch, "embedded_64": embedded}
    actions["single_delete"] = delete
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
    tallies_rebuild(project=project)
    users = list(EndUser.objects.filter(project=project).values_list("pk", flat=True))
    result: dict[str, Any] = {"memories": Memory.objects.filter(project=project).count()}
    for name, by in times.items():
        on, off = statistics.median(by["on"]), statistics.median(by["off"])
        result[name] = {
            "p50_ms_on": round(on, 2),
            "p50_ms_off": round(off, 2),
            "p50_ms_added": round(on - off, 2),
            "samples_each": len(by["on"]),
        }
    result["fold_ms"] = round(_timed(tallies_fold), 1)
    result["project_counts_ms"] = round(_timed(lambda: project_counts(project=project)), 1)
    result["users_figures_ms"] = round(
        _timed(lambda: users_figures(project=project, user_ids=users)), 1
    )
    project.delete()
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
