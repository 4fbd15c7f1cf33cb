"""API keys (created with the raw key shown once, never the hash; revoked), operators'
memberships, and users and rooms deleted through their services."""

from __future__ import annotations

import hashlib
import re

from django.contrib.auth import get_user_model

from memories.models import ApiKey, EndUser, Membership, Memory, MemoryRevision, Room
from memories.services.memories import MemoryInput
from memories.services.projects import api_key_authenticate
from tests.memories.admin.conftest import write

KEYS = "/admin/memories/apikey/"


def test_a_key_made_in_the_admin_is_shown_once_and_its_hash_never(admin_client, owner):
    form = admin_client.get(f"{KEYS}add/")
    assert b"key_hash" not in form.content
    response = admin_client.post(
        f"{KEYS}add/", {"project": owner.project.pk, "name": "ci", "read_only": "on"}, follow=True
    )
    assert response.status_code == 200
    [raw_key] = re.findall(r"mh_[0-9a-f]{8}_[\w-]+", response.content.decode())
    key = api_key_authenticate(raw_key=raw_key)
    assert key is not None and (key.name, key.scopes, key.project) == ("ci", ["read"],
                                                                       owner.project)  # fmt: skip
    again = [admin_client.get(KEYS), admin_client.get(f"{KEYS}{key.pk}/change/")]
    for page in again:
        assert raw_key.encode() not in page.content  # shown once
        assert key.key_hash.encode() not in page.content
    assert key.prefix.encode() in again[0].content


def test_a_key_name_can_change_but_nothing_else(admin_client, owner):
    key = owner.key
    response = admin_client.post(
        f"{KEYS}{key.pk}/change/", {"name": "renamed", "key_hash": "0" * 64, "prefix": "x"}
    )
    assert response.status_code == 302
    changed = ApiKey.objects.get(pk=key.pk)
    assert (changed.name, changed.prefix, changed.key_hash) == ("renamed", key.prefix,
                                                                key.key_hash)  # fmt: skip


def test_revoked_keys_authenticate_nothing(admin_client, owner):
    assert owner.client.get("/api/v1/memories/").status_code == 200
    response = admin_client.post(
        KEYS, {"action": "revoke", "_selected_action": [owner.key.pk]}, follow=True
    )
    assert b"Revoked 1 key(s)." in response.content
    assert owner.client.get("/api/v1/memories/").status_code in (401, 403)
    assert owner.read_client.get("/api/v1/memories/").status_code == 200
    active = admin_client.get(KEYS, {"status": "active"}).content.decode()
    assert owner.read_key.prefix in active and owner.key.prefix not in active


def test_memberships_are_listed_filtered_and_added_with_autocomplete(admin_client, owner, world):
    viewer = get_user_model().objects.create_user("vera", "vera@example.com", "pw")
    found = admin_client.get(
        "/admin/autocomplete/",
        {"term": "ver", "app_label": "memories", "model_name": "membership",
         "field_name": "user"},
    ).json()  # fmt: skip
    assert [r["text"] for r in found["results"]] == ["vera"]
    response = admin_client.post(
        "/admin/memories/membership/add/",
        {"user": viewer.pk, "project": owner.project.pk, "role": "viewer"},
    )
    assert response.status_code == 302
    assert Membership.objects.get(user=viewer).role == "viewer"
    page = admin_client.get("/admin/memories/membership/", {"role__exact": "viewer"})
    assert b"vera" in page.content and b"olga" not in page.content
    duplicate = admin_client.post(
        "/admin/memories/membership/add/",
        {"user": viewer.pk, "project": owner.project.pk, "role": "editor"},
    )
    assert duplicate.status_code == 200 and b"errorlist" in duplicate.content


def test_deleting_a_user_deletes_and_records_each_memory(admin_client, owner, world):
    maria = EndUser.objects.get(project=owner.project, external_id="maria")
    page = f"/admin/memories/enduser/{maria.pk}/delete/"
    confirm = admin_client.get(page)
    assert b"2 memories (each recorded as deleted)" in confirm.content
    assert admin_client.post(page, {"post": "yes"}).status_code == 302
    assert not EndUser.objects.filter(pk=maria.pk).exists()
    assert not Memory.objects.filter(content__contains="Maria").exists()
    deleted = MemoryRevision.objects.filter(action="delete", actor_type="operator", actor="admin")
    said = ["Maria is allergic to peanuts", "Maria lives in Lisbon"]
    assert sorted(r.before["content_sha256"] for r in deleted) == sorted(
        hashlib.sha256(text.encode()).hexdigest() for text in said
    )


def test_deleting_rooms_by_action_records_their_memories(admin_client, owner):
    write(owner.project, *[MemoryInput(content=f"turn {i}", room=f"r{i % 2}") for i in range(4)])
    rooms = list(Room.objects.filter(project=owner.project))
    response = admin_client.post(
        "/admin/memories/room/",
        {"action": "delete_selected", "_selected_action": [r.pk for r in rooms], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Room.objects.exists() and not Memory.objects.exists()
    assert MemoryRevision.objects.filter(action="delete", actor="admin").count() == 4


def test_a_user_edit_goes_through_the_service(admin_client, owner, world):
    maria = EndUser.objects.get(project=owner.project, external_id="maria")
    response = admin_client.post(
        f"/admin/memories/enduser/{maria.pk}/change/",
        {"name": "Maria S.", "metadata": '{"tier": "gold"}', "external_id": "hacked"},
    )
    assert response.status_code == 302
    maria.refresh_from_db()
    assert (maria.name, maria.metadata, maria.external_id) == ("Maria S.", {"tier": "gold"},
                                                               "maria")  # fmt: skip
    memories = admin_client.get("/admin/memories/enduser/").content.decode()
    assert f"project__id__exact={owner.project.pk}&amp;user=maria" in memories


def test_a_project_made_in_the_admin_records_its_settings_and_members(admin_client, world):
    from memories.models import Project, SettingsRevision
    from tests.memories.admin.test_project_settings import inline_management

    olga = world.rows[Membership].user
    data = {
        "name": "new-project", "settings": '{"buffer": {"max_size": 20}}',
        **inline_management("memberships", "settings_revisions"),
        "memberships-TOTAL_FORMS": "1", "memberships-0-user": olga.pk,
        "memberships-0-role": "editor",
    }  # fmt: skip
    response = admin_client.post("/admin/memories/project/add/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    project = Project.objects.get(name="new-project")
    assert project.settings == {"buffer": {"max_size": 20}}
    [revision] = SettingsRevision.objects.filter(project=project)
    assert (revision.actor, revision.after) == ("admin", project.settings)
    assert Membership.objects.get(project=project).user == olga
