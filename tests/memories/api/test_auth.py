"""API keys: who may call the API at all, and what a read-only key may do."""

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.models import ApiKey, EndUser, Memory, Room
from memories.providers import kept
from memories.services import projects
from memories.services.projects import api_key_revoke

USERS = "/api/v1/users/"
MEMORIES = "/api/v1/memories/"


@pytest.mark.parametrize(
    "header",
    [
        None,  # no header at all
        "mh_abc",  # no scheme
        "Token mh_abc_def",  # the wrong scheme
        "Bearer ",  # a scheme without a key
        "Basic dXNlcjpwYXNz",
    ],
)
def test_missing_or_malformed_header_is_401(db, anonymous, header):
    if header is not None:
        anonymous.credentials(HTTP_AUTHORIZATION=header)
    response = anonymous.get(MEMORIES)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert "Bearer" in response.json()["detail"]


@pytest.mark.parametrize(
    "raw_key",
    ["mh_deadbeef_not-a-real-secret", "mh_nounderscore", "sk-something-else", "mh__"],
)
def test_unknown_key_is_401(db, anonymous, raw_key):
    anonymous.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    assert anonymous.get(MEMORIES).status_code == 401


def test_right_prefix_wrong_secret_is_401(owner, anonymous):
    prefix_part = owner.raw_key.rsplit("_", 1)[0]
    anonymous.credentials(HTTP_AUTHORIZATION=f"Bearer {prefix_part}_wrongsecret")
    assert anonymous.get(MEMORIES).status_code == 401


def test_revoked_key_is_401(owner):
    assert owner.client.get(MEMORIES).status_code == 200
    api_key_revoke(key=owner.key)
    response = owner.client.get(MEMORIES)
    assert response.status_code == 401
    assert owner.read_client.get(MEMORIES).status_code == 200  # the other key still works


def test_scheme_is_case_insensitive(owner, anonymous):
    anonymous.credentials(HTTP_AUTHORIZATION=f"bearer {owner.raw_key}")
    assert anonymous.get(MEMORIES).status_code == 200


@pytest.fixture
def existing(owner):
    """A user, a room and a memory the read-only key will try to change."""
    response = owner.client.post(MEMORIES, {"user": "alice", "room": "r1", "content": "hello"})
    assert response.status_code == 201
    return response.json()["memory"]["id"]


def _read_only_writes(existing):
    return [
        ("post", MEMORIES, {"user": "alice", "content": "sneaky"}),
        ("post", f"{MEMORIES}batch/", {"memories": [{"user": "alice", "content": "sneaky"}]}),
        ("patch", f"{MEMORIES}{existing}/", {"content": "changed"}),
        ("delete", f"{MEMORIES}{existing}/", None),
        ("delete", f"{MEMORIES}?room=r1", None),
        ("post", USERS, {"external_id": "mallory"}),
        ("patch", f"{USERS}alice/", {"name": "Changed"}),
        ("delete", f"{USERS}alice/", None),
        ("post", "/api/v1/rooms/", {"external_id": "r2"}),
        ("patch", "/api/v1/rooms/r1/", {"name": "Changed"}),
        ("delete", "/api/v1/rooms/r1/", None),
    ]


def test_read_only_key_cannot_write(owner, existing):
    before = (Memory.objects.count(), EndUser.objects.count(), Room.objects.count())
    for method, path, body in _read_only_writes(existing):
        response = getattr(owner.read_client, method)(path, body)
        assert response.status_code == 403, (method, path, response.content)
        assert response.json()["detail"] == "This API key is read-only."
    assert (Memory.objects.count(), EndUser.objects.count(), Room.objects.count()) == before
    memory = Memory.objects.get(pk=existing)
    assert memory.content == "hello"
    assert EndUser.objects.get(external_id="alice").name == ""


def test_read_only_key_can_read_and_search(owner, existing):
    client = owner.read_client
    assert client.get(f"{MEMORIES}{existing}/").json()["content"] == "hello"
    assert client.get(MEMORIES, {"user": "alice"}).json()["count"] == 1
    assert client.get(f"{MEMORIES}count/").json() == {"count": 1}
    assert client.get(f"{MEMORIES}{existing}/revisions/").status_code == 200
    assert client.get(f"{USERS}alice/").status_code == 200
    assert client.get("/api/v1/rooms/r1/").status_code == 200
    response = client.post("/api/v1/search/", {"query": "hello", "mode": "keyword"})
    assert response.status_code == 200
    assert [hit["memory"]["id"] for hit in response.json()["results"]] == [existing]


def test_last_used_at_is_recorded(owner):
    assert ApiKey.objects.get(pk=owner.read_key.pk).last_used_at is None
    started = timezone.now()
    assert owner.read_client.get(MEMORIES).status_code == 200
    last_used = ApiKey.objects.get(pk=owner.read_key.pk).last_used_at
    assert last_used is not None and last_used >= started


def test_failed_authentication_does_not_touch_last_used_at(owner, anonymous):
    prefix_part = owner.raw_key.rsplit("_", 1)[0]
    anonymous.credentials(HTTP_AUTHORIZATION=f"Bearer {prefix_part}_wrongsecret")
    anonymous.get(MEMORIES)
    assert ApiKey.objects.get(pk=owner.key.pk).last_used_at is None


def _key_reads(client) -> int:
    """How many statements one request made to read an API key."""
    with CaptureQueriesContext(connection) as queries:
        assert client.get(MEMORIES).status_code == 200
    return sum('FROM "memories_apikey"' in query["sql"] for query in queries.captured_queries)


def test_a_verified_key_is_kept_for_a_moment(owner, monkeypatch):
    _key_reads(owner.client)
    assert _key_reads(owner.client) == 0  # the second request reads no key
    projects._verified.clear()
    monkeypatch.setattr(projects._verified, "seconds", 0)  # LOOKUP_CACHE_SECONDS=0
    assert _key_reads(owner.client) == 1
    assert _key_reads(owner.client) == 1


def test_a_key_revoked_by_another_process_is_refused_once_its_moment_is_over(owner, monkeypatch):
    """Another process's revocation sends this one no signal: the key it keeps serves
    for LOOKUP_CACHE_SECONDS at most."""
    assert owner.client.get(MEMORIES).status_code == 200
    ApiKey.objects.filter(pk=owner.key.pk).update(revoked_at=timezone.now())  # no signal
    assert owner.client.get(MEMORIES).status_code == 200
    later = time.monotonic() + projects._verified.seconds + 0.01
    monkeypatch.setattr(kept.time, "monotonic", lambda: later)
    assert owner.client.get(MEMORIES).status_code == 401


def test_a_kept_key_and_project_are_the_requests_own_copies(owner):
    """A request that changes its key or project objects leaves the kept ones alone."""
    first = projects.api_key_authenticate(raw_key=owner.raw_key)
    first.name = "changed"
    first.project.settings = {"search": {"rrf_k": 1}}
    second = projects.api_key_authenticate(raw_key=owner.raw_key)
    assert second.name == owner.key.name
    assert second.project.settings == owner.project.settings
    assert second.project is not first.project
