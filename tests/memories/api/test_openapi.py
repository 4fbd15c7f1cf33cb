"""The OpenAPI document: valid, complete, bearer auth, and true to what the API returns
(a client generated from it must be able to read every response)."""

import json
import re
import uuid

import jsonschema
import pytest
from django.core.management import call_command
from django.test import Client
from drf_spectacular.validation import validate_schema

V1_PATHS = {
    "/api/v1/users/": {"get", "post"},
    "/api/v1/users/{external_id}/": {"get", "patch", "delete"},
    "/api/v1/rooms/": {"get", "post"},
    "/api/v1/rooms/{external_id}/": {"get", "patch", "delete"},
    "/api/v1/memories/": {"get", "post", "delete"},
    "/api/v1/memories/batch/": {"post"},
    "/api/v1/memories/count/": {"get"},
    "/api/v1/memories/{memory_id}/": {"get", "patch", "delete"},
    "/api/v1/memories/{memory_id}/revisions/": {"get"},
    "/api/v1/search/": {"post"},
    "/api/v1/settings/": {"get", "patch"},
    "/api/v1/settings/revisions/": {"get"},
}


@pytest.fixture(scope="module")
def schema():
    response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_the_document_is_valid_openapi(schema):
    validate_schema(schema)  # raises on an invalid document
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "MemoryHub API"


def test_asked_again_the_document_is_the_same_and_every_reference_resolves(schema):
    """The second schema a process serves is the first: an error component's enum was
    rewritten in place, and the next document referred to a ServiceEnum it lacked."""
    again = Client().get("/api/schema/", {"format": "json"}).json()
    assert again == schema
    text = json.dumps(again)
    for name in set(re.findall(r'"#/components/schemas/([^"]+)"', text)):
        assert name in again["components"]["schemas"], name


def test_it_generates_without_warnings(tmp_path):
    # e.g. two operations with one operationId make generated clients guess names
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yaml"))


def test_it_lists_every_v1_operation(schema):
    v1 = {path: set(ops) - {"parameters"} for path, ops in schema["paths"].items()}
    for path, methods in V1_PATHS.items():
        assert path in v1, path
        assert methods <= v1[path], (path, v1[path])
    operation_ids = [op["operationId"] for ops in schema["paths"].values() for op in ops.values()]
    assert len(operation_ids) == len(set(operation_ids))


def test_every_operation_needs_the_bearer_api_key(schema):
    [(name, scheme)] = schema["components"]["securitySchemes"].items()
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    for path in V1_PATHS:
        for method in V1_PATHS[path]:
            assert schema["paths"][path][method]["security"] == [{name: []}], (path, method)


def test_swagger_ui_is_served_without_a_key(db):
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    assert b"swagger-ui" in response.content
    assert b"/api/schema/" in response.content


# --- the documented responses are the real ones -------------------------------------------


def _json_schema(node):
    """OpenAPI 3.0 schema objects -> JSON Schema (``nullable`` is the only difference used)."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _json_schema(value) for key, value in node.items()}
    if node.pop("nullable", False):
        return {"anyOf": [node, {"type": "null"}]}
    return node


def _check(schema, path, method, response):
    documented = schema["paths"][path][method]["responses"]
    status = str(response.status_code)
    assert status in documented, f"{method.upper()} {path} returned undocumented {status}"
    content = documented[status].get("content")
    if response.status_code == 204 or not response.content:
        assert not content, f"{method.upper()} {path} {status} documents a body it lacks"
        return
    assert content, f"{method.upper()} {path} {status} returns a body it does not document"
    body_schema = content["application/json"]["schema"]
    validator = jsonschema.Draft7Validator(
        {"allOf": [_json_schema(body_schema)], "components": _json_schema(schema["components"])}
    )
    errors = [
        f"{'/'.join(map(str, e.path))}: {e.message[:200]}"
        for e in validator.iter_errors(response.json())
    ]
    assert not errors, f"{method.upper()} {path} {status}: {errors[:3]}"


def test_responses_match_the_document(owner, schema):
    memory_id = str(uuid.uuid4())
    memory = {"id": memory_id, "user": "alice", "room": "r1", "content": "hello"}
    users, rooms, memories = "/api/v1/users/", "/api/v1/rooms/", "/api/v1/memories/"
    user, room, one = (
        f"{users}{{external_id}}/",
        f"{rooms}{{external_id}}/",
        f"{memories}{{memory_id}}/",
    )
    calls = [  # (documented path, method, real path, body): in an order that makes sense
        (users, "post", users, {"external_id": "alice"}),
        (users, "post", users, {"external_id": "alice"}),  # 200: it exists
        (users, "get", users, None),
        (user, "get", f"{users}alice/", None),
        (user, "patch", f"{users}alice/", {"name": "A"}),
        (rooms, "post", rooms, {"external_id": "r1", "agent": "bot"}),
        (rooms, "get", rooms, None),
        (room, "get", f"{rooms}r1/", None),
        (room, "patch", f"{rooms}r1/", {"name": "R"}),
        (memories, "post", memories, memory),
        (memories, "post", memories, memory),  # 200: a retry
        (f"{memories}batch/", "post", f"{memories}batch/", {"memories": [{"content": "tea"}]}),
        (memories, "get", f"{memories}?limit=1", None),
        (f"{memories}count/", "get", f"{memories}count/", None),
        (one, "get", f"{memories}{memory_id}/", None),
        (one, "patch", f"{memories}{memory_id}/", {"content": "hello there"}),
        (f"{one}revisions/", "get", f"{memories}{memory_id}/revisions/", None),
        ("/api/v1/search/", "post", "/api/v1/search/", {"query": "tea", "explain": True}),
        (one, "delete", f"{memories}{memory_id}/", None),
        (memories, "delete", f"{memories}?kind=message", None),
        (room, "delete", f"{rooms}r1/", None),
        (user, "delete", f"{users}alice/", None),
    ]
    failures = []
    for documented, method, path, body in calls:
        response = getattr(owner.client, method)(path, body)
        assert response.status_code < 400, (method, path, response.content)
        try:
            _check(schema, documented, method, response)
        except AssertionError as error:
            failures.append(str(error))
    assert not failures, "\n".join(failures)
