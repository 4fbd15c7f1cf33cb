"""The memory tallies (memories.models.tallies, memories.services.tallies): after any
mix of writes, the counts read from the tallies equal a count of the rows, before and
after a fold; a fold leaves one row a group and none for a group that emptied; and
writers to one user never wait for one another on a counter."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from memories.models import EndUser, Memory, MemoryTally, Project, Room, content_hash
from memories.services.tallies import (
    project_counts,
    project_days,
    tallies_fold,
    tallies_rebuild,
    users_figures,
)
from tests.conftest import _database_url


def write(project, user, texts, *, room=None, kind="message", created_at=None):
    rows = [
        Memory(
            project=project,
            end_user=user,
            room=room,
            kind=kind,
            content=text,
            content_hash=content_hash(text),
            created_at=created_at or timezone.now(),
        )
        for text in texts
    ]
    return Memory.objects.bulk_create(rows)


def counted_rows(project):
    """The truth: the project's rows counted."""
    by_kind_status, by_embedding = {}, {}
    for kind, status, embedding_status, n in (
        Memory.objects.filter(project=project)
        .values_list("kind", "status", "embedding_status")
        .annotate(n=Count("*"))
        .order_by()
    ):
        by_kind_status[kind, status] = by_kind_status.get((kind, status), 0) + n
        by_embedding[embedding_status] = by_embedding.get(embedding_status, 0) + n
    return by_kind_status, by_embedding


def assert_tallies_true(project):
    counts = project_counts(project=project)
    expected_kinds, expected_embedding = counted_rows(project)
    assert {k: v for k, v in counts.by_kind_status.items() if v} == expected_kinds
    assert {k: v for k, v in counts.by_embedding.items() if v} == expected_embedding


@pytest.fixture
def scene(owner, outsider):
    project = owner.project
    maria = EndUser.objects.create(project=project, external_id="maria")
    tom = EndUser.objects.create(project=project, external_id="tom")
    kitchen = Room.objects.create(project=project, external_id="kitchen")
    garden = Room.objects.create(project=project, external_id="garden")
    other = EndUser.objects.create(project=outsider.project, external_id="maria")
    write(outsider.project, other, [f"elsewhere {n}" for n in range(7)])
    return project, maria, tom, kitchen, garden


def test_every_kind_of_write_is_counted_before_and_after_a_fold(scene):
    project, maria, tom, kitchen, garden = scene
    said = write(project, maria, [f"maria said {n}" for n in range(40)], room=kitchen)
    write(project, tom, [f"tom said {n}" for n in range(15)], room=garden)
    write(project, maria, ["maria likes tea"], kind="fact")
    assert_tallies_true(project)
    # updates: a status, the embedding, a move to another user and room, unchanged fields
    Memory.objects.filter(pk__in=[m.pk for m in said[:10]]).update(status="archived")
    Memory.objects.filter(pk__in=[m.pk for m in said[10:30]]).update(embedding_status="done")
    Memory.objects.filter(pk__in=[m.pk for m in said[30:33]]).update(end_user=tom, room=garden)
    Memory.objects.filter(project=project).update(access_count=3)
    # deletes: a few rows, then all of one user's
    Memory.objects.filter(pk__in=[m.pk for m in said[33:36]]).delete()
    assert_tallies_true(project)
    rows_before = MemoryTally.objects.filter(project_id=project.pk).count()
    tallies_fold()
    assert_tallies_true(project)
    groups = (
        MemoryTally.objects.filter(project_id=project.pk)
        .values("end_user_id", "room_id", "day", "kind", "status", "embedding_status")
        .annotate(rows=Count("*"))
    )
    assert groups and all(group["rows"] == 1 for group in groups)
    assert MemoryTally.objects.filter(project_id=project.pk).count() < rows_before
    # the unchanged fields' update wrote nothing: no group is zero
    assert not MemoryTally.objects.filter(n=0).exists()


def test_a_group_that_empties_is_dropped_by_the_fold(scene):
    project, maria, tom, kitchen, _ = scene
    write(project, tom, ["tom stays"])
    write(project, maria, [f"gone {n}" for n in range(5)], room=kitchen)
    Memory.objects.filter(end_user=maria).delete()
    assert users_figures(project=project, user_ids=[maria.pk])[maria.pk].memories == 0
    tallies_fold()
    assert not MemoryTally.objects.filter(project_id=project.pk, end_user_id=maria.pk).exists()
    assert users_figures(project=project, user_ids=[maria.pk]) == {}
    assert project_counts(project=project).total == 1


def test_a_deleted_project_user_or_room_leaves_no_tally_naming_it(scene, outsider):
    project, maria, tom, kitchen, garden = scene
    write(project, maria, ["in the kitchen", "again"], room=kitchen)
    write(project, tom, ["in the garden"], room=garden)
    kitchen.delete()  # her memories in it go first (Django's cascade), then the room
    assert not MemoryTally.objects.filter(room_id=kitchen.pk).exists()
    tom.delete()
    assert not MemoryTally.objects.filter(end_user_id=tom.pk).exists()
    other = outsider.project.pk
    assert project_counts(project=outsider.project).total == 7
    Project.objects.filter(pk=other).delete()
    assert not MemoryTally.objects.filter(project_id=other).exists()
    assert_tallies_true(project)


def test_a_user_deleted_before_her_memories_leaves_no_tally(scene):
    """Foreign keys are checked at commit: a transaction may delete the user first."""
    project, maria, *_ = scene
    write(project, maria, ["first", "second"])
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memories_enduser WHERE id = %s", [maria.pk])
        cursor.execute("DELETE FROM memories_memory WHERE end_user_id = %s", [maria.pk])
    assert not MemoryTally.objects.filter(end_user_id=maria.pk).exists()
    assert_tallies_true(project)


def test_a_users_figures_count_her_rooms_with_memories_and_her_latest_write(scene):
    project, maria, tom, kitchen, garden = scene
    earlier = timezone.now() - timedelta(days=3)
    write(project, maria, ["in the kitchen"], room=kitchen, created_at=earlier)
    write(project, maria, ["no room"], created_at=earlier + timedelta(hours=1))
    latest = write(project, maria, ["in the garden"], room=garden)[0]
    Memory.objects.filter(room=garden).delete()  # the garden has none of hers left
    figures = users_figures(project=project, user_ids=[maria.pk, tom.pk])
    assert figures[maria.pk].memories == 2
    assert figures[maria.pk].rooms == 1
    # her latest write, though it is gone (until a fold drops its emptied group)
    assert figures[maria.pk].last_activity == latest.created_at
    tallies_fold()
    assert users_figures(project=project, user_ids=[maria.pk])[maria.pk].rooms == 1
    assert tom.pk not in figures


def test_the_days_are_the_utc_days_of_the_memories_still_there(scene):
    project, maria, *_ = scene
    now = timezone.now()
    write(project, maria, ["today 1", "today 2"], created_at=now)
    old = write(project, maria, ["two days ago", "also"], created_at=now - timedelta(days=2))
    old[0].delete()
    days = project_days(project=project, first=(now - timedelta(days=5)).date())
    assert days == {now.date(): 2, (now - timedelta(days=2)).date(): 1}


def test_a_rebuild_counts_afresh(scene):
    project, maria, *_ = scene
    write(project, maria, [f"m {n}" for n in range(6)])
    with connection.cursor() as cursor:  # a tally gone wrong
        cursor.execute(
            "UPDATE memories_memory_tally SET n = n + 100 WHERE project_id = %s", [project.pk]
        )
    assert project_counts(project=project).total == 106
    tallies_rebuild(project=project)
    assert_tallies_true(project)


@pytest.mark.django_db(transaction=True)
def test_truncating_the_memories_empties_the_tallies(owner):
    maria = EndUser.objects.create(project=owner.project, external_id="maria")
    write(owner.project, maria, ["soon gone"])
    assert MemoryTally.objects.exists()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE memories_memory CASCADE")
    assert not MemoryTally.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_writers_to_one_user_do_not_wait_for_each_other(owner):
    """The triggers only append: a second writer's insert into the same groups goes
    through while the first's transaction is still open."""
    project = owner.project
    maria = EndUser.objects.create(project=project, external_id="maria")
    write(project, maria, ["before"])
    url = _database_url()
    insert = (
        "INSERT INTO memories_memory (id, public_id, project_id, end_user_id, kind, role, content,"
        " content_hash, created_at, updated_at, content_json, metadata, is_unique, importance,"
        " confidence, access_count, status, embedding_status, source_ids)"
        " VALUES (gen_random_uuid(), gen_random_uuid(), %s, %s, 'message', 'user', %s, %s, now(),"
        " now(), '{}', '{}', false, 0.5, 1.0, 0, 'active', 'pending', '[]')"
    )
    with psycopg.connect(url) as first:
        first.execute(insert, (project.pk, maria.pk, "first", content_hash("first")))
        with psycopg.connect(url, autocommit=True) as second:
            second.execute("SET lock_timeout = '2s'")
            second.execute(insert, (project.pk, maria.pk, "second", content_hash("second")))
        first.commit()
    assert project_counts(project=project).total == 3
    assert_tallies_true(project)
