#!/usr/bin/env python
"""What erasure costs a delete: a user of N memories deleted through the service
(end_user_delete, as DELETE /api/v1/users/{user}/ calls it), timed, and a single
memory's delete (memory_delete) beside it.

    MEMORYHUB_DATA_DIR=var/bench-erasure .venv/bin/python bench/erasure_cost.py
    MEMORYHUB_DATA_DIR=var/bench-erasure .venv/bin/python bench/erasure_cost.py --memories 10000

The user is written as an agent writes (memory_create_batch, 1,000 a batch): messages in
ROOMS rooms, a fact for every 10 messages naming its source (as the extractor writes
them), an update of every 10th message (a second revision), and an Idempotency-Key
response for every batch of the last day (as the Python client sends one with every
POST). Another user of the same size stays, so the project's other rows are read as
they would be. No vectors: the cost measured is the rows' and revisions'. Run it from
two checkouts (a worktree of the commit before) with their own data folders to compare.
Prints one JSON object; not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.evaluation_command import django_start, redis_started  # noqa: E402

ROOMS = 10
BATCH = 1000


def _write(project: Any, user: str, count: int) -> list[Any]:
    from memories.models import IdempotencyKey, Memory
    from memories.services.memories import MemoryInput, memory_create_batch, memory_update
    from memories.services.revisions import Actor

    actor, ids = Actor.system("bench"), []
    for start in range(0, count, BATCH):
        items = [
            MemoryInput(
                content=f"Turn {i} of {user}: we spoke about topic {i % 97} and place {i}.",
                user=user,
                room=f"{user}-room-{i % ROOMS}",
                role="user",
            )
            for i in range(start, min(count, start + BATCH))
        ]
        written = [m for m, _ in memory_create_batch(project=project, items=items, actor=actor)]
        ids += [m.pk for m in written]
        IdempotencyKey.objects.create(
            project=project,
            key=f"{user}-{start}",
            request_hash="0" * 64,
            status_code=201,
            response={"results": [{"memory": {"id": str(m.pk)}} for m in written]},
        )
    facts = [
        MemoryInput(
            content=f"User likes topic {i % 97}.",
            kind="fact",
            user=user,
            source_ids=[str(ids[i])],
        )
        for i in range(0, count, 10)
    ]
    for start in range(0, len(facts), BATCH):
        memory_create_batch(project=project, items=facts[start : start + BATCH], actor=actor)
    for memory in Memory.objects.filter(pk__in=ids[::10]):
        memory_update(memory=memory, changes={"content": memory.content + " (edited)"}, actor=actor)
    return ids


def run(args: argparse.Namespace) -> dict[str, Any]:
    from memories.models import EndUser, Memory, MemoryRevision, Project
    from memories.services.memories import memory_delete
    from memories.services.revisions import Actor
    from memories.services.users import end_user_delete

    project = Project.objects.create(name=f"bench-erasure-{uuid.uuid4().hex[:8]}")
    actor = Actor.system("bench")
    started = time.perf_counter()
    ids = _write(project, "gone", args.memories)
    _write(project, "stays", args.memories)
    written_s = time.perf_counter() - started
    singles = []
    for pk in ids[1 : 1 + args.singles * 10 : 10]:  # messages with a fact each
        started = time.perf_counter()
        memory_delete(memory=Memory.objects.get(pk=pk), actor=actor)
        singles.append((time.perf_counter() - started) * 1000)
    gone = EndUser.objects.get(project=project, external_id="gone")
    rows = Memory.objects.filter(end_user=gone).count()
    revisions = MemoryRevision.objects.filter(project=project).count()
    started = time.perf_counter()
    answer = end_user_delete(end_user=gone, actor=actor)
    user_s = time.perf_counter() - started
    result = {
        "memories_per_user": args.memories,
        "user_rows_deleted": rows,
        "project_revisions_before": revisions,
        "write_s": round(written_s, 1),
        "user_delete_s": round(user_s, 2),
        "user_delete_rows_per_s": round(rows / user_s),
        "single_delete_ms_p50": round(statistics.median(singles), 1),
        "single_delete_ms_max": round(max(singles), 1),
        "answer": answer if isinstance(answer, int) else answer.as_dict(),
    }
    project.delete()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000, help="per user (2 users)")
    parser.add_argument("--singles", type=int, default=20, help="single deletes timed")
    args = parser.parse_args(argv)
    django_start()
    with redis_started():
        print(json.dumps(run(args), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
