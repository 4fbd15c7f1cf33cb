"""The working-memory beat task: every room's cap applied FIFO, expired ids purged, rooms
that are gone cleared; scheduled every WORKING_MEMORY_FIFO_INTERVAL_MIN minutes."""

from __future__ import annotations

import time

import pytest
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from memories import tasks
from memories.models import Room
from memories.services import working_store
from memoryhub.celery import app as celery_app
from tests.conftest import wait_until

TRIM_TASK = "memories.tasks.working_memory_trim_task"


@pytest.fixture(autouse=True)
def clean_working_memory(redis_client):
    for key in redis_client.scan_iter(match=f"{working_store.KEY_PREFIX}:*"):
        redis_client.delete(key)


def contents(tenant, room="r1"):
    return [
        item["content"]
        for item in tenant.client.get(f"/api/v1/rooms/{room}/working/").json()["results"]
    ]


def fill_then_lower_the_cap(tenant, room="r1"):
    """Four items of about 4.5 KB under the default cap, then a cap that holds two."""
    for i in range(4):
        response = tenant.client.post(f"/api/v1/rooms/{room}/working/", {"content": f"{i}" * 3000})
        assert response.status_code == 201
    response = tenant.client.patch(
        f"/api/v1/rooms/{room}/", {"settings": {"working": {"max_memory_mb": 0.01}}}
    )
    assert response.status_code == 200


def test_the_task_trims_every_room_and_purges_expired_ids(owner, outsider, redis_client):
    fill_then_lower_the_cap(owner)
    fill_then_lower_the_cap(outsider, "elsewhere")
    owner.client.post("/api/v1/rooms/r2/working/", {"content": "brief", "ttl_seconds": 1})
    owner.client.post("/api/v1/rooms/r2/working/", {"content": "stays"})
    time.sleep(1.2)
    r2 = Room.objects.get(project=owner.project, external_id="r2")
    expiry = f"{working_store.room_prefix(owner.project.pk, r2.pk)}:expiry"
    assert redis_client.zcard(expiry) == 2  # nobody read the room since: its id is still there

    assert tasks.working_memory_trim_task() == 2 + 2 + 1
    assert redis_client.zcard(expiry) == 1
    assert [text[0] for text in contents(owner)] == ["2", "3"]  # the oldest went first
    assert [text[0] for text in contents(outsider, "elsewhere")] == ["2", "3"]
    assert contents(owner, "r2") == ["stays"]
    assert tasks.working_memory_trim_task() == 0


def test_the_task_clears_the_working_memory_of_a_deleted_room(owner, redis_client):
    owner.client.post("/api/v1/rooms/r1/working/", {"content": "note"})
    room = Room.objects.get(project=owner.project, external_id="r1")
    assert owner.client.delete("/api/v1/rooms/r1/").status_code == 200
    assert tasks.working_memory_trim_task() == 1
    prefix = working_store.room_prefix(owner.project.pk, room.pk)
    assert list(redis_client.scan_iter(match=f"{prefix}*")) == []


def test_it_is_scheduled_every_five_minutes_by_default(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["working-memory-trim"]
    assert (entry["task"], entry["schedule"]) == (TRIM_TASK, 300.0)
    assert TRIM_TASK in celery_app.tasks


@pytest.mark.django_db(transaction=True)  # beat runs in autocommit and commits itself
def test_beat_stores_the_entry():
    DatabaseScheduler(app=celery_app)  # what `celery beat` starts with
    stored = PeriodicTask.objects.get(name="working-memory-trim")
    assert stored.task == TRIM_TASK
    assert (stored.interval.every, stored.interval.period) == (300, "seconds")


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_real_worker_runs_the_trim(owner, celery_worker_process):
    fill_then_lower_the_cap(owner)
    celery_app.send_task(TRIM_TASK)
    wait_until(lambda: len(contents(owner)) == 2)
    assert [text[0] for text in contents(owner)] == ["2", "3"]
