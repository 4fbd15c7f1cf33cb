"""Hostile input: every case gets a 4xx JSON error naming the field or the limit, never
a 5xx, and writes nothing.

One list of (method, path, body) cases: an endpoint added later adds its own here (the
documents endpoints are listed already and run once their routes exist)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.test import Client
from django.urls import Resolver404, resolve
from rest_framework import serializers

from memories.api.fields import JSONObjectField
from memories.models import Memory
from tests.memories.api.hostile_cases import (
    CASES,
    DIMENSION,
    DOCUMENT_CASES,
    MEMORY_ID,
    NUL,
    case_body,
)


def _routed(path: str) -> bool:
    try:
        resolve(path.split("?")[0].replace(NUL, "x"))
    except Resolver404:
        return False
    return True


def _params() -> list[Any]:
    params: list[Any] = [pytest.param(case, id=case.name) for case in CASES]
    for case in DOCUMENT_CASES:
        marks = [] if _routed(case.path) else [pytest.mark.skip(reason="no such route yet")]
        params.append(pytest.param(case, id=case.name, marks=marks))
    return params


def row_counts() -> dict[str, int]:
    """Rows of every table of the apps an API request can write to."""
    counts = {}
    for label in ("memories", "ingestion", "synopsis"):
        for model in apps.get_app_config(label).get_models():
            counts[model._meta.label] = model._default_manager.count()
    return counts


@pytest.fixture
def world(owner):
    """A user, a room and a memory for the cases' paths to exist."""
    response = owner.client.post(
        "/api/v1/memories/",
        {"id": MEMORY_ID, "user": "alice", "room": "chat-1", "content": "I have a cat"},
    )
    assert response.status_code == 201, response.json()
    return owner


@pytest.mark.django_db
@pytest.mark.parametrize("case", _params())
def test_hostile_input_is_a_4xx_naming_the_field_and_writes_nothing(world, case):
    before = row_counts()
    body = case_body(case)
    request = getattr(world.client, case.method.lower())
    kwargs: dict[str, Any] = {"content_type": case.content_type} if body is not None else {}
    response = request(case.path, body, **kwargs) if body is not None else request(case.path)

    assert response.status_code == case.status, response.content[:500]
    assert response["Content-Type"].startswith("application/json"), response.content[:300]
    error = response.json()
    # the field itself, or a path into it (an import names memories[0].embeddings...)
    assert any(
        key == case.names or key.startswith((f"{case.names}[", f"{case.names}.")) for key in error
    ), error
    if case.status == 413:
        assert error["limit"] > 0 and str(error["limit"]) in error["detail"], error
    assert row_counts() == before
    assert Memory.objects.get(pk=MEMORY_ID).metadata == {}  # a refused PATCH changed nothing


@pytest.mark.django_db
def test_a_3_mb_batch_within_the_documented_limits_is_accepted(owner):
    items = [{"user": "u", "content": f"{i} " + "x" * 3000} for i in range(1000)]
    body = json.dumps({"memories": items})
    assert len(body) > 3_000_000

    response = owner.client.post("/api/v1/memories/batch/", body, content_type="application/json")

    assert response.status_code == 201, response.content[:300]
    assert Memory.objects.filter(project=owner.project).count() == 1000


@pytest.mark.django_db
def test_a_body_within_the_document_upload_cap_is_left_to_the_documents_view(owner):
    """The documents endpoint has its own cap (INGESTION_MAX_UPLOAD_MB): the general body
    limit does not apply there."""
    size = int(settings.MEMORYHUB["MAX_BODY_BYTES"]) + 1024 * 1024
    body = '{"text": "' + "word " * (size // 5) + '"}'

    response = owner.client.post("/api/v1/documents/", body, content_type="application/json")

    limit = int(settings.MEMORYHUB["MAX_BODY_BYTES"])
    assert not (response.status_code == 413 and response.json().get("limit") == limit)
    assert response.status_code < 500


def test_json_fields_refuse_values_nested_past_the_limit():
    """A JSON field given a value that came another way than the JSON body (a form field,
    a service call) is checked too."""
    limit = int(settings.MEMORYHUB["MAX_JSON_DEPTH"])
    value: dict[str, Any] = {}
    for _ in range(limit + 1):
        value = {"a": value}
    with pytest.raises(serializers.ValidationError, match="Nested deeper"):
        JSONObjectField().run_validation(value)
    JSONObjectField().run_validation({"a": {"b": [1, 2]}})


# --- the OpenAPI schema says what the API does with it -------------------------------------


@pytest.fixture(scope="module")
def schema():
    response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_every_operation_lists_its_error_responses_with_the_json_body(schema):
    for path, operations in schema["paths"].items():
        if not path.startswith("/api/v1/"):
            continue
        for method, operation in operations.items():
            if method == "parameters":
                continue
            codes = set(operation["responses"])
            expected = {"400", "401", "413", "429", "503"}
            if method in ("post", "put", "patch", "delete") and path not in READ_ONLY_POSTS:
                expected.add("403")
            if "{" in path:
                expected.add("404")
            if "requestBody" in operation:
                expected.add("415")
            assert expected <= codes, (method, path, sorted(expected - codes))
            for code in ("429", "503"):
                assert "Retry-After" in operation["responses"][code]["headers"], (method, path)
            for code, name in (("413", "TooLargeError"), ("429", "Error")):
                if "content" in operation["responses"][code]:  # else declared by its view
                    body = operation["responses"][code]["content"]["application/json"]
                    assert body["schema"] == {"$ref": f"#/components/schemas/{name}"}
    too_large = schema["components"]["schemas"]["TooLargeError"]
    assert too_large["required"] == ["detail", "limit"]


READ_ONLY_POSTS = {  # searches and the context change nothing: a read-only key may ask
    "/api/v1/search/",
    "/api/v1/context/",
    "/api/v1/rooms/{external_id}/buffer/search/",
    "/api/v1/rooms/{external_id}/working/search/",
}


def test_the_schema_accepts_what_the_api_accepts(schema):
    components = schema["components"]["schemas"]
    embedding = components["SearchInputRequest"]["properties"]["embedding"]
    assert embedding["minItems"] == embedding["maxItems"] == DIMENSION  # not []
    assert embedding["items"]["maximum"] == 3.4028235e38
    for name in ("MemoryInputRequest", "EndUserInputRequest"):
        assert components[name]["properties"]["metadata"]["type"] == "object", name
    batch = schema["paths"]["/api/v1/memories/batch/"]["post"]
    assert "409" in batch["responses"] and "422" in batch["responses"]
    assert any(p["name"] == "Idempotency-Key" for p in batch["parameters"])


@pytest.mark.django_db
def test_a_list_as_metadata_is_refused_as_the_schema_says(owner):
    response = owner.client.post("/api/v1/users/", {"external_id": "bob", "metadata": [1]})
    assert response.status_code == 400
    assert response.json() == {"metadata": ["Must be a JSON object."]}


def test_a_url_no_pattern_matches_is_the_apis_json_404_and_the_consoles_page(owner, client):
    # the prune run pattern wants a number: "latest" matches no URL and never reaches DRF
    response = owner.client.get("/api/v1/prune/runs/latest/")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found."}
    page = client.get("/dashboard/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
