"""What the workers do after bench/context_eval.py's writes, done here with their services
until nothing is left, and what they produced; Django set up."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.evaluate import progress_bar

if TYPE_CHECKING:
    from memories.models import Project

MINE_CHUNK = 200  # user messages mined between two embedding runs


def workers_finish(*, project: Project) -> dict[str, Any]:
    """Do what the workers do after the writes, with their services, until nothing is
    left: embed, summarize the rooms over capacity, mine every user message for facts
    (embedding between chunks, as the worker's queues interleave), generate each user's
    synopsis (once the synopsis app does), embed what those wrote; returns what the
    project then holds."""
    from memories.models import Memory, Room
    from memories.services.buffer import rooms_over_capacity
    from memories.services.embedding import embedding_run
    from synopsis.services.facts import messages_facts_extract
    from synopsis.services.summaries import room_summarize

    embedding_run()
    room_ids = list(Room.objects.filter(project=project).values_list("pk", flat=True))
    over = rooms_over_capacity(project_id=project.pk, room_ids=room_ids)
    for room_id in over:
        room_summarize(room_id=room_id)
    embedding_run()
    unmined = list(
        Memory.objects.filter(
            project=project, kind=Memory.Kind.MESSAGE, role=Memory.Role.USER,
            end_user__isnull=False, fact_extraction__isnull=True,
        ).order_by("created_at", "id").values_list("pk", flat=True)
    )  # fmt: skip
    with progress_bar(len(unmined), "facts", "message") as bar:
        for start in range(0, len(unmined), MINE_CHUNK):
            messages_facts_extract(memory_ids=unmined[start : start + MINE_CHUNK])
            embedding_run()
            bar.update(len(unmined[start : start + MINE_CHUNK]))
    synopses = synopses_generate(project=project)
    embedding_run()
    return derived_counts(project=project, rooms_summarized=len(over), synopses=synopses)


def synopses_generate(*, project: Project) -> int | None:
    """Each user's synopsis by the synopsis app's generation service (what its worker
    task calls); None while the app has none."""
    try:
        from synopsis.services.synopses import synopsis_generate  # type: ignore[import-not-found]
    except ImportError:
        return None
    from memories.models import EndUser

    users = list(EndUser.objects.for_project(project).values_list("pk", flat=True))
    for user_id in users:
        synopsis_generate(end_user_id=user_id)
    return len(users)


def derived_counts(
    *, project: Project, rooms_summarized: int, synopses: int | None
) -> dict[str, Any]:
    """What the workers produced: summaries, facts by kind and status, mined messages,
    synopses (None: no synopsis generation in this checkout)."""
    from django.apps import apps
    from django.db.models import Count

    from memories.models import Memory
    from synopsis.models import FactExtraction

    memories = Memory.objects.filter(project=project)
    by_kind = {
        (row["kind"], row["status"]): row["n"]
        for row in memories.values("kind", "status").annotate(n=Count("id"))
    }
    mined = dict(
        FactExtraction.objects.filter(project=project)
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    try:
        synopsis_rows = apps.get_model("memories", "Synopsis").objects.filter(project=project)
        stored: int | None = synopsis_rows.count()
    except LookupError:
        stored = None
    return {
        "rooms_summarized": rooms_summarized,
        "summaries": sum(n for (kind, _), n in by_kind.items() if kind == "summary"),
        "messages_archived": by_kind.get(("message", "archived"), 0),
        "messages_mined": mined,
        "facts": {
            kind: by_kind.get((kind, "active"), 0) for kind in ("fact", "relationship", "goal")
        },
        "facts_superseded": sum(
            n
            for (kind, status), n in by_kind.items()
            if kind in ("fact", "relationship", "goal") and status == "superseded"
        ),  # fmt: skip
        "synopses_generated": synopses,
        "synopses": stored,
    }
