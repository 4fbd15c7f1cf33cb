"""Rooms: create (idempotent on external id), get, list, update, delete."""

import pytest

from memories.models import Agent, Memory, MemoryRevision, Room
from memories.services.working import working_list

ROOMS = "/api/v1/rooms/"


def test_create_then_create_again_returns_the_same_room(owner):
    response = owner.client.post(
        ROOMS, {"external_id": "r1", "name": "Support", "agent": "helper", "world_id": "w1"}
    )
    assert response.status_code == 201, response.json()
    assert response.json()["agent"] == "helper"
    assert response.json()["world_id"] == "w1"
    assert Agent.objects.filter(project=owner.project, external_id="helper").count() == 1

    again = owner.client.post(ROOMS, {"external_id": "r1", "name": "Other"})
    assert again.status_code == 200
    assert again.json()["name"] == "Support"
    assert Room.objects.filter(project=owner.project, external_id="r1").count() == 1


def test_get(owner):
    owner.client.post(ROOMS, {"external_id": "r1", "name": "Support"})
    assert owner.client.get(f"{ROOMS}r1/").json()["name"] == "Support"
    assert owner.client.get(f"{ROOMS}r2/").status_code == 404


def test_a_memory_write_creates_its_room(owner):
    owner.client.post("/api/v1/memories/", {"room": "chat-9", "content": "hi"})
    assert owner.client.get(f"{ROOMS}chat-9/").status_code == 200


def test_list_pages_by_cursor_and_filters(owner):
    for name in ["r3", "r1", "r2"]:
        owner.client.post(ROOMS, {"external_id": name})
    first = owner.client.get(ROOMS, {"limit": 2}).json()
    assert set(first) == {"count", "next_cursor", "results"}  # no offset, next, previous
    assert first["count"] == 3
    assert [r["external_id"] for r in first["results"]] == ["r1", "r2"]
    rest = owner.client.get(ROOMS, {"limit": 2, "cursor": first["next_cursor"]}).json()
    assert rest["count"] == 3
    assert [r["external_id"] for r in rest["results"]] == ["r3"]
    assert rest["next_cursor"] is None
    only = owner.client.get(ROOMS, {"external_id": "r2"}).json()
    assert [r["external_id"] for r in only["results"]] == ["r2"]


def test_patch(owner):
    owner.client.post(ROOMS, {"external_id": "r1", "name": "Support"})
    response = owner.client.patch(f"{ROOMS}r1/", {"world_id": "w2", "metadata": {"a": 1}})
    assert response.status_code == 200
    room = Room.objects.get(project=owner.project, external_id="r1")
    assert (room.name, room.world_id, room.metadata) == ("Support", "w2", {"a": 1})


def test_delete_removes_the_room_and_its_memories_with_a_revision_each(owner):
    batch = [{"room": "r1", "user": "alice", "content": f"in r1 {i}"} for i in range(2)]
    batch += [{"room": "r2", "user": "alice", "content": "in r2"}]
    results = owner.client.post("/api/v1/memories/batch/", {"memories": batch}).json()["results"]
    r1_ids = {r["memory"]["id"] for r in results[:2]}

    response = owner.client.delete(f"{ROOMS}r1/")
    assert response.status_code == 200
    assert response.json()["deleted"] == 2
    assert not Room.objects.filter(project=owner.project, external_id="r1").exists()
    assert list(Memory.objects.values_list("content", flat=True)) == ["in r2"]
    deletions = MemoryRevision.objects.filter(action="delete")
    assert {str(r.memory_id) for r in deletions} == r1_ids
    # erased: the text's SHA-256, not the text
    contents = Memory.objects.filter(pk__in=r1_ids).values_list("content", flat=True)
    assert all(r.before["redacted"] and "content" not in r.before for r in deletions)
    assert not contents  # gone with the room
    # the history of a deleted memory stays readable
    history = owner.client.get(f"/api/v1/memories/{next(iter(r1_ids))}/revisions/").json()
    assert [r["action"] for r in history["results"]] == ["delete", "create"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": "no id"}, "external_id"),
        ({"external_id": "r1", "metadata": [1]}, "metadata"),
        ({"external_id": "r1", "metadata": 3}, "metadata"),
        ({"external_id": "r1", "metadata": {"x": "y" * 20_000}}, "metadata"),
        ({"external_id": "r1", "agent": ""}, "agent"),
    ],
)
def test_bad_input_is_400_naming_the_field(owner, body, field):
    response = owner.client.post(ROOMS, body)
    assert response.status_code == 400
    assert field in response.json()
    assert not Room.objects.exists()
    assert not Agent.objects.exists()


class TestAcrossTenants:
    @pytest.fixture(autouse=True)
    def room(self, owner):
        owner.client.post(ROOMS, {"external_id": "r1", "name": "Support"})
        owner.client.post("/api/v1/memories/", {"room": "r1", "content": "secret"})

    def test_outsider_gets_404(self, owner, outsider):
        assert outsider.client.get(f"{ROOMS}r1/").status_code == 404
        assert outsider.client.patch(f"{ROOMS}r1/", {"name": "Hacked"}).status_code == 404
        assert outsider.client.delete(f"{ROOMS}r1/").status_code == 404
        room = Room.objects.get(project=owner.project, external_id="r1")
        assert room.name == "Support"
        assert Memory.objects.filter(room=room).count() == 1

    def test_outsider_does_not_see_it_in_lists(self, outsider):
        assert outsider.client.get(ROOMS).json()["count"] == 0
        assert outsider.client.get(ROOMS, {"external_id": "r1"}).json()["count"] == 0

    def test_same_external_id_in_another_project_is_another_room(self, owner, outsider):
        assert outsider.client.post(ROOMS, {"external_id": "r1"}).status_code == 201
        assert Room.objects.filter(external_id="r1").count() == 2
        for client, name in [(owner.client, "Support"), (outsider.client, "")]:
            listed = client.get(ROOMS, {"external_id": "r1"}).json()
            assert [room["name"] for room in listed["results"]] == [name]
        assert outsider.client.delete(f"{ROOMS}r1/").json()["deleted"] == 0
        assert owner.client.get(f"{ROOMS}r1/").json()["name"] == "Support"
        assert Memory.objects.filter(project=owner.project).count() == 1


def test_delete_clears_the_rooms_working_memory(owner, django_capture_on_commit_callbacks):
    owner.client.post("/api/v1/rooms/r1/working/", {"content": "scratch"}, format="json")
    room = Room.objects.get(project=owner.project, external_id="r1")
    assert len(working_list(room=room).items) == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert owner.client.delete(f"{ROOMS}r1/").status_code == 200
    assert working_list(room=room).items == []  # the deleted room's keys, not a new room's
