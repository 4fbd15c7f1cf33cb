"""The embedding tasks: the backfill after a Redis outage, the tasks' names and the
beat schedule, and a real worker embedding what the API writes."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from memories import tasks
from memories.models import Embedding, EmbeddingSpace, Memory
from memories.providers.redis_client import redis_paused
from memories.services import embedding as pipeline
from memoryhub.celery import app as celery_app
from tests.conftest import wait_until


def test_a_write_while_redis_is_down_succeeds_and_the_backfill_embeds_it(
    owner, provider, settings, tmp_path, caplog, django_capture_on_commit_callbacks
):
    redis_url = settings.REDIS_URL
    settings.REDIS_URL = f"unix://{tmp_path}/no-redis-here.sock"
    try:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            response = owner.client.post("/api/v1/memories/", {"content": "written in an outage"})
        assert response.status_code == 201
        assert callbacks, "the write did not try to enqueue its embedding"
        # the write found Redis down (the rate limiter or the embedding task's flag,
        # whichever tried first) and the process leaves it alone for a while
        assert redis_paused()
        logged = caplog.text
        assert "Redis unavailable" in logged or "could not send the embedding task" in logged
    finally:  # Redis is back
        settings.REDIS_URL = redis_url
    memory = Memory.objects.get(pk=response.json()["memory"]["id"])
    assert memory.embedding_status == "pending"

    # the backfill leaves a memory alone while its own task may still be on the way ...
    assert tasks.embedding_backfill_task() == 0
    assert provider.calls == []
    # ... and embeds it once it has waited too long
    waited = settings.EMBEDDING["BACKFILL_AFTER_SECONDS"] + 1
    Memory.objects.filter(pk=memory.pk).update(
        created_at=timezone.now() - timedelta(seconds=waited)
    )
    assert tasks.embedding_backfill_task() == 1
    memory.refresh_from_db()
    assert memory.embedding_status == "done"
    assert provider.texts == ["written in an outage"]


def test_every_task_sent_by_name_is_registered(settings):
    """The beat schedule and embedding_enqueue name tasks; a typo would be dropped by the
    worker as an unregistered task."""
    names = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    names.add(pipeline.EMBEDDING_RUN_TASK)
    celery_app.loader.import_default_modules()  # every app's tasks.py, as a worker does
    assert names <= set(celery_app.tasks)


@pytest.mark.django_db(transaction=True)  # beat runs in autocommit and commits itself
def test_beat_renames_a_stored_entry_of_an_older_release():
    """The database scheduler keeps its entries in PeriodicTask; on start it rewrites
    each one named in the settings, so an entry stored under a task's old name runs the
    renamed task (and no migration is needed for it)."""
    every_minute = IntervalSchedule.objects.create(every=60, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(
        name="embedding-backfill", task="memories.tasks.embedding_backfill", interval=every_minute
    )
    DatabaseScheduler(app=celery_app)  # what `celery beat` starts with
    stored = PeriodicTask.objects.get(name="embedding-backfill")
    assert stored.task == "memories.tasks.embedding_backfill_task"


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_real_worker_embeds_what_the_api_writes(owner, celery_worker_process):
    texts = ["My cat is called Whiskers", "I work as a nurse in Boston", "We went skiing in March"]
    response = owner.client.post(
        "/api/v1/memories/batch/", {"memories": [{"user": "bob", "content": t} for t in texts]}
    )
    assert response.status_code == 201
    ids = [r["memory"]["id"] for r in response.json()["results"]]
    # the write returned without waiting for the model (the worker may already be done)
    assert [r["memory"]["embedding_status"] for r in response.json()["results"]] == ["pending"] * 3

    wait_until(lambda: not Memory.objects.filter(pk__in=ids, embedding_status="pending").exists())
    space = EmbeddingSpace.objects.get(provider="local", model="all-MiniLM-L6-v2")
    assert Embedding.objects.filter(memory_id__in=ids, space=space).count() == 3
    result = owner.client.post(
        "/api/v1/search/",
        {"user": "bob", "query": "what is the name of my pet?", "mode": "vector", "k": 1},
    ).json()
    assert result["results"][0]["memory"]["content"] == "My cat is called Whiskers"
    assert result["results"][0]["similarity"] > 0.4
