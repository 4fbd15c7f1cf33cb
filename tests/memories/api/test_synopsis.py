"""A user's synopsis over the API: GET /api/v1/users/{user}/synopsis/ (freshness,
refresh on access, cached), PATCH (edit and lock, recorded), POST .../refresh/ (202,
locked parts left out); another project's user is a 404, a read key cannot write."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client, override_settings

from memories.models import EndUser, Synopsis, SynopsisRevision
from memories.services.memories import MemoryInput, memory_create_batch
from memories.services.revisions import Actor
from memories.services.synopsis_cache import CACHE_KEY
from synopsis.services.synopses import synopsis_generate
from tests.memories.api.test_openapi import _check

# writes put the synopsis in the Redis cache after their commit: tests commit for real
pytestmark = pytest.mark.django_db(transaction=True)

SYNOPSIS = "/api/v1/users/maria/synopsis/"
REFRESH = "/api/v1/users/maria/synopsis/refresh/"
TASK = "synopsis.tasks.synopsis_generate_task"


@pytest.fixture(autouse=True)
def clean_redis(redis_client, settings):
    settings.LLM = {**settings.LLM, "BASE_URL": ""}  # the template
    for key in redis_client.scan_iter(match="memoryhub:synopsis*"):
        redis_client.delete(key)
    redis_client.delete("derived")
    yield
    redis_client.delete("derived")


@pytest.fixture
def maria(owner, redis_client):
    """Maria with two facts and a fresh synopsis; nothing queued."""
    memory_create_batch(
        project=owner.project,
        items=[
            MemoryInput(
                content="User's name is Maria.",
                kind="fact",
                user="maria",
                content_json={"category": "identity", "slot": "identity.name"},
            ),
            MemoryInput(
                content="User likes jazz.",
                kind="fact",
                user="maria",
                content_json={"category": "preference"},
            ),
        ],
        actor=Actor.system("test"),
    )
    user = EndUser.objects.get(project=owner.project, external_id="maria")
    synopsis_generate(end_user_id=user.pk)
    redis_client.delete("derived")
    return user


def queued(redis_client):
    return [
        (json.loads(raw)["headers"]["task"], json.loads(raw)["headers"]["argsrepr"])
        for raw in reversed(redis_client.lrange("derived", 0, -1))
    ]


def test_get_shows_each_part_with_its_freshness(owner, maria, redis_client):
    response = owner.read_client.get(SYNOPSIS)
    assert response.status_code == 200
    body = response.json()
    assert body["user"] == "maria" and body["refresh_scheduled"] is False
    identity = body["identity"]
    assert identity["text"] == "Maria likes jazz."
    assert identity["freshness"] == "fresh" and identity["locked"] is False
    assert identity["generator"] == "template" and identity["token_count"] == 4
    assert identity["ttl_seconds"] == 168 * 3600 and 0 <= identity["age_seconds"] < 60
    assert len(identity["source_ids"]) == 2
    assert body["context"]["text"] == "" and body["context"]["ttl_seconds"] == 3600
    assert queued(redis_client) == []


def test_a_stale_part_is_served_and_its_regeneration_queued_once(owner, maria, redis_client):
    Synopsis.objects.filter(end_user=maria).update(
        context_generated_at=Synopsis.objects.get(end_user=maria).context_generated_at
        - timedelta(hours=2)
    )
    redis_client.delete(CACHE_KEY.format(maria.pk))  # as time passing would, for the cache
    bodies = [owner.read_client.get(SYNOPSIS).json() for _ in range(3)]
    assert [b["context"]["freshness"] for b in bodies] == ["stale"] * 3
    assert all(b["refresh_scheduled"] for b in bodies)
    assert bodies[0]["context"]["age_seconds"] > 7200
    assert queued(redis_client) == [(TASK, f"[{maria.pk}, ['context']]")]


def test_refresh_false_serves_without_queueing_and_a_bad_value_is_a_400(owner, redis_client, maria):
    Synopsis.objects.filter(end_user=maria).delete()
    redis_client.delete(CACHE_KEY.format(maria.pk))
    body = owner.read_client.get(SYNOPSIS, {"refresh": "false"}).json()
    assert body["identity"]["freshness"] == "missing" and body["identity"]["text"] == ""
    assert body["identity"]["generated_at"] is None and body["refresh_scheduled"] is False
    assert queued(redis_client) == []
    response = owner.read_client.get(SYNOPSIS, {"refresh": "maybe"})
    assert response.status_code == 400 and "refresh" in response.json()
    assert owner.read_client.get(SYNOPSIS).json()["refresh_scheduled"] is True


def test_patch_edits_and_locks_a_part_and_records_it(owner, maria):
    owner.client.get(SYNOPSIS)  # cached: the PATCH must replace what is cached
    response = owner.client.patch(
        SYNOPSIS, {"identity": {"text": "Maria, a jazz pianist."}}, format="json"
    )
    assert response.status_code == 200, response.json()
    identity = response.json()["identity"]
    assert identity["text"] == "Maria, a jazz pianist." and identity["locked"] is True
    assert identity["generator"] == "operator" and identity["source_ids"] == []
    assert identity["edited_by"] == f"api_key:{owner.key.prefix}"
    assert owner.client.get(SYNOPSIS).json()["identity"]["text"] == "Maria, a jazz pianist."
    [revision] = SynopsisRevision.objects.filter(end_user=maria)
    assert (revision.part, revision.action, revision.actor_type) == ("identity", "edit", "api_key")

    # a locked part is left out of a refresh, and stays as written
    response = owner.client.post(REFRESH, {}, format="json")
    assert response.status_code == 202
    assert response.json() == {"user": "maria", "parts": ["context"], "locked": ["identity"]}
    synopsis_generate(end_user_id=maria.pk, force=True)
    assert owner.client.get(SYNOPSIS).json()["identity"]["text"] == "Maria, a jazz pianist."

    # unlocked (nothing else changed), then regenerated
    response = owner.client.patch(SYNOPSIS, {"identity": {"locked": False}}, format="json")
    assert response.json()["identity"]["locked"] is False
    assert response.json()["identity"]["text"] == "Maria, a jazz pianist."
    assert owner.client.post(REFRESH, {"parts": ["identity"]}, format="json").status_code == 202
    synopsis_generate(end_user_id=maria.pk, force=True)
    assert owner.client.get(SYNOPSIS).json()["identity"]["text"] == "Maria likes jazz."
    actions = SynopsisRevision.objects.filter(end_user=maria).order_by("created_at", "pk")
    assert [r.action for r in actions] == ["edit", "unlock"]


def test_patch_of_both_parts_is_all_or_nothing(owner, maria):
    response = owner.client.patch(
        SYNOPSIS,
        {"identity": {"text": "Fine."}, "context": {"text": "word " * 400, "locked": False}},
        format="json",
    )
    assert response.status_code == 400
    assert "300 tokens" in response.json()["context.text"][0]
    assert Synopsis.objects.get(end_user=maria).identity_text == "Maria likes jazz."
    assert not SynopsisRevision.objects.exists()
    response = owner.client.patch(
        SYNOPSIS,
        {"identity": {"locked": True}, "context": {"text": "Moving.", "locked": False}},
        format="json",
    )
    body = response.json()
    assert body["identity"]["locked"] and body["identity"]["text"] == "Maria likes jazz."
    assert (body["context"]["text"], body["context"]["locked"]) == ("Moving.", False)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "non_field_errors"),
        ({"persona": {"text": "x"}}, "persona"),
        ({"identity": {}}, "identity"),
        ({"identity": {"locked": "perhaps"}}, "identity"),
        ({"identity": "Maria"}, "identity"),
        ({"identity": {"text": "x" * 20_001}}, "identity"),
    ],
)
def test_bad_patches_are_400s_naming_the_field(owner, maria, payload, field):
    response = owner.client.patch(SYNOPSIS, payload, format="json")
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not SynopsisRevision.objects.exists()


def test_refresh_queues_the_unlocked_parts_even_when_fresh(owner, maria, redis_client):
    response = owner.client.post(REFRESH, {"parts": ["context"]}, format="json")
    assert response.status_code == 202
    assert response.json() == {"user": "maria", "parts": ["context"], "locked": []}
    assert queued(redis_client) == [(TASK, f"[{maria.pk}, ['context']]")]
    assert owner.client.post(REFRESH).json()["parts"] == ["identity", "context"]

    owner.client.patch(
        SYNOPSIS, {"identity": {"locked": True}, "context": {"locked": True}}, format="json"
    )
    response = owner.client.post(REFRESH)
    assert response.status_code == 409 and "identity, context" in response.json()["detail"]
    response = owner.client.post(REFRESH, {"parts": ["summary"]}, format="json")
    assert response.status_code == 400 and "parts" in response.json()


def test_refresh_without_redis_is_a_503(owner, maria):
    with override_settings(REDIS_URL="unix:///nonexistent/redis.sock"):
        response = owner.client.post(REFRESH)
        assert response.status_code == 503 and response["Retry-After"] == "5"
        assert owner.client.get(SYNOPSIS).json()["identity"]["text"] == "Maria likes jazz."


def test_a_read_key_can_read_but_not_write(owner, maria):
    assert owner.read_client.get(SYNOPSIS).status_code == 200
    assert (
        owner.read_client.patch(SYNOPSIS, {"identity": {"text": "x"}}, format="json").status_code
        == 403
    )
    assert owner.read_client.post(REFRESH).status_code == 403
    assert Synopsis.objects.get(end_user=maria).identity_text == "Maria likes jazz."


def test_another_projects_user_is_a_404(owner, outsider, maria, redis_client):
    assert outsider.client.get(SYNOPSIS).status_code == 404
    assert (
        outsider.client.patch(
            SYNOPSIS, {"identity": {"text": "Hijacked."}}, format="json"
        ).status_code
        == 404
    )
    assert outsider.client.post(REFRESH).status_code == 404
    assert owner.client.get("/api/v1/users/nobody/synopsis/").status_code == 404
    assert Synopsis.objects.get(end_user=maria).identity_text == "Maria likes jazz."
    assert queued(redis_client) == []


def test_responses_match_the_document(owner, maria):
    schema = Client().get("/api/schema/", {"format": "json"}).json()
    path = "/api/v1/users/{external_id}/synopsis/"
    assert schema["paths"][path]["get"]["tags"] == ["synopsis"]
    _check(schema, path, "get", owner.client.get(SYNOPSIS))
    _check(
        schema,
        path,
        "patch",
        owner.client.patch(
            SYNOPSIS, {"context": {"text": "Moving.", "locked": True}}, format="json"
        ),
    )
    _check(schema, f"{path}refresh/", "post", owner.client.post(REFRESH))
    owner.client.patch(SYNOPSIS, {"identity": {"locked": True}}, format="json")
    _check(schema, f"{path}refresh/", "post", owner.client.post(REFRESH))  # 409
