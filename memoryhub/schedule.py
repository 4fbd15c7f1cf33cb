"""The Celery queues, the routes of the tasks that do not run on ``default`` and the
beat's schedule (settings.py reads them: CELERY_TASK_QUEUES, CELERY_TASK_ROUTES,
CELERY_BEAT_SCHEDULE). The intervals (and the synopsis refresh's users a run) come from the
environment (.env.example)."""

from __future__ import annotations

from typing import Any

from celery.schedules import crontab
from kombu import Queue

from memoryhub.env import env_float, env_int


def celery_queues_and_schedule() -> tuple[tuple[Queue, ...], dict[str, Any], dict[str, Any]]:
    """CELERY_TASK_QUEUES, CELERY_TASK_ROUTES and CELERY_BEAT_SCHEDULE, read when the
    settings call it (after .env is loaded)."""
    # `default` (embedding, short core tasks) has its own worker pool (hub_services.py)
    queues = (Queue("default"), Queue("derived"), Queue("ingestion"), Queue("maintenance"))
    # a model switch (embedding_switch_*) never stands in front of new writes' embedding
    maintenance = (
        "importance_recompute_task",
        "prune_task",
        "prune_queued_task",
        "bulk_apply_task",
        "embedding_switch_task",
        "embedding_switch_sweep_task",
    )
    routes = {
        **{f"memories.tasks.{name}": {"queue": "maintenance"} for name in maintenance},
        "ingestion.tasks.document_ingest_task": {"queue": "ingestion"},
        "ingestion.tasks.documents_sweep_task": {"queue": "ingestion"},
        "synopsis.tasks.room_summarize_task": {"queue": "derived"},
        "synopsis.tasks.facts_extract_task": {"queue": "derived"},
        "synopsis.tasks.facts_extract_sweep_task": {"queue": "derived"},
        "synopsis.tasks.synopsis_generate_task": {"queue": "derived"},
        "synopsis.tasks.synopsis_refresh_sweep_task": {"queue": "derived"},
    }
    return queues, routes, _beat_schedule()


def _beat_schedule() -> dict[str, Any]:
    """What the beat sends, and how often."""
    return {
        "embedding-backfill": {
            "task": "memories.tasks.embedding_backfill_task",
            "schedule": env_float("EMBEDDING_BACKFILL_INTERVAL", 60.0),
        },
        **_derived_schedule(),
        "working-memory-trim": {  # FIFO cap and expired ids of every room's working memory
            "task": "memories.tasks.working_memory_trim_task",
            "schedule": env_float("WORKING_MEMORY_FIFO_INTERVAL_MIN", 5.0) * 60,
        },
        "accesses-flush": {  # reads counted in Redis -> access_count, accessed_at
            "task": "memories.tasks.accesses_flush_task",
            "schedule": env_float("ACCESS_FLUSH_INTERVAL", 30.0),
        },
        "tallies-fold": {  # the memory counts' appended rows, one a group
            "task": "memories.tasks.tallies_fold_task",
            "schedule": env_float("TALLIES_FOLD_INTERVAL", 60.0),
        },
        "importance-recompute": {  # MUXI importance scores, one maintenance run per project
            "task": "memories.tasks.importance_recompute_task",
            "schedule": env_float("IMPORTANCE_RECOMPUTE_INTERVAL", 3600.0),
        },
        "prune": {  # each project's pruning policies, then the purge; one maintenance run each
            "task": "memories.tasks.prune_task",
            "schedule": env_float("PRUNE_INTERVAL", 86400.0),
        },
        "embedding-switch-sweep": {  # stalled model switches, old vectors past their keep
            "task": "memories.tasks.embedding_switch_sweep_task",
            "schedule": env_float("EMBEDDING_SWITCH_SWEEP_INTERVAL", 300.0),
        },
        "documents-sweep": {  # documents whose pipeline stalled (a lost message, a dead worker)
            "task": "ingestion.tasks.documents_sweep_task",
            "schedule": env_float("INGESTION_SWEEP_INTERVAL", 120.0),
        },
        "maintenance-runs-purge": {
            "task": "memories.tasks.maintenance_runs_purge_task",
            "schedule": crontab(hour=3, minute=41),
        },
        "idempotency-keys-purge": {
            "task": "memories.tasks.idempotency_keys_purge_task",
            "schedule": crontab(minute=17),
        },
    }


def _derived_schedule() -> dict[str, Any]:
    """The derived memories' sweeps: summaries, facts and synopses no write or read
    asked for."""
    return {
        "summaries-sweep": {  # rooms over capacity that no write's signal queued
            "task": "synopsis.tasks.room_summarize_sweep_task",
            "schedule": env_float("SUMMARY_SWEEP_INTERVAL", 60.0),
        },
        "facts-sweep": {  # recent user messages that no write's signal had mined
            "task": "synopsis.tasks.facts_extract_sweep_task",
            "schedule": env_float("FACTS_SWEEP_INTERVAL", 300.0),
        },
        "synopsis-refresh": {  # synopses older than a change of their facts or summaries
            "task": "synopsis.tasks.synopsis_refresh_sweep_task",
            "schedule": env_float("SYNOPSIS_REFRESH_INTERVAL", 600.0),
            "kwargs": {"max_users": env_int("SYNOPSIS_REFRESH_MAX_USERS", 200)},
        },
    }
