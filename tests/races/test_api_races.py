"""The races issue 45 measured through the API, with a real worker taking what the writes
queue: a memory created and deleted at once (the worker's embedding insert racing the
delete: 26 HTML 500s in 160 tries then, the memories left behind), and a user deleted
while the worker embeds its new memories (a 500 in 2 of 5 rounds). Every answer is the
normal one, and nothing of what was deleted is left once the worker is done."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

from memories.models import EndUser, Memory
from tests.races.harness import worker_carries_on
from tests.races.test_delete_races import left_behind

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]
MEMORIES = "/api/v1/memories/"
CREATE_DELETE_TRIES = 60
USER_ROUNDS, USER_MEMORIES = 5, 300


def client_of(tenant: Any) -> APIClient:
    """Answers a view's exception as the server does (a 500), not raised into the test."""
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant.raw_key}")
    return client


def test_memories_created_and_deleted_at_once_while_the_worker_embeds(owner, celery_worker_process):
    client = client_of(owner)
    statuses: list[tuple[int, int]] = []
    ids: list[str] = []
    for n in range(CREATE_DELETE_TRIES):
        created = client.post(MEMORIES, {"content": f"gone at once {n}", "user": "alice"})
        ids.append(created.json()["memory"]["id"])
        deleted = client.delete(f"{MEMORIES}{ids[-1]}/")
        statuses.append((created.status_code, deleted.status_code))
    assert statuses == [(201, 204)] * CREATE_DELETE_TRIES
    worker_carries_on(owner)
    assert not Memory.objects.filter(content__startswith="gone at once").exists()
    assert [left_behind("memory", uuid.UUID(i)) for i in ids] == [{}] * len(ids)


@pytest.mark.parametrize("round_", range(USER_ROUNDS))
def test_a_user_deleted_while_the_worker_embeds_its_new_memories(
    owner, celery_worker_process, round_
):
    client = client_of(owner)
    user = f"leaving-{uuid.uuid4().hex[:8]}"
    for start in range(0, USER_MEMORIES, 100):
        items = [
            {"content": f"{user} said thing {n}", "user": user} for n in range(start, start + 100)
        ]
        response = client.post(f"{MEMORIES}batch/", {"memories": items}, format="json")
        assert response.status_code == 201, response.content
    end_user = EndUser.objects.get(project=owner.project, external_id=user)
    response = client.delete(f"/api/v1/users/{user}/")
    assert response.status_code == 200, response.content
    assert response.json()["deleted"] >= USER_MEMORIES  # and any fact mined meanwhile
    worker_carries_on(owner)
    assert not Memory.objects.filter(content__startswith=f"{user} said").exists()
    assert left_behind("user", end_user.pk) == {}
