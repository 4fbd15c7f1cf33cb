"""GET /api/v1/embedding/, POST /api/v1/embedding/switch/ and .../switch/cancel/: what a
project uses and can switch to, a switch started and followed, refusals that change
nothing, keys and tenants, and the documented responses. The switch itself is tested in
tests/memories/services/test_embedding_switch.py."""

import pytest
from django.test import Client

from memories.models import EmbeddingSwitch
from memories.services import embedding_switch as switching
from tests.memories.api.test_openapi import _check
from tests.memories.services.test_embedding_switch import TEXTS, endpoint, endpoint_server, written

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["endpoint", "endpoint_server"]  # the fixtures, shared


@pytest.fixture(autouse=True)
def jobs(monkeypatch):
    """The switches' jobs, recorded instead of queued (no worker runs them here)."""
    sent = []
    monkeypatch.setattr(switching, "_job_send", lambda pk, countdown=None: sent.append(pk))
    return sent


def test_a_project_shows_its_model_and_the_models_it_can_switch_to(owner, endpoint):
    shown = owner.read_client.get("/api/v1/embedding/").json()
    assert (shown["model"], shown["dimension"], shown["switch"]) == ("minilm-l6", 384, None)
    assert [m["key"] for m in shown["models"]] == ["minilm-l6", "mpnet-base", "openai"]
    assert {m["key"]: m["dimension"] for m in shown["models"]}["mpnet-base"] == 768


def test_a_switch_is_started_followed_and_cancelled(owner, endpoint, jobs):
    written(owner.project, TEXTS)
    response = owner.client.post("/api/v1/embedding/switch/", {"model": "openai"}, format="json")
    assert response.status_code == 202, response.content
    assert jobs == [response.json()["id"]]  # its job, queued once
    started = response.json()
    assert (started["status"], started["from_model"], started["to_model"]) == (
        "running",
        "minilm-l6",
        "openai",
    )
    assert (started["done"], started["total"]) == (0, len(TEXTS))
    assert started["requested_by"] == f"api_key:{owner.key.prefix}"
    assert owner.client.get("/api/v1/embedding/").json()["switch"]["id"] == started["id"]

    cancelled = owner.client.post("/api/v1/embedding/switch/cancel/")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    again = owner.client.post("/api/v1/embedding/switch/cancel/")
    assert again.status_code == 400 and "no switch" in again.json()["switch"][0]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": "gpt-9"}, "unknown model 'gpt-9'"),
        ({"model": "minilm-l6"}, "already uses 'minilm-l6'"),
        ({}, "required"),
    ],
)
def test_a_refused_switch_is_a_400_naming_the_field_and_changes_nothing(
    owner, endpoint, body, message
):
    response = owner.client.post("/api/v1/embedding/switch/", body, format="json")
    assert response.status_code == 400
    assert message in response.json()["model"][0]
    assert not EmbeddingSwitch.objects.exists()


def test_a_second_switch_while_one_runs_is_refused(owner, endpoint):
    owner.client.post("/api/v1/embedding/switch/", {"model": "openai"}, format="json")
    second = owner.client.post("/api/v1/embedding/switch/", {"model": "openai"}, format="json")
    assert second.status_code == 400 and "is running" in second.json()["model"][0]
    assert EmbeddingSwitch.objects.count() == 1


def test_a_read_key_may_look_but_not_switch(owner, endpoint):
    assert owner.read_client.get("/api/v1/embedding/").status_code == 200
    response = owner.read_client.post(
        "/api/v1/embedding/switch/", {"model": "openai"}, format="json"
    )
    assert response.status_code == 403
    assert owner.read_client.post("/api/v1/embedding/switch/cancel/").status_code == 403


def test_another_tenant_sees_and_cancels_only_its_own(owner, outsider, endpoint):
    owner.client.post("/api/v1/embedding/switch/", {"model": "openai"}, format="json")
    assert outsider.client.get("/api/v1/embedding/").json()["switch"] is None
    assert outsider.client.post("/api/v1/embedding/switch/cancel/").status_code == 400
    assert EmbeddingSwitch.objects.get().status == "running"


def test_responses_match_the_document(owner, endpoint):
    schema = Client().get("/api/schema/", {"format": "json"}).json()
    assert {"embedding"} == set(schema["paths"]["/api/v1/embedding/switch/"]["post"]["tags"])
    _check(schema, "/api/v1/embedding/", "get", owner.client.get("/api/v1/embedding/"))
    started = owner.client.post("/api/v1/embedding/switch/", {"model": "openai"}, format="json")
    _check(schema, "/api/v1/embedding/switch/", "post", started)
    refused = owner.client.post("/api/v1/embedding/switch/", {"model": "x"}, format="json")
    _check(schema, "/api/v1/embedding/switch/", "post", refused)
    _check(schema, "/api/v1/embedding/", "get", owner.client.get("/api/v1/embedding/"))
    cancelled = owner.client.post("/api/v1/embedding/switch/cancel/")
    _check(schema, "/api/v1/embedding/switch/cancel/", "post", cancelled)
