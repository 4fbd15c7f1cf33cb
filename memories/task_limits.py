"""Every Celery task's time limits, in one table (TASK_LIMITS), read by the task decorators
through memories/task_guard.py's ``task_options``.

At the soft limit Celery raises SoftTimeLimitExceeded inside the task: the task records
its input as failed, with the reason, and stops (memories/task_guard.py, and each task's
TaskInput says how). At the hard limit the pool kills the process and forks another from
the worker's main process (the model already loaded there): the main process records the
input the same way, and the next task starts. A limit is sized to the work a task does
in one run, with room to spare; the soft limit leaves GRACE seconds to record and stop.

TASK_TIME_LIMITS (environment) overrides some: "facts_extract_task=60/90,prune_task=600/660"
(a task's short or full name, soft/hard seconds).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

# seconds between the soft and the hard limit: the task records its input and stops
GRACE = 30.0
# a fact extraction task mines messages for this long, then queues the rest as a new
# task: a list of 500 messages with an LLM (one call each) would take many minutes
FACTS_SLICE_SECONDS = 60.0
# the longest wait synopsis/llm.py allows between two attempts (RETRY_AFTER_CAP)
_LLM_RETRY_WAIT_CAP = 30.0


@dataclass(frozen=True)
class TaskLimit:
    """A task's soft and hard time limits, in seconds."""

    soft: float
    hard: float


def llm_call_seconds() -> float:
    """The longest one LLM request may take with its retries (synopsis/llm.py): each
    attempt up to LLM_TIMEOUT, the waits between them doubling from LLM_BACKOFF (at most
    30 s each); 0 without an LLM (the offline methods)."""
    llm = settings.LLM
    if not llm.get("BASE_URL"):
        return 0.0
    retries = int(llm["MAX_RETRIES"])
    longest_wait = max(_LLM_RETRY_WAIT_CAP, float(llm["BACKOFF"]) * 2 ** max(0, retries - 1))
    return float(llm["TIMEOUT"]) * (retries + 1) + retries * longest_wait


def _limit(soft: float, grace: float = GRACE) -> TaskLimit:
    return TaskLimit(soft=float(soft), hard=float(soft) + grace)


def _table() -> dict[str, TaskLimit]:
    llm = llm_call_seconds()
    run = float(settings.EMBEDDING["RUN_SECONDS"])
    return {
        # embeds for EMBEDDING_RUN_SECONDS, then queues a follow-up: one claim more (256
        # memories, at most 4 windows each: ~3 s on 2 cores; an API provider's slow
        # answer) must fit in the minute of margin
        "memories.tasks.embedding_run_task": _limit(run + 60),
        "memories.tasks.embedding_backfill_task": _limit(run + 60),  # the same run
        # a model switch's slice (embedding_switch.SLICE_SECONDS) and one batch more
        # (128 memories on the slower model: ~10 s on 2 cores)
        "memories.tasks.embedding_switch_task": _limit(60 + 120),
        # queries of the switches, and the vectors of a dropped space deleted in
        # batches of 5,000 (a million takes minutes)
        "memories.tasks.embedding_switch_sweep_task": _limit(1800, grace=120),
        # one DELETE of what expired since the last run (hourly / daily)
        "memories.tasks.idempotency_keys_purge_task": _limit(300),
        "memories.tasks.maintenance_runs_purge_task": _limit(300),
        # every room's working memory in Redis; a flush of the reads counted since the
        # last one (every 30 s): seconds each, minutes would be a stuck database
        "memories.tasks.working_memory_trim_task": _limit(120),
        "memories.tasks.accesses_flush_task": _limit(120),
        # one statement over the tallies (tens of thousands of rows at 1M memories)
        "memories.tasks.tallies_fold_task": _limit(120),
        # every project's scores or pruning, in chunks: 3.6 s and 1.3 s per 100,000
        # memories measured (BENCHMARKS.md), so 50 minutes is tens of millions; below the
        # hourly schedule, with five minutes to record the run at the limit
        "memories.tasks.importance_recompute_task": _limit(3000, grace=300),
        "memories.tasks.prune_task": _limit(3000, grace=300),
        "memories.tasks.prune_queued_task": _limit(3000, grace=300),
        # a console's bulk action: at most 10,000 memories, 1,000 archived or trashed in
        # 4.4 s measured (~45 s for 10,000); ten times that for a busy machine
        "memories.tasks.bulk_apply_task": _limit(600),
        **_apps_table(llm),
    }


def _apps_table(llm: float) -> dict[str, TaskLimit]:
    """The limits of the synopsis and ingestion apps' tasks."""
    ingestion = settings.INGESTION
    return {
        # one batch of a room (one LLM request with its retries, or the extractive
        # summary: well under a second) and the summary's write
        "synopsis.tasks.room_summarize_task": _limit(120 + llm),
        # a query of the rooms over capacity and one send each
        "synopsis.tasks.room_summarize_sweep_task": _limit(120),
        # messages mined for FACTS_SLICE_SECONDS, then the rest queued; the last one
        # may take one LLM request with its retries (offline: milliseconds), then the
        # drafts are embedded and joined to the facts held (seconds for 500 messages)
        "synopsis.tasks.facts_extract_task": _limit(FACTS_SLICE_SECONDS + llm + 60),
        "synopsis.tasks.facts_extract_sweep_task": _limit(FACTS_SLICE_SECONDS + llm + 60),
        # both parts of a user's synopsis: an LLM request each, or the templates
        "synopsis.tasks.synopsis_generate_task": _limit(max(120.0, 2 * llm + 60)),
        # a query of every user's changed facts and summaries (an index probe per user
        # and part: 0.5 s for 20,000 users of 10 each, measured on 2 cores) and one send
        # per stale user, 200 a run
        "synopsis.tasks.synopsis_refresh_sweep_task": _limit(300),
        # a slice of a document: parsing in a bounded child process (at most
        # INGESTION_PARSE_TIMEOUT_SECONDS), chunking and staging thousands of chunks, or
        # INGESTION_SLICE_SECONDS of embedding and one batch more
        "ingestion.tasks.document_ingest_task": _limit(
            max(600.0, float(ingestion["PARSE_TIMEOUT_SECONDS"]) + 300), grace=60
        ),
        # a query of the stalled documents and one send each
        "ingestion.tasks.documents_sweep_task": _limit(120),
    }


def _overrides(given: str, names: list[str]) -> dict[str, TaskLimit]:
    """TASK_TIME_LIMITS: "name=soft/hard" items, comma-separated (a short name is the
    last part of a task's name); ValueError naming what is wrong."""
    found = {}
    for item in filter(None, (part.strip() for part in given.split(","))):
        name, _, value = item.partition("=")
        full = [n for n in names if name.strip() in (n, n.rsplit(".", 1)[-1])]
        soft, _, hard = value.partition("/")
        if len(full) != 1 or not soft or not hard:
            raise ValueError(f"TASK_TIME_LIMITS: {item!r} is not <task>=<soft>/<hard>")
        found[full[0]] = TaskLimit(soft=float(soft), hard=float(hard))
    return found


def task_limits() -> dict[str, TaskLimit]:
    """Every task's limits by name: the table, with TASK_TIME_LIMITS over it."""
    table = _table()
    return table | _overrides(settings.TASK_TIME_LIMITS, list(table))


TASK_LIMITS = task_limits()
