"""Memories: concurrent identical writes and retries write once."""

import threading
import uuid

import pytest
from django.db import connection, transaction

from memories.api import memories as views
from memories.models import (
    Memory,
    MemoryRevision,
)
from memories.services.memories import MemoryInput, memory_create_batch
from memories.services.revisions import Actor
from tests.conftest import wait_until
from tests.memories.api.memory_calls import MEMORIES

# --- concurrent writers ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("conflict", ["unique", "id"])
def test_a_concurrent_identical_write_returns_the_stored_memory(owner, conflict):
    """A writer that inserts while another's identical insert is uncommitted waits for it,
    then returns that memory instead of failing or storing a second copy."""
    memory_id = uuid.uuid4()
    body = {"user": "alice", "content": "Likes tea", "unique": True}
    if conflict == "id":
        body = {"id": str(memory_id), "content": "Likes tea"}
    responses = []

    def second_writer():
        try:
            responses.append(owner.client.post(MEMORIES, body))
        finally:
            connection.close()

    with transaction.atomic():
        item = MemoryInput(**{**body, "id": memory_id})
        [(first, created)] = memory_create_batch(
            project=owner.project, items=[item], actor=Actor.system("test")
        )
        assert created
        thread = threading.Thread(target=second_writer)
        thread.start()

        def second_writer_waits():
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                return cursor.fetchone()[0] > 0

        wait_until(second_writer_waits)
    thread.join(timeout=30)
    [response] = responses
    assert response.status_code == 200, response.json()
    assert response.json()["created"] is False
    assert response.json()["memory"]["id"] == str(first.pk)
    assert Memory.objects.count() == 1
    assert MemoryRevision.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_retry_while_the_first_request_still_runs_writes_once(owner, monkeypatch):
    """A client that times out and retries with the same Idempotency-Key while its first
    request is still being processed must not store the memory twice."""
    first_is_writing, finish_first = threading.Event(), threading.Event()
    write = views.memory_create_batch

    def slow_first_write(**kwargs):
        if not first_is_writing.is_set():
            first_is_writing.set()
            finish_first.wait(timeout=30)
        return write(**kwargs)

    monkeypatch.setattr(views, "memory_create_batch", slow_first_write)
    responses = {}

    def post(name):
        try:
            responses[name] = owner.client.post(
                MEMORIES, {"content": "hello"}, HTTP_IDEMPOTENCY_KEY="retry-while-running"
            )
        finally:
            connection.close()

    first = threading.Thread(target=post, args=["first"])
    first.start()
    try:
        assert first_is_writing.wait(timeout=30)
        retry = threading.Thread(target=post, args=["retry"])
        retry.start()

        def retry_waits_or_is_done():
            if not retry.is_alive():
                return True
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                return cursor.fetchone()[0] > 0

        wait_until(retry_waits_or_is_done)
    finally:
        finish_first.set()
        first.join(timeout=30)
    retry.join(timeout=30)
    assert Memory.objects.count() == 1
    assert responses["retry"].json() == responses["first"].json()
    assert responses["retry"].status_code == 201
