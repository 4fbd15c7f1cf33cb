"""A room's own buffer and working-memory settings: PATCH /api/v1/rooms/{room}/."""

from __future__ import annotations

import pytest

from memories.models import Room, SettingsRevision
from memories.services.configuration import room_settings_get

ROOMS = "/api/v1/rooms/"


@pytest.fixture
def room(owner):
    owner.client.post(ROOMS, {"external_id": "r1", "name": "Support"})
    return Room.objects.get(project=owner.project, external_id="r1")


def test_a_room_overrides_the_project_which_overrides_the_defaults(owner, room):
    owner.client.patch("/api/v1/settings/", {"buffer": {"max_size": 4, "buffer_multiplier": 3}})
    response = owner.client.patch(f"{ROOMS}r1/", {"settings": {"buffer": {"max_size": 6}}})
    assert response.status_code == 200, response.json()
    assert response.json()["settings"] == {"buffer": {"max_size": 6}}
    room.refresh_from_db()
    effective = room_settings_get(room=room).buffer
    assert (effective.max_size, effective.buffer_multiplier, effective.capacity) == (6, 3, 18)
    buffer = owner.client.get(f"{ROOMS}r1/buffer/").json()["settings"]
    assert (buffer["max_size"], buffer["capacity"]) == (6, 18)
    other = Room.objects.create(project=owner.project, external_id="r2")
    other.refresh_from_db()
    assert room_settings_get(room=other).buffer.max_size == 4  # the project's value


def test_a_change_is_recorded_with_the_room_and_null_resets(owner, room):
    owner.client.patch(f"{ROOMS}r1/", {"settings": {"working": {"ttl_seconds": 60}}})
    owner.client.patch(f"{ROOMS}r1/", {"settings": {"working": {"ttl_seconds": None}}})
    room.refresh_from_db()
    assert room.settings == {}
    assert room_settings_get(room=room).working.ttl_seconds == 3600
    revisions = SettingsRevision.objects.filter(room=room).order_by("created_at", "pk")
    assert [(r.before, r.after) for r in revisions] == [
        ({}, {"working": {"ttl_seconds": 60}}),
        ({"working": {"ttl_seconds": 60}}, {}),
    ]
    assert revisions[0].actor == owner.key.prefix
    # the project's own settings history does not show rooms' changes
    assert owner.client.get("/api/v1/settings/revisions/").json()["results"] == []


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"buffer": {"max_size": 0}}, "buffer.max_size"),
        ({"buffer": {"recency_bias": 1.5}}, "buffer.recency_bias"),
        ({"buffer": {"max_size": "ten"}}, "buffer.max_size"),
        ({"buffer": {"no_such": 1}}, "buffer.no_such"),
        ({"working": {"max_memory_mb": -1}}, "working.max_memory_mb"),
        ({"search": {"rrf_k": 10}}, "search"),
        ({"nonsense": {}}, "nonsense"),
        ("not an object", "settings"),
    ],
)
def test_bad_settings_are_400_naming_the_setting_and_write_nothing(owner, room, settings, field):
    response = owner.client.patch(
        f"{ROOMS}r1/", {"name": "Renamed", "settings": settings}, format="json"
    )
    assert response.status_code == 400
    assert field in response.json()["settings"], response.json()
    room.refresh_from_db()
    assert (room.name, room.settings) == ("Support", {})
    assert not SettingsRevision.objects.filter(room=room).exists()


def test_another_projects_room_is_404_and_untouched(owner, outsider, room):
    response = outsider.client.patch(f"{ROOMS}r1/", {"settings": {"buffer": {"max_size": 2}}})
    assert response.status_code == 404
    room.refresh_from_db()
    assert room.settings == {}


def test_a_read_only_key_cannot_change_settings(owner, room):
    response = owner.read_client.patch(f"{ROOMS}r1/", {"settings": {"buffer": {"max_size": 2}}})
    assert response.status_code == 403
