"""The database side of the lock order (memories/services/concurrency.py): every foreign
key into the tenant tree cascades in the database as in Django, and a delete that a
writer outside the lock order deadlocks with is tried again and succeeds."""

from __future__ import annotations

import logging
import threading

import pytest
from django.apps import apps
from django.db import OperationalError, connection, models, transaction

from memories.models import EndUser, Memory, content_hash
from memories.services.revisions import Actor
from memories.services.users import end_user_delete
from tests.conftest import wait_until

OWNERS = ("memories_project", "memories_enduser", "memories_room", "memories_memory")
OWNERS += ("ingestion_document",)


@pytest.mark.django_db
def test_every_foreign_key_to_a_tenants_rows_cascades_in_the_database_too():
    """A key Django recreates (an AlterField) loses its ON DELETE CASCADE: this says so."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conrelid::regclass::text, a.attname, confdeltype, condeferred, convalidated "
            "FROM pg_constraint c JOIN pg_attribute a "
            "ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] "
            "WHERE contype = 'f' AND confrelid::regclass::text = ANY(%s)",
            [list(OWNERS)],
        )
        keys = {(table, column): rest for table, column, *rest in cursor.fetchall()}
    django = {
        (model._meta.db_table, field.column): field.remote_field.on_delete
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if field.is_relation and field.related_model._meta.db_table in OWNERS
    }
    assert keys.keys() == django.keys()
    assert all(on_delete is models.CASCADE for on_delete in django.values())
    assert {key: rest for key, rest in keys.items() if rest != ["c", True, True]} == {}


@pytest.mark.django_db(transaction=True)
def test_a_delete_that_deadlocks_with_a_writer_out_of_order_is_tried_again(owner, caplog):
    """A writer that locks a memory, then its user (the other order) deadlocks with the
    user's delete; PostgreSQL ends the delete's transaction (it waited first), which is
    tried again and succeeds."""
    user = EndUser.objects.create(project=owner.project, external_id="u")
    memory = Memory.objects.create(
        project=owner.project, end_user=user, content="a fact", content_hash=content_hash("x")
    )
    locked, go_on = threading.Event(), threading.Event()

    def writer() -> None:
        try:
            with transaction.atomic():
                Memory.objects.select_for_update().get(pk=memory.pk)
                locked.set()
                go_on.wait(timeout=30)
                EndUser.objects.select_for_update().get(pk=user.pk)
        except OperationalError:
            pass  # the delete's next attempt may deadlock with it again: then it loses
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    assert locked.wait(timeout=30)
    result: list[int] = []

    def delete() -> None:
        try:
            result.append(end_user_delete(end_user=user, actor=Actor.system("test")))
        finally:
            connection.close()

    deleter = threading.Thread(target=delete)
    with caplog.at_level(logging.WARNING, logger="memories.services.concurrency"):
        deleter.start()
        wait_until(waiting)  # the delete waits for the writer's memory
        go_on.set()  # the writer now waits for the delete's user: a deadlock
        thread.join(timeout=30)
        deleter.join(timeout=30)
    assert [receipt.counts["memories"] for receipt in result] == [1]
    assert "deadlocked" in caplog.text
    assert not EndUser.objects.filter(pk=user.pk).exists()


def waiting() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
        return bool(cursor.fetchone()[0])
