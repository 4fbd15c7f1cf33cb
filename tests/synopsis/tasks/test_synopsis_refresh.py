"""The scheduled synopsis refresh (synopsis/services/synopsis_sweep.py): the beat task
queues the regeneration of synopses older than a change of their facts or summaries,
the longest-stale first and a bounded number of users a run, and leaves locked parts,
fresh synopses and TTL-only projects alone."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from memories.models import MaintenanceRun, Memory, Synopsis
from memories.services.synopsis import synopsis_part_edit
from memoryhub.celery import app as celery_app
from synopsis.services.synopses import SYNOPSIS_GENERATE_TASK, synopsis_generate
from synopsis.tasks import synopsis_generate_task, synopsis_refresh_sweep_task
from tests.synopsis.synopsis_seeds import (
    ADMIN,
    configure,
    fact,
    maria,
    seed_facts,
    summary,
    write,
)

SWEEP_TASK = "synopsis.tasks.synopsis_refresh_sweep_task"

# every write puts the synopsis in the cache after its commit: tests commit for real
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_redis")]


def queued_generations(redis_client):
    """The (user id, parts, kwargs) of the generation tasks waiting on the derived
    queue, oldest first."""
    found = []
    for raw in reversed(redis_client.lrange("derived", 0, -1)):
        message = json.loads(raw)
        if message["headers"]["task"] == SYNOPSIS_GENERATE_TASK:
            args, kwargs, _ = json.loads(base64.b64decode(message["body"]))
            found.append((*args, kwargs))
    return found


def run_queued(redis_client):
    """What a worker does with the derived queue's generation tasks; returns their users."""
    queued = queued_generations(redis_client)
    redis_client.delete("derived")
    for end_user_id, parts, kwargs in queued:
        synopsis_generate_task(end_user_id, parts, **kwargs)
    return [end_user_id for end_user_id, _, _ in queued]


def generated(tenant, user="maria"):
    """Seed Maria's facts and generate her synopsis (and Bob's) as it is now."""
    seed_facts(tenant)
    for end_user in tenant.project.end_users.all():
        synopsis_generate(end_user_id=end_user.pk)
    return maria(tenant)


def test_a_user_whose_fact_changed_after_the_synopsis_is_refreshed(owner, no_llm, redis_client):
    user = generated(owner)
    edited = Memory.objects.get(end_user=user, content="User likes jazz.")
    edited.content = "User likes fado."
    edited.save()  # an edit after the synopsis was generated
    assert synopsis_refresh_sweep_task() == 1
    assert queued_generations(redis_client) == [(user.pk, ["identity"], {"force": True})]
    assert run_queued(redis_client) == [user.pk]
    row = Synopsis.objects.get(end_user=user)
    assert "likes fado" in row.identity_text and "jazz" not in row.identity_text
    run = MaintenanceRun.objects.get(task="synopsis_refresh")
    assert run.status == "ok" and run.counts == {"stale": 1, "queued": 1}
    # refreshed: the next run finds nothing to do
    assert synopsis_refresh_sweep_task() == 0
    assert queued_generations(redis_client) == []


def test_a_new_summary_refreshes_the_context_part(owner, no_llm, redis_client):
    user = generated(owner)
    write(owner, summary("Maria booked a hotel by the river.", at=timezone.now()))
    assert synopsis_refresh_sweep_task() == 1
    assert queued_generations(redis_client) == [(user.pk, ["context"], {"force": True})]
    run_queued(redis_client)
    assert "hotel by the river" in Synopsis.objects.get(end_user=user).context_text


def test_a_synopsis_newer_than_its_facts_is_left_alone(owner, no_llm, redis_client):
    generated(owner)
    assert synopsis_refresh_sweep_task() == 0
    assert queued_generations(redis_client) == []
    assert MaintenanceRun.objects.get(task="synopsis_refresh").counts == {"stale": 0, "queued": 0}


def test_a_user_with_facts_and_no_synopsis_is_refreshed(owner, no_llm, redis_client):
    seed_facts(owner)  # Maria's facts, Bob's fact: no synopsis yet
    assert synopsis_refresh_sweep_task() == 2
    users = run_queued(redis_client)
    assert set(users) == set(owner.project.end_users.values_list("pk", flat=True))
    assert "Maria is 34 years old" in Synopsis.objects.get(end_user=maria(owner)).identity_text


def test_a_locked_part_is_not_refreshed(owner, no_llm, redis_client):
    user = generated(owner)
    synopsis_part_edit(
        end_user=user, part="identity", text="Maria, as the operator says.", actor=ADMIN
    )
    later = timezone.now() + timedelta(seconds=1)
    write(owner, fact("User likes chess.", "preference", at=later))
    assert synopsis_refresh_sweep_task() == 0
    assert Synopsis.objects.get(end_user=user).identity_text == "Maria, as the operator says."


def test_a_project_refreshed_by_ttl_only_is_left_alone(owner, no_llm, redis_client):
    generated(owner)
    configure(owner, refresh_after_facts=0)
    write(owner, fact("User likes chess.", "preference", at=timezone.now()))
    assert synopsis_refresh_sweep_task() == 0


def test_a_run_takes_at_most_max_users_the_longest_stale_first(owner, no_llm, redis_client):
    user = generated(owner)
    bob = owner.project.end_users.get(external_id="bob")
    write(owner, fact("User likes tennis.", "preference", user="bob"))  # Bob's change first
    write(owner, fact("User likes chess.", "preference"))
    assert synopsis_refresh_sweep_task(max_users=1) == 1
    assert run_queued(redis_client) == [bob.pk]
    assert synopsis_refresh_sweep_task(max_users=1) == 1
    assert run_queued(redis_client) == [user.pk]
    assert synopsis_refresh_sweep_task(max_users=1) == 0
    assert "likes tennis" in Synopsis.objects.get(end_user=bob).identity_text


def test_a_user_already_queued_is_not_queued_again(owner, no_llm, redis_client):
    generated(owner)
    write(owner, fact("User likes chess.", "preference"))
    assert synopsis_refresh_sweep_task() == 1
    assert synopsis_refresh_sweep_task() == 0  # its generation has not started yet
    assert len(queued_generations(redis_client)) == 1


def test_the_beat_runs_it_every_ten_minutes_by_default(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["synopsis-refresh"]
    assert (entry["task"], entry["schedule"], entry["kwargs"]) == (
        SWEEP_TASK,
        600.0,
        {"max_users": 200},
    )
    assert settings.CELERY_TASK_ROUTES[SWEEP_TASK] == {"queue": "derived"}
    assert celery_app.tasks[SWEEP_TASK].soft_time_limit == 300.0


def test_beat_stores_the_entry_with_its_bound():
    DatabaseScheduler(app=celery_app)  # what `celery beat` starts with
    stored = PeriodicTask.objects.get(name="synopsis-refresh")
    assert stored.task == SWEEP_TASK
    assert json.loads(stored.kwargs) == {"max_users": 200}
    assert (stored.interval.every, stored.interval.period) == (600, "seconds")
