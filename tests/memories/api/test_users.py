"""End users: create (idempotent on external id), get, list, update, delete."""

import pytest

from memories.models import EndUser, Memory, MemoryRevision

USERS = "/api/v1/users/"


def test_create_then_create_again_returns_the_same_user(owner):
    response = owner.client.post(
        USERS, {"external_id": "alice", "name": "Alice", "metadata": {"plan": "pro"}}
    )
    assert response.status_code == 201, response.json()
    assert response.json()["external_id"] == "alice"
    assert response.json()["metadata"] == {"plan": "pro"}

    again = owner.client.post(USERS, {"external_id": "alice", "name": "Someone else"})
    assert again.status_code == 200
    assert again.json()["name"] == "Alice"  # the existing user, not overwritten
    assert EndUser.objects.filter(project=owner.project, external_id="alice").count() == 1


def test_get(owner):
    owner.client.post(USERS, {"external_id": "alice", "name": "Alice"})
    response = owner.client.get(f"{USERS}alice/")
    assert response.status_code == 200
    assert response.json()["name"] == "Alice"
    assert owner.client.get(f"{USERS}bob/").status_code == 404


def test_external_id_with_odd_characters_round_trips(owner):
    external_id = "user@example.com:42 é"
    assert owner.client.post(USERS, {"external_id": external_id}).status_code == 201
    response = owner.client.get(f"{USERS}user@example.com:42%20%C3%A9/")
    assert response.status_code == 200
    assert response.json()["external_id"] == external_id


def test_list_pages_by_cursor_and_filters(owner):
    for name in ["carol", "alice", "bob", "dave", "erin"]:
        owner.client.post(USERS, {"external_id": name})
    first = owner.client.get(USERS, {"limit": 2}).json()
    assert set(first) == {"count", "next_cursor", "results"}  # no offset, next, previous
    assert first["count"] == 5
    assert [u["external_id"] for u in first["results"]] == ["alice", "bob"]
    second = owner.client.get(USERS, {"limit": 2, "cursor": first["next_cursor"]}).json()
    assert second["count"] == 5
    assert [u["external_id"] for u in second["results"]] == ["carol", "dave"]
    third = owner.client.get(USERS, {"limit": 2, "cursor": second["next_cursor"]}).json()
    assert third["count"] == 5
    assert [u["external_id"] for u in third["results"]] == ["erin"]
    assert third["next_cursor"] is None

    only = owner.client.get(USERS, {"external_id": "dave"}).json()
    assert only["count"] == 1
    assert [u["external_id"] for u in only["results"]] == ["dave"]
    assert owner.client.get(USERS, {"external_id": "zed"}).json()["count"] == 0


def test_patch(owner):
    owner.client.post(USERS, {"external_id": "alice", "name": "Alice"})
    response = owner.client.patch(f"{USERS}alice/", {"metadata": {"tz": "UTC"}})
    assert response.status_code == 200
    assert response.json()["metadata"] == {"tz": "UTC"}
    assert response.json()["name"] == "Alice"  # untouched
    user = EndUser.objects.get(project=owner.project, external_id="alice")
    assert (user.name, user.metadata) == ("Alice", {"tz": "UTC"})


def test_delete_removes_the_user_and_every_memory_with_a_revision_each(owner):
    batch = [{"user": "alice", "content": f"alice said {i}"} for i in range(3)]
    batch += [{"user": "bob", "content": "bob's memory"}]
    created = owner.client.post("/api/v1/memories/batch/", {"memories": batch}).json()
    alice_ids = {r["memory"]["id"] for r in created["results"][:3]}

    response = owner.client.delete(f"{USERS}alice/")
    assert response.status_code == 200
    assert response.json() == {
        "deleted": 3,
        "erased": {"memories": 3, "revisions_redacted": 3, "users": 1},  # the creates'
    }
    assert not EndUser.objects.filter(project=owner.project, external_id="alice").exists()
    assert not Memory.objects.filter(pk__in=alice_ids).exists()
    assert Memory.objects.filter(project=owner.project).count() == 1  # bob's is kept

    deletions = MemoryRevision.objects.filter(action="delete")
    assert {str(r.memory_id) for r in deletions} == alice_ids
    for revision in deletions:
        assert revision.actor == owner.key.prefix
        said = Memory(content=revision.before.get("content", "")).content
        assert said == ""  # erased: the text's SHA-256 only
        assert len(revision.before["content_sha256"]) == 64
        assert revision.after == {"erased": "user delete"}
    assert owner.client.get(f"{USERS}alice/").status_code == 404


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "external_id"),
        ({"external_id": ""}, "external_id"),
        ({"external_id": "a/b"}, "external_id"),
        ({"external_id": "x" * 256}, "external_id"),
        ({"external_id": "alice", "metadata": ["a", "list"]}, "metadata"),
        ({"external_id": "alice", "metadata": "a string"}, "metadata"),
        ({"external_id": "alice", "metadata": {"blob": "x" * 20_000}}, "metadata"),
        ({"external_id": "alice", "metadata": {"name": "nul\u0000"}}, "metadata"),
        ({"external_id": "al\u0000ice"}, "external_id"),
    ],
)
def test_bad_input_is_400_naming_the_field(owner, body, field):
    response = owner.client.post(USERS, body)
    assert response.status_code == 400
    assert field in response.json()
    assert not EndUser.objects.exists()


def test_patch_with_bad_metadata_is_400(owner):
    owner.client.post(USERS, {"external_id": "alice", "metadata": {"a": 1}})
    response = owner.client.patch(f"{USERS}alice/", {"metadata": [1, 2]})
    assert response.status_code == 400
    assert "metadata" in response.json()
    assert EndUser.objects.get(external_id="alice").metadata == {"a": 1}


def test_metadata_limit_follows_the_setting(owner, settings):
    settings.MEMORYHUB = {**settings.MEMORYHUB, "MAX_METADATA_BYTES": 20}
    small = owner.client.post(USERS, {"external_id": "a", "metadata": {"k": "short"}})
    assert small.status_code == 201
    response = owner.client.post(USERS, {"external_id": "b", "metadata": {"k": "x" * 30}})
    assert response.status_code == 400
    assert "20 bytes" in response.json()["metadata"][0]


class TestAcrossTenants:
    @pytest.fixture(autouse=True)
    def alice(self, owner):
        owner.client.post(USERS, {"external_id": "alice", "name": "Alice"})
        owner.client.post("/api/v1/memories/", {"user": "alice", "content": "secret"})

    def test_outsider_gets_404(self, owner, outsider):
        assert outsider.client.get(f"{USERS}alice/").status_code == 404
        assert outsider.client.patch(f"{USERS}alice/", {"name": "Hacked"}).status_code == 404
        assert outsider.client.delete(f"{USERS}alice/").status_code == 404
        user = EndUser.objects.get(project=owner.project, external_id="alice")
        assert user.name == "Alice"
        assert Memory.objects.filter(end_user=user).count() == 1

    def test_outsider_does_not_see_it_in_lists(self, outsider):
        assert outsider.client.get(USERS).json()["count"] == 0
        assert outsider.client.get(USERS, {"external_id": "alice"}).json()["count"] == 0

    def test_same_external_id_in_another_project_is_another_user(self, owner, outsider):
        response = outsider.client.post(USERS, {"external_id": "alice", "name": "Other Alice"})
        assert response.status_code == 201
        assert EndUser.objects.filter(external_id="alice").count() == 2
        assert owner.client.get(f"{USERS}alice/").json()["name"] == "Alice"
        assert outsider.client.get(f"{USERS}alice/").json()["name"] == "Other Alice"
        for client, name in [(owner.client, "Alice"), (outsider.client, "Other Alice")]:
            listed = client.get(USERS, {"external_id": "alice"}).json()
            assert [user["name"] for user in listed["results"]] == [name]
        # deleting the outsider's alice leaves the owner's alice and her memory alone
        assert outsider.client.delete(f"{USERS}alice/").json()["deleted"] == 0
        assert owner.client.get(f"{USERS}alice/").status_code == 200
        assert Memory.objects.filter(project=owner.project).count() == 1
