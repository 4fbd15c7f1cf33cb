"""Writes that race each other (issue 45): a single create, a batch and an import with
the same client ids, at once, answer the idempotent 200/201 or a 409 naming the id,
never a 500, and never store a row twice."""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from django.db import connection, transaction
from rest_framework.test import APIClient

from memories.models import Memory, MemoryRevision
from memories.services.memories import MemoryInput, memory_create_batch
from memories.services.revisions import Actor
from tests.conftest import wait_until
from tests.memories.api.memory_calls import MEMORIES

pytestmark = pytest.mark.django_db(transaction=True)
BATCH = "/api/v1/memories/batch/"
IMPORT = "/api/v1/import/"
ROUNDS, IDS = 20, 9
SINGLE_CLIENTS = 3


def client_of(tenant: Any) -> APIClient:
    """A client of the tenant's key that answers a view's exception as the server
    does (a 500), rather than raising it into the test."""
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant.raw_key}")
    return client


def together(*functions: Callable[[], None]) -> None:
    """Run each function in a thread of its own, all at once, until all are done."""
    threads = [threading.Thread(target=function) for function in functions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)


def text(memory_id: str) -> str:
    return f"the text of {memory_id}"


def import_document(ids: list[str]) -> dict[str, Any]:
    return {
        "format": "memoryhub-export",
        "version": 1,
        "users": [{"external_id": "alice"}],
        "rooms": [],
        "agents": [],
        "memories": [{"id": i, "user": "alice", "content": text(i)} for i in ids],
    }


class Tally:
    """The statuses of the responses concurrent clients got, and the failures'."""

    def __init__(self) -> None:
        self.statuses: Counter[int] = Counter()
        self.failures: list[str] = []
        self.lock = threading.Lock()

    def add(self, responses: list[Any]) -> None:
        with self.lock:
            for response in responses:
                self.statuses[response.status_code] += 1
                if response.status_code not in (200, 201):
                    self.failures.append(f"{response.status_code} {response.content[:300]!r}")


def batch_write(client: APIClient, ids: list[str]) -> list[Any]:
    items = [{"id": i, "content": text(i), "user": "alice"} for i in ids]
    return [client.post(BATCH, {"memories": items}, format="json")]


def import_write(client: APIClient, ids: list[str]) -> list[Any]:
    return [client.post(IMPORT, import_document(ids[::-1]), format="json")]


def singles_write(part: int) -> Callable[[APIClient, list[str]], list[Any]]:
    """One of SINGLE_CLIENTS clients writing its share of the ids one by one, shuffled."""

    def write(client: APIClient, ids: list[str]) -> list[Any]:
        mine = ids[part::SINGLE_CLIENTS]
        random.shuffle(mine)
        return [client.post(MEMORIES, {"id": i, "content": text(i), "user": "alice"}) for i in mine]

    return write


def test_single_batch_and_import_of_the_same_ids_at_once_store_each_once(owner):
    """Rounds of the same ids written at once by a batch, an import and single creates
    (each client in its own order): before, 1 request in 4 to 10 was a 500
    (IntegrityError on memory_public_id or the primary key: the one retry met the next
    writer's row)."""
    owner.project.settings = {"limits": {"writes_per_minute": 0}}
    owner.project.save(update_fields=["settings"])
    rounds = [[str(uuid.uuid4()) for _ in range(IDS)] for _ in range(ROUNDS)]
    start, tally = threading.Barrier(2 + SINGLE_CLIENTS), Tally()

    def writer(write: Callable[[APIClient, list[str]], list[Any]]) -> None:
        client = client_of(owner)
        try:
            for ids in rounds:
                start.wait(timeout=60)
                tally.add(write(client, ids))
        finally:
            connection.close()

    writes = [batch_write, import_write, *(singles_write(p) for p in range(SINGLE_CLIENTS))]
    together(*(partial(writer, write) for write in writes))
    assert tally.failures == [], (
        f"{len(tally.failures)} of {tally.statuses.total()}: {tally.failures[:2]}"
    )
    assert tally.statuses.total() == ROUNDS * (2 + IDS)
    every = [i for ids in rounds for i in ids]
    stored = Memory.objects.filter(project=owner.project)
    assert sorted(str(pk) for pk in stored.values_list("public_id", flat=True)) == sorted(every)
    created = MemoryRevision.objects.filter(project=owner.project, action="create")
    assert Counter(created.values_list("memory_id", flat=True)) == Counter(
        stored.values_list("pk", flat=True)
    )


class Held:
    """A write of ``memory_id`` held uncommitted in a thread until ``commit()``."""

    def __init__(self, tenant: Any, memory_id: uuid.UUID) -> None:
        self.written, self.committed = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self.run, args=[tenant, memory_id])
        self.thread.start()
        assert self.written.wait(timeout=30)

    def run(self, tenant: Any, memory_id: uuid.UUID) -> None:
        try:
            with transaction.atomic():
                memory_create_batch(
                    project=tenant.project,
                    items=[MemoryInput(id=memory_id, content=text(str(memory_id)))],
                    actor=Actor.system("test"),
                )
                self.written.set()
                self.committed.wait(timeout=30)
        finally:
            connection.close()

    def commit(self) -> None:
        self.committed.set()
        self.thread.join(timeout=30)


def waiting_writers() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
        return int(cursor.fetchone()[0])


def test_a_batch_meeting_two_writers_one_after_the_other_returns_their_memories(owner):
    """The batch waits for the writer of its first id, then, tried again, for the writer
    of its second: each time it finds the row the other stored. (It was tried once
    more only: the second meeting was a 500.)"""
    first, second = uuid.uuid4(), uuid.uuid4()
    held = [Held(owner, first), Held(owner, second)]
    responses: list[Any] = []

    def post_batch() -> None:
        try:
            items = [{"id": str(i), "content": text(str(i))} for i in (first, second)]
            responses.append(client_of(owner).post(BATCH, {"memories": items}, format="json"))
        finally:
            connection.close()

    batch = threading.Thread(target=post_batch)
    batch.start()
    for writer in held:
        wait_until(waiting_writers)  # the batch waits for this writer's row
        writer.commit()
    batch.join(timeout=30)
    [response] = responses
    assert response.status_code == 201, response.content
    results = response.json()["results"]
    assert [r["created"] for r in results] == [False, False]
    assert [r["memory"]["id"] for r in results] == [str(first), str(second)]
    assert Memory.objects.count() == 2
    assert MemoryRevision.objects.count() == 2


def written_meanwhile(owner: Any, memory_id: uuid.UUID, path: str, body: Any) -> Any:
    """The response to ``body`` posted at ``path`` while another writer holds its own
    row of ``memory_id`` uncommitted; that writer commits once the post waits for it."""
    held = Held(owner, memory_id)
    responses: list[Any] = []

    def post() -> None:
        try:
            responses.append(client_of(owner).post(path, body, format="json"))
        finally:
            connection.close()

    thread = threading.Thread(target=post)
    thread.start()
    wait_until(waiting_writers)
    held.commit()
    thread.join(timeout=30)
    [response] = responses
    return response


def test_a_concurrent_write_of_the_id_with_another_text_is_a_409_naming_it(owner):
    memory_id = uuid.uuid4()
    body = {"id": str(memory_id), "content": "another text"}
    response = written_meanwhile(owner, memory_id, MEMORIES, body)
    assert response.status_code == 409, response.content
    assert str(memory_id) in response.json()["id"][0]
    assert Memory.objects.count() == 1


def test_identical_requests_with_one_idempotency_key_at_once_write_once(owner):
    """Five clients send the same request with the same key at once: one writes, the
    others wait for it and replay its response."""
    body = {"id": str(uuid.uuid4()), "content": "once"}
    start = threading.Barrier(5)
    responses: list[Any] = []

    def post() -> None:
        try:
            client = client_of(owner)
            start.wait(timeout=30)
            responses.append(client.post(MEMORIES, body, HTTP_IDEMPOTENCY_KEY="same-key"))
        finally:
            connection.close()

    together(*[post] * 5)
    assert [r.status_code for r in responses] == [201] * 5, [r.content for r in responses]
    assert sum(r.get("Idempotent-Replayed") == "true" for r in responses) == 4
    assert len({json.dumps(r.json(), sort_keys=True) for r in responses}) == 1
    assert Memory.objects.count() == 1


def test_a_concurrent_batch_with_the_id_and_another_text_is_a_409_naming_it(owner):
    memory_id, other = uuid.uuid4(), uuid.uuid4()
    items = [
        {"id": str(other), "content": text(str(other)), "user": "alice"},
        {"id": str(memory_id), "content": "another text", "user": "alice"},
    ]
    response = written_meanwhile(owner, memory_id, BATCH, {"memories": items})
    assert response.status_code == 409, response.content
    assert str(memory_id) in response.json()["id"][0]
    assert list(Memory.objects.values_list("pk", "content")) == [
        (memory_id, text(str(memory_id)))
    ]  # the batch wrote nothing, not even its other memory


def test_a_concurrent_import_of_the_id_with_another_text_leaves_the_stored_one(owner):
    """An import skips the ids the project has (importing a file twice writes nothing
    the second time), also when the other writer commits while the import waits."""
    memory_id, other = uuid.uuid4(), uuid.uuid4()
    document = import_document([str(other)])
    document["memories"].append({"id": str(memory_id), "user": "alice", "content": "another"})
    response = written_meanwhile(owner, memory_id, IMPORT, document)
    assert response.status_code in (200, 201), response.content
    assert response.json()["memories"] == {"created": 1, "skipped": 1}
    assert dict(Memory.objects.values_list("pk", "content")) == {
        memory_id: text(str(memory_id)),
        other: text(str(other)),
    }
