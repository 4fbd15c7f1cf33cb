"""Export from the console: a user's or a room's document, downloaded, equal to the
API's and read back by POST /api/v1/import/; viewers may export; other projects 404."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from memories.models import EndUser, Membership, Memory, Room
from tests.console.operators import operator_client


@pytest.fixture
def viewer(owner):
    return operator_client("vic", project=owner.project, role=Membership.Role.VIEWER)


@pytest.fixture
def maria(owner):
    body = {
        "memories": [
            {"user": "maria", "room": "kitchen", "role": "user", "content": "I adopted a cat"},
            {"user": "maria", "kind": "fact", "content": "Maria has a cat named Miso"},
            {"user": "bob", "room": "kitchen", "role": "user", "content": "Bob likes dogs"},
        ]
    }
    assert owner.client.post("/api/v1/memories/batch/", body).status_code == 201
    return EndUser.objects.get(project=owner.project, external_id="maria")


def downloaded(response):
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith('attachment; filename="memoryhub-')
    return json.loads(response.content)


def test_a_user_export_is_the_apis_document_and_imports_back(owner, outsider, viewer, maria):
    page = reverse("console-user", args=[owner.project.pk, maria.pk])
    export = reverse("console-user-export", args=[owner.project.pk, maria.pk])
    assert f'href="{export}"' in viewer.get(page).content.decode()
    document = downloaded(viewer.get(export))
    api = owner.client.get("/api/v1/users/maria/export/").json()
    assert {**document, "exported_at": None} == {**api, "exported_at": None}
    texts = sorted(memory["content"] for memory in document["memories"])
    assert texts == ["I adopted a cat", "Maria has a cat named Miso"]
    imported = outsider.client.post("/api/v1/import/", document, format="json")
    assert imported.status_code == 201, imported.json()
    assert Memory.objects.filter(project=outsider.project).count() == 2


def test_a_room_export_holds_every_users_turns(owner, viewer, maria):
    kitchen = Room.objects.get(project=owner.project, external_id="kitchen")
    export = reverse("console-room-export", args=[owner.project.pk, kitchen.pk])
    document = downloaded(viewer.get(export))
    texts = sorted(memory["content"] for memory in document["memories"])
    assert texts == ["Bob likes dogs", "I adopted a cat"]
    assert "embeddings" not in document["memories"][0]
    with_vectors = downloaded(viewer.get(export, {"vectors": "1"}))
    assert "embeddings" in with_vectors["memories"][0]


def test_another_projects_user_or_room_is_a_404(owner, outsider, maria):
    stranger = operator_client("sam", project=outsider.project)
    kitchen = Room.objects.get(project=owner.project, external_id="kitchen")
    for name, args in (
        ("console-user-export", [maria.pk]),
        ("console-room-export", [kitchen.pk]),
    ):
        assert stranger.get(reverse(name, args=[owner.project.pk, *args])).status_code == 404
        assert stranger.get(reverse(name, args=[outsider.project.pk, *args])).status_code == 404
