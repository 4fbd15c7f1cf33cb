"""Hostile input: every case gets a 4xx JSON error naming the field or the limit, never
a 5xx, and writes nothing.

One list of (method, path, body) cases: an endpoint added later adds its own here (the
documents endpoints are listed already and run once their routes exist)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.urls import Resolver404, resolve

from memories.models import Memory

MEMORY_ID = "3f1c2a9e-0b7d-4c55-9e51-7a1d2c3b4a50"
DOCUMENT_ID = "8a6d1f0e-52c4-4b3a-9f7e-1d2c3b4a5e60"
DIMENSION = int(settings.EMBEDDING["DIMENSION"])
NUL, BELL = "%00", "%07"  # as they arrive in a path or query string


def nested_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def nested_list(depth: int) -> str:
    return "[" * depth + "]" * depth


def cursor_nested(depth: int) -> str:
    import base64

    return base64.urlsafe_b64encode(nested_list(depth).encode()).decode().rstrip("=")


def vector(first: str) -> str:
    """A JSON vector of the space's dimension whose first number is written ``first``."""
    return "[" + ", ".join([first] + ["0.0"] * (DIMENSION - 1)) + "]"


@dataclass
class Case:
    name: str
    method: str
    path: str
    body: str | None = None  # raw JSON text: json.dumps itself recurses on deep values
    names: str = "detail"  # the key the error must carry: the field, or "limit" for a 413
    status: int = 400
    content_type: str = "application/json"


def memory_body(**fields: str) -> str:
    """A memory create body; values are raw JSON text."""
    parts = {"user": '"alice"', "room": '"chat-1"', "content": '"hello"', **fields}
    return "{" + ", ".join(f'"{key}": {value}' for key, value in parts.items()) + "}"


def search_body(**fields: str) -> str:
    parts = {"query": '"cats"', **fields}
    return "{" + ", ".join(f'"{key}": {value}' for key, value in parts.items()) + "}"


DEEP = nested_object(5000)
TEN_MB = 10 * 1024 * 1024

CASES = [
    # JSON nested too deep: in fields, in the body, in lists
    Case("metadata 5000 deep, create", "POST", "/api/v1/memories/",
         memory_body(metadata=DEEP), "metadata"),
    Case("metadata 5000 deep, PATCH", "PATCH", f"/api/v1/memories/{MEMORY_ID}/",
         f'{{"metadata": {DEEP}}}', "metadata"),
    Case("content_json 5000 deep", "POST", "/api/v1/memories/",
         memory_body(content_json=DEEP), "content_json"),
    Case("search metadata 5000 deep", "POST", "/api/v1/search/",
         search_body(metadata=DEEP), "metadata"),
    Case("metadata holding a list 50,000 deep", "POST", "/api/v1/memories/",
         memory_body(metadata='{"a": ' + nested_list(50_000) + "}"), "metadata"),
    Case("a body that is a list 50,000 deep", "POST", "/api/v1/memories/",
         nested_list(50_000), "detail"),
    Case("batch item metadata 5000 deep", "POST", "/api/v1/memories/batch/",
         '{"memories": [' + memory_body(metadata=DEEP) + "]}", "memories"),
    Case("metadata 33 levels (one past the limit)", "POST", "/api/v1/memories/",
         memory_body(metadata=nested_object(32)), "metadata"),
    Case("user metadata 5000 deep", "POST", "/api/v1/users/",
         f'{{"external_id": "bob", "metadata": {DEEP}}}', "metadata"),
    Case("room settings 5000 deep", "PATCH", "/api/v1/rooms/chat-1/",
         f'{{"settings": {DEEP}}}', "settings"),
    Case("context messages 5000 deep", "POST", "/api/v1/context/",
         f'{{"user": "alice", "messages": {DEEP}}}', "messages"),
    Case("buffer search filter 5000 deep", "POST", "/api/v1/rooms/chat-1/buffer/search/",
         f'{{"query": "cats", "filter_metadata": {DEEP}}}', "filter_metadata"),
    Case("working item metadata 5000 deep", "POST", "/api/v1/rooms/chat-1/working/",
         f'{{"content": "note", "metadata": {DEEP}}}', "metadata"),
    Case("import document 5000 deep", "POST", "/api/v1/import/",
         f'{{"format": "memoryhub-export", "version": 1, "memories": [{DEEP}]}}', "memories"),
    Case("cursor nested 1,400 deep", "GET",
         f"/api/v1/memories/?cursor={cursor_nested(1400)[:3000]}", None, "cursor"),
    Case("cursor of a deep list within its length", "GET",
         f"/api/v1/memories/?cursor={cursor_nested(100)}", None, "cursor"),
    # vectors: finite doubles outside float32, wrong lengths
    Case("embedding 1e39", "POST", "/api/v1/search/",
         search_body(embedding=vector("1e39")), "embedding"),
    Case("embedding -3.5e38", "POST", "/api/v1/search/",
         search_body(embedding=vector("-3.5e38")), "embedding"),
    Case("embedding []", "POST", "/api/v1/search/", search_body(embedding="[]"), "embedding"),
    Case("embedding of 200,000 numbers", "POST", "/api/v1/search/",
         search_body(embedding="[" + ",".join(["0.5"] * 200_000) + "]"), "embedding"),
    Case("embedding NaN", "POST", "/api/v1/search/",
         search_body(embedding=vector("NaN")), "detail"),
    Case("embedding Infinity", "POST", "/api/v1/search/",
         search_body(embedding=vector("Infinity")), "detail"),
    Case("embedding 1e400 (a double's overflow)", "POST", "/api/v1/search/",
         search_body(embedding=vector("1e400")), "embedding"),
    Case("import vectors 1e39", "POST", "/api/v1/import/", "IMPORT_1E39", "memories"),
    # NUL and control characters in ids: the path, filters, bodies
    *[
        Case(f"NUL in the {what} path, {method}", method, path, body, "external_id")
        for what, path in (
            ("user", f"/api/v1/users/al{NUL}ice/"),
            ("room", f"/api/v1/rooms/chat{NUL}1/"),
        )
        for method, body in (("GET", None), ("PATCH", '{"name": "x"}'), ("DELETE", None))
    ],
    Case("BEL in the user path", "GET", f"/api/v1/users/al{BELL}ice/", None, "external_id"),
    Case("NUL in the synopsis path", "GET", f"/api/v1/users/a{NUL}/synopsis/", None,
         "external_id"),
    Case("NUL in the export path", "GET", f"/api/v1/users/a{NUL}/export/", None, "external_id"),
    Case("NUL in the buffer path", "GET", f"/api/v1/rooms/a{NUL}/buffer/", None, "external_id"),
    Case("NUL in a new working room", "POST", f"/api/v1/rooms/new{NUL}/working/",
         '{"content": "note"}', "external_id"),
    Case("NUL in the working item path", "DELETE",
         f"/api/v1/rooms/chat-1/working/x{NUL}/", None, "item_id"),
    Case("NUL in the memory id path", "GET", f"/api/v1/memories/{NUL}/", None, "memory_id"),
    Case("NUL in the revisions path", "GET", f"/api/v1/memories/{NUL}/revisions/", None,
         "memory_id"),
    Case("NUL in the users external_id filter", "GET",
         f"/api/v1/users/?external_id=al{NUL}ice", None, "external_id"),
    Case("NUL in the rooms external_id filter", "GET",
         f"/api/v1/rooms/?external_id=c{NUL}", None, "external_id"),
    Case("ESC in the users external_id filter", "GET",
         "/api/v1/users/?external_id=al%1Bice", None, "external_id"),
    Case("NUL in the memories user filter", "GET", f"/api/v1/memories/?user=a{NUL}", None,
         "user"),
    Case("BEL in the memories room filter", "GET", f"/api/v1/memories/?room=a{BELL}", None,
         "room"),
    Case("BEL in the count user filter", "GET", f"/api/v1/memories/count/?user=a{BELL}", None,
         "user"),
    Case("NUL in the bulk delete room filter", "DELETE", f"/api/v1/memories/?room=a{NUL}",
         None, "room"),
    Case("NUL in any query parameter", "GET", f"/api/v1/settings/?x=a{NUL}", None, "x"),
    Case("NUL in a body user", "POST", "/api/v1/memories/",
         memory_body(user='"al\\u0000ice"'), "user"),
    Case("BEL in a body room", "POST", "/api/v1/memories/",
         memory_body(room='"chat\\u00071"'), "room"),
    Case("C1 control in a body agent", "POST", "/api/v1/memories/",
         memory_body(agent='"b\\u009bot"'), "agent"),
    Case("NUL in a new user's external_id", "POST", "/api/v1/users/",
         '{"external_id": "b\\u0000b"}', "external_id"),
    Case("tab in a new room's external_id", "POST", "/api/v1/rooms/",
         '{"external_id": "r\\t1"}', "external_id"),
    Case("NUL in a batch item's user", "POST", "/api/v1/memories/batch/",
         '{"memories": [' + memory_body(user='"a\\u0000"') + "]}", "memories"),
    Case("NUL in the search user", "POST", "/api/v1/search/",
         search_body(user='"a\\u0000"'), "user"),
    Case("BEL in the context room", "POST", "/api/v1/context/",
         '{"user": "alice", "room": "c\\u0007", "query": "q"}', "room"),
    Case("NUL in the prune user", "POST", "/api/v1/prune/",
         '{"dry_run": true, "user": "a\\u0000"}', "user"),
    # strings PostgreSQL cannot store, anywhere in a body
    Case("NUL in a metadata key", "POST", "/api/v1/memories/",
         memory_body(metadata='{"a\\u0000": 1}'), "metadata"),
    Case("lone surrogate in metadata", "POST", "/api/v1/memories/",
         memory_body(metadata='{"a": "\\ud800"}'), "metadata"),
    Case("lone surrogate in content", "POST", "/api/v1/memories/",
         memory_body(content='"x\\udfff"'), "content"),
    Case("lone surrogate in a context message", "POST", "/api/v1/context/",
         '{"user": "alice", "messages": [{"role": "user", "content": "\\ud83d"}]}', "messages"),
    # sizes: a 10 MB query text, a 10 MB query string, a body over the limit
    Case("a 10 MB search query", "POST", "/api/v1/search/",
         search_body(query='"' + "a" * TEN_MB + '"'), "query"),
    Case("a 10 MB query string", "GET", "/api/v1/memories/?user=" + "a" * TEN_MB, None,
         "limit", 413),
    Case("a body over the limit", "POST", "/api/v1/memories/batch/", "OVER_LIMIT", "limit",
         413),
    # not JSON
    Case("a form body", "POST", "/api/v1/memories/", "content=x", "detail", 415,
         "application/x-www-form-urlencoded"),
    Case("invalid JSON", "POST", "/api/v1/memories/", '{"user": ', "detail"),
    Case("invalid UTF-8", "POST", "/api/v1/memories/", "INVALID_UTF8", "detail"),
]  # fmt: skip

# The documents endpoints (ingestion); they run once their routes exist.
DOCUMENT_CASES = [
    Case("document metadata 5000 deep", "POST", "/api/v1/documents/",
         f'{{"text": "Some text.", "metadata": {DEEP}}}', "metadata"),
    Case("NUL in a document's user", "POST", "/api/v1/documents/",
         '{"text": "Some text.", "user": "a\\u0000"}', "user"),
    Case("NUL in the document id path", "GET", f"/api/v1/documents/{NUL}/", None,
         "document_id"),
    Case("NUL in the document chunks path", "GET", f"/api/v1/documents/a{NUL}/chunks/", None,
         "document_id"),
    Case("NUL in the documents user filter", "GET", f"/api/v1/documents/?user=a{NUL}", None,
         "user"),
    Case("documents cursor nested 1,400 deep", "GET",
         f"/api/v1/documents/?cursor={cursor_nested(1400)}", None, "cursor"),
]  # fmt: skip


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


def _raw_body(case: Case) -> bytes | None:
    if case.body == "OVER_LIMIT":
        limit = int(settings.MEMORYHUB["MAX_BODY_BYTES"])
        return memory_body(content='"' + "x" * (limit + 1) + '"').encode()
    if case.body == "INVALID_UTF8":
        return b'{"user": "\xff\xfe", "content": "x"}'
    if case.body == "IMPORT_1E39":
        return json.dumps(import_document(vector_first=1e39)).encode()
    return case.body.encode() if case.body is not None else None


def import_document(*, vector_first: float) -> dict[str, Any]:
    now = "2026-01-01T00:00:00Z"
    return {
        "format": "memoryhub-export",
        "version": 1,
        "users": [{"external_id": "imported", "name": "", "metadata": {}, "created_at": now}],
        "rooms": [],
        "agents": [],
        "memories": [
            {
                "id": str(uuid.uuid4()), "user": "imported", "room": None, "agent": None,
                "kind": "message", "role": "user", "content": "imported text",
                "content_json": {}, "metadata": {}, "importance": 0.5, "pinned": False,
                "confidence": 1.0, "status": "active", "source_ids": [],
                "created_at": now, "updated_at": now,
                "embeddings": [{
                    "space": {"provider": "local", "model": "all-MiniLM-L6-v2",
                              "dimension": DIMENSION},
                    "windows": [[vector_first] + [0.0] * (DIMENSION - 1)],
                }],
            }
        ],
    }  # fmt: skip


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
    body = _raw_body(case)
    request = getattr(world.client, case.method.lower())
    kwargs: dict[str, Any] = {"content_type": case.content_type} if body is not None else {}
    response = request(case.path, body, **kwargs) if body is not None else request(case.path)

    assert response.status_code == case.status, response.content[:500]
    assert response["Content-Type"].startswith("application/json"), response.content[:300]
    error = response.json()
    # the field itself, or a path into it (an import names memories[0].embeddings...)
    assert any(key == case.names or key.startswith((f"{case.names}[", f"{case.names}."))
               for key in error), error  # fmt: skip
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
    from rest_framework import serializers

    from memories.api.serializers import JSONObjectField

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
    from django.test import Client

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
