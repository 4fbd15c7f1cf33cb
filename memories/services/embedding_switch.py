"""A project's switch to another embedding model, without stopping its agents (the MUXI
design's "re-embed migration").

* ``embedding_switch_start``: the target model's space is made (the job builds its
  index concurrently first), a
  switch row records the job (at most one running per project: a partial unique
  index), and the job is queued on the maintenance queue, beside the derived work and
  never in front of the embedding of new writes.
* ``embedding_switch_run`` (the job, in slices of SLICE_SECONDS, each queueing the
  next): batches of the project's embedded memories that lack a vector in the target
  are embedded into it, each batch in its own transaction, the progress counted on the
  switch row. Searches and contexts keep reading the project's old space meanwhile. A
  memory written during the switch is embedded into both spaces by the embedding
  pipeline (embedding_spaces.memory_spaces). What the job does is found again from
  the vectors at every batch, so a job killed anywhere resumes where it stopped.
* The flip: once no embedded memory of the project lacks a target vector, one
  transaction (the project's row locked) checks that again and points the project at
  the target space. A request reads its project with its API key, so every search from
  the next request on reads the new space. A memory the pipeline embedded into the old
  space alone (claimed before the switch was visible, committed after the flip) is set
  pending again by ``embedding_switch_sweep``, which looks for them after every flip.
* The old space's vectors of the project stay for SWITCH_KEEP_HOURS: a switch back
  within that time embeds only what was written since. Then (or at once for a
  cancelled or failed switch, whose target vectors go) the sweep drops them, batch by
  batch, unless the project serves from that space again or switches to it.
* ``embedding_switch_cancel`` stops a running switch; the project never left its space.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from memories.models import Embedding, EmbeddingSpace, EmbeddingSwitch, Memory, Project
from memories.providers.embeddings import EmbeddingError
from memories.providers.model_files import LOCAL_MODELS, ModelNotInstalled, model_folder
from memories.providers.task_sending import TaskNotSent, task_send
from memories.services.embedding_spaces import (
    ModelChoice,
    choice_of,
    choice_space,
    embedding_space_index_build,
    model_choices,
    project_space_read,
    space_provider,
)
from memories.services.embedding_store import embeddings_replace
from memories.services.revisions import Actor

logger = logging.getLogger(__name__)
SWITCH_TASK = "memories.tasks.embedding_switch_task"
# the job's slice: then it queues the next one (a fair share of the maintenance worker)
SLICE_SECONDS = 60.0
# vectors of a dropped space deleted per statement
DROP_BATCH = 5_000
# a running switch that has not progressed for this long has lost its job (a worker
# killed, a message lost): the sweep queues it again
STALLED_AFTER = timedelta(minutes=5)
# a flip that found memories the job passed (locked) looks again this much later
RECHECK_SECONDS = 5.0
# after a flip, how far back the sweep looks for memories embedded into the old space alone
FLIP_MARGIN = timedelta(minutes=30)


class SwitchRefused(ValueError):
    """A switch cannot start or be cancelled; the message says why (the API's 400)."""


def embedding_switch_start(
    *, project: Project, model: str, actor: Actor, queue: bool = True
) -> EmbeddingSwitch:
    """Start moving ``project`` to the model ``model`` (a key of model_choices()); the
    switch, running, its job queued (not with ``queue`` False: the caller runs it).
    Raises SwitchRefused: an unknown model, one not installed or whose files fail
    verification, the model it serves from already, a switch running."""
    choices = model_choices()
    if model not in choices:
        raise SwitchRefused(f"unknown model {model!r}: one of {', '.join(choices)}")
    choice = choices[model]
    _installed_check(choice)
    source = project_space_read(project.pk)
    if choice_of(source) == model:
        raise SwitchRefused(f"the project already uses {model!r}")
    try:
        target = choice_space(choice)
    except EmbeddingError as error:  # a dimension that differs from the space's
        raise SwitchRefused(str(error)) from error
    try:
        with transaction.atomic():
            switch = EmbeddingSwitch.objects.create(
                project=project,
                source=source,
                target=target,
                total=_missing(project.pk, target).count(),
                requested_by=f"{actor.type}:{actor.name}",
            )
    except IntegrityError as error:  # embedding_switch_one_running
        raise SwitchRefused("a switch of this project is running: cancel it first") from error
    if queue:
        transaction.on_commit(lambda: _job_send(switch.pk))
    logger.info("embedding switch %d of %s: %s -> %s", switch.pk, project, source, target)
    return switch


def _installed_check(choice: ModelChoice) -> None:
    """Refuse a local model whose files are missing or fail verification (assembled and
    verified once: seconds the first time, instant after)."""
    if choice.provider != "local" or choice.model not in LOCAL_MODELS:
        return
    try:
        model_folder(choice.model)
    except ModelNotInstalled as error:
        raise SwitchRefused(str(error)) from error
    except (OSError, ValueError) as error:  # a part or a file fails verification
        raise SwitchRefused(f"the files of {choice.model} are unusable: {error}") from error


def _missing(project_id: int, target: EmbeddingSpace) -> QuerySet[Memory]:
    """The project's embedded memories without a vector in ``target``."""
    return Memory.objects.filter(
        project_id=project_id, embedding_status=Memory.EmbeddingStatus.DONE
    ).exclude(Exists(Embedding.objects.filter(memory=OuterRef("pk"), space=target)))


def _job_send(switch_id: int, countdown: float | None = None) -> None:
    try:
        task_send(SWITCH_TASK, args=[switch_id], countdown=countdown)
    except TaskNotSent as error:  # the sweep queues a switch that does not progress
        logger.warning("embedding switch %d: job not queued (%s)", switch_id, error)


def embedding_switch_run(
    *,
    switch_id: int,
    max_seconds: float | None = SLICE_SECONDS,
    progress: Callable[[int], Any] | None = None,
) -> str:
    """The switch's job for ``max_seconds`` (None: to the end, then the flip); its
    status after. ``progress`` is called with each batch's count (progress bars)."""
    switch = EmbeddingSwitch.objects.select_related("target").get(pk=switch_id)
    if switch.status != EmbeddingSwitch.Status.RUNNING:
        return str(switch.status)
    embedding_space_index_build(space=switch.target)
    provider = space_provider(switch.target)
    size = int(settings.EMBEDDING["SWITCH_BATCH"])
    started, after = time.monotonic(), None
    try:
        while (batch := _batch_embed(switch, provider, size, after)) is not None:
            after, count = batch
            if progress is not None:
                progress(count)
            if max_seconds is not None and time.monotonic() - started > max_seconds:
                _job_send(switch.pk)
                return str(switch.status)
    except EmbeddingError as error:
        if error.retryable:
            raise  # the task retries later
        return _failed(switch, str(error))
    return _flip(switch)


def _batch_embed(
    switch: EmbeddingSwitch, provider: Any, size: int, after: Any
) -> tuple[Any, int] | None:
    """Embed the next ``size`` memories the target lacks, in id order after ``after``
    (a slice walks the memories once; the flip looks again for any it passed): the last
    one's id and how many; None when none is left (or the switch stopped meanwhile)."""
    with transaction.atomic():
        locked = EmbeddingSwitch.objects.select_for_update().filter(pk=switch.pk).first()
        if locked is None or locked.status != EmbeddingSwitch.Status.RUNNING:
            switch.status = locked.status if locked else EmbeddingSwitch.Status.CANCELLED
            return None
        missing = _missing(switch.project_id, switch.target)
        batch = list(
            (missing if after is None else missing.filter(pk__gt=after))
            .order_by("pk")
            .select_for_update(skip_locked=True, of=("self",))
            .only("id", "project", "content", "content_hash")[:size]
        )
        if not batch:
            return None
        windows = [provider.windows(memory.content) for memory in batch]
        embeddings_replace(memories=batch, windows=windows, space=switch.target, provider=provider)
        switch.done = locked.done + len(batch)
        switch.progressed_at = timezone.now()
        EmbeddingSwitch.objects.filter(pk=switch.pk).update(
            done=switch.done, progressed_at=switch.progressed_at
        )
        return batch[-1].pk, len(batch)


def _flip(switch: EmbeddingSwitch) -> str:
    """Point the project at the target space if nothing is missing any more, in one
    transaction with the project's row locked; the switch's status after."""
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=switch.project_id).first()
        locked = EmbeddingSwitch.objects.select_for_update().get(pk=switch.pk)
        if locked.status != EmbeddingSwitch.Status.RUNNING:
            return str(locked.status)
        if _missing(switch.project_id, switch.target).exists():
            # passed while locked (being embedded by the pipeline, into both spaces):
            # look again in a moment
            transaction.on_commit(lambda: _job_send(switch.pk, countdown=RECHECK_SECONDS))
            return str(locked.status)
        now = timezone.now()
        Project.objects.filter(pk=switch.project_id).update(embedding_space=switch.target)
        hours = float(settings.EMBEDDING["SWITCH_KEEP_HOURS"])
        EmbeddingSwitch.objects.filter(pk=switch.pk).update(
            status=EmbeddingSwitch.Status.COMPLETED,
            finished_at=now,
            keep_until=now + timedelta(hours=hours),
        )
    logger.info("embedding switch %d: the project now serves from %s", switch.pk, switch.target)
    return str(EmbeddingSwitch.Status.COMPLETED)


def _failed(switch: EmbeddingSwitch, reason: str) -> str:
    """Stop the switch for good with ``reason``: the project keeps its space; the
    sweep drops what the target received."""
    logger.error("embedding switch %d failed: %s", switch.pk, reason)
    EmbeddingSwitch.objects.filter(pk=switch.pk, status=EmbeddingSwitch.Status.RUNNING).update(
        status=EmbeddingSwitch.Status.FAILED, finished_at=timezone.now(), error=reason[:2000]
    )
    return str(EmbeddingSwitch.Status.FAILED)


def embedding_switch_cancel(*, project: Project, actor: Actor) -> EmbeddingSwitch:
    """Cancel the project's running switch (SwitchRefused if none runs): the project
    keeps serving from its space, and the sweep drops the target's vectors."""
    with transaction.atomic():
        switch = (
            EmbeddingSwitch.objects.select_for_update()
            .filter(project=project, status=EmbeddingSwitch.Status.RUNNING)
            .first()
        )
        if switch is None:
            raise SwitchRefused("no switch of this project is running")
        switch.status = EmbeddingSwitch.Status.CANCELLED
        switch.finished_at = timezone.now()
        switch.error = f"cancelled by {actor.type}:{actor.name}"
        switch.save(update_fields=["status", "finished_at", "error"])
    return switch


def embedding_switch_sweep() -> dict[str, int]:
    """The beat's part: queue again the running switches that stopped progressing,
    set pending again the memories a pipeline run embedded into the old space alone
    just after a flip, and drop the vectors no project needs any more."""
    counts = {"requeued": 0, "repended": 0, "dropped": 0}
    stalled = timezone.now() - STALLED_AFTER
    for switch in EmbeddingSwitch.objects.filter(
        Q(progressed_at__lt=stalled) | Q(progressed_at__isnull=True, started_at__lt=stalled),
        status=EmbeddingSwitch.Status.RUNNING,
    ):
        _job_send(switch.pk)
        counts["requeued"] += 1
    recent = timezone.now() - FLIP_MARGIN
    for switch in EmbeddingSwitch.objects.filter(
        status=EmbeddingSwitch.Status.COMPLETED, finished_at__gte=recent
    ).select_related("target"):
        counts["repended"] += _old_space_only_repend(switch)
    for switch in _droppable():
        counts["dropped"] += _vectors_drop(switch)
    return counts


def _old_space_only_repend(switch: EmbeddingSwitch) -> int:
    """Memories of the project embedded around the flip with no vector in the space it
    serves from now: pending again, so the pipeline embeds them there."""
    if project_space_read(switch.project_id).pk != switch.target_id:
        return 0  # switched again since: that switch's own
    since = (switch.finished_at or timezone.now()) - FLIP_MARGIN
    return (
        _missing(switch.project_id, switch.target)
        .filter(embedded_at__gte=since)
        .update(embedding_status=Memory.EmbeddingStatus.PENDING)
    )


def _droppable() -> list[EmbeddingSwitch]:
    """Switches whose leftover vectors can go: the source's of a completed switch once
    kept long enough, the target's of a cancelled or failed one."""
    now = timezone.now()
    return list(
        EmbeddingSwitch.objects.filter(source_dropped_at__isnull=True).filter(
            Q(status=EmbeddingSwitch.Status.COMPLETED, keep_until__lt=now)
            | Q(status__in=[EmbeddingSwitch.Status.CANCELLED, EmbeddingSwitch.Status.FAILED])
        )
    )


def _vectors_drop(switch: EmbeddingSwitch) -> int:
    """Delete the project's vectors in the space the switch left behind, batch by
    batch, unless the project serves from it or is switching to it again; returns how
    many were deleted. The switch is marked dropped either way."""
    completed = switch.status == EmbeddingSwitch.Status.COMPLETED
    space_id = switch.source_id if completed else switch.target_id
    needed = project_space_read(switch.project_id).pk == space_id or (
        EmbeddingSwitch.objects.filter(
            project_id=switch.project_id, status=EmbeddingSwitch.Status.RUNNING, target_id=space_id
        ).exists()
    )
    deleted = 0
    while not needed:
        ids = list(
            Embedding.objects.filter(
                memory__project_id=switch.project_id, space_id=space_id
            ).values_list("pk", flat=True)[:DROP_BATCH]
        )
        if not ids:
            break
        deleted += Embedding.objects.filter(pk__in=ids).delete()[0]
    EmbeddingSwitch.objects.filter(pk=switch.pk).update(source_dropped_at=timezone.now())
    if deleted:
        logger.info(
            "embedding switch %d: %d vectors of space %d dropped", switch.pk, deleted, space_id
        )
    return deleted


def last_switch(project: Project) -> EmbeddingSwitch | None:
    """The project's newest switch (running or not), with its spaces."""
    return (
        EmbeddingSwitch.objects.filter(project=project)
        .select_related("source", "target")
        .order_by("-started_at", "-pk")
        .first()
    )


def switch_progress(switch: EmbeddingSwitch) -> dict[str, Any]:
    """What the API and the console show of a switch: its state, done/total, the rate
    (memories/s since it started) and the estimated seconds left."""
    elapsed = ((switch.progressed_at or switch.started_at) - switch.started_at).total_seconds()
    rate = switch.done / elapsed if elapsed > 0 and switch.done else None
    left = max(0, switch.total - switch.done)
    running = switch.status == EmbeddingSwitch.Status.RUNNING
    return {
        "id": switch.pk,
        "status": switch.status,
        "from_model": choice_of(switch.source),
        "to_model": choice_of(switch.target),
        "done": switch.done,
        "total": switch.total,
        "rate_per_second": round(rate, 1) if rate else None,
        "eta_seconds": round(left / rate) if running and rate else None,
        "requested_by": switch.requested_by,
        "started_at": switch.started_at,
        "finished_at": switch.finished_at,
        "old_vectors_kept_until": switch.keep_until if switch.source_dropped_at is None else None,
        "error": switch.error,
    }
