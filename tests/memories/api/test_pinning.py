"""Pinning: `pinned` on POST and PATCH /api/v1/memories/, in the output with the
importance score, recorded in the revisions; the admin's Pin and Unpin actions."""

from __future__ import annotations

import pytest

from memories.models import Memory, MemoryRevision
from memories.services.importance import importance_recompute

MEMORIES = "/api/v1/memories/"


def create(tenant, **body):
    response = tenant.client.post(
        MEMORIES, {"user": "alice", "content": "Allergic to nuts", **body}
    )
    assert response.status_code == 201, response.json()
    return response.json()["memory"]


def test_a_memory_is_unpinned_unless_written_pinned(owner):
    memory = create(owner)
    assert (memory["pinned"], memory["importance_score"]) == (False, 0.5)
    pinned = create(owner, content="Emergency contact: Ana", pinned=True)
    assert pinned["pinned"] is True
    assert Memory.objects.get(pk=pinned["id"]).pinned is True
    assert MemoryRevision.objects.get(memory_id=pinned["id"]).after["pinned"] is True


def test_pin_by_patch_is_recorded_and_counts_as_importance_one(owner):
    memory = create(owner, importance=0.0)
    response = owner.client.patch(f"{MEMORIES}{memory['id']}/", {"pinned": True})
    assert response.status_code == 200, response.json()
    assert response.json()["pinned"] is True
    revision = MemoryRevision.objects.get(memory_id=memory["id"], action="update")
    assert (revision.before["pinned"], revision.after["pinned"]) == (False, True)
    assert revision.actor == owner.key.prefix

    importance_recompute(project=owner.project)
    body = owner.client.get(f"{MEMORIES}{memory['id']}/").json()
    assert (body["pinned"], body["importance"]) == (True, 0.0)  # its own importance stays
    assert body["importance_score"] == pytest.approx(0.3 + 0.4)  # new, never read, pinned

    response = owner.client.patch(f"{MEMORIES}{memory['id']}/", {"pinned": False})
    assert response.json()["pinned"] is False
    assert MemoryRevision.objects.filter(memory_id=memory["id"], action="update").count() == 2


def test_pinning_again_records_nothing(owner):
    memory = create(owner, pinned=True)
    response = owner.client.patch(f"{MEMORIES}{memory['id']}/", {"pinned": True})
    assert response.status_code == 200
    assert not MemoryRevision.objects.filter(memory_id=memory["id"], action="update").exists()


@pytest.mark.parametrize("method", ["post", "patch"])
def test_pinned_must_be_a_boolean(owner, method):
    if method == "post":
        response = owner.client.post(MEMORIES, {"content": "x", "pinned": "maybe"})
    else:
        memory = create(owner)
        response = owner.client.patch(f"{MEMORIES}{memory['id']}/", {"pinned": "maybe"})
    assert response.status_code == 400
    assert "pinned" in str(response.json())


def test_a_read_only_key_or_another_project_cannot_pin(owner, outsider):
    memory = create(owner)
    assert (
        owner.read_client.patch(f"{MEMORIES}{memory['id']}/", {"pinned": True}).status_code == 403
    )
    response = outsider.client.patch(f"{MEMORIES}{memory['id']}/", {"pinned": True})
    assert response.status_code == 404
    assert Memory.objects.get(pk=memory["id"]).pinned is False


def test_the_admin_pins_and_unpins_through_the_update_service(admin_client, owner):
    first, second = create(owner), create(owner, content="Prefers tea")
    changelist = "/admin/memories/memory/"
    selected = {"_selected_action": [first["id"], second["id"]]}
    response = admin_client.post(changelist, {"action": "pin", **selected})
    assert response.status_code == 302
    assert set(Memory.objects.values_list("pinned", flat=True)) == {True}
    revisions = MemoryRevision.objects.filter(action="update")
    assert {(r.actor_type, r.actor, r.after["pinned"]) for r in revisions} == {
        ("operator", "admin", True)
    }
    admin_client.post(changelist, {"action": "unpin", "_selected_action": [first["id"]]})
    assert Memory.objects.get(pk=first["id"]).pinned is False
    assert Memory.objects.get(pk=second["id"]).pinned is True
    assert MemoryRevision.objects.filter(action="update").count() == 3
