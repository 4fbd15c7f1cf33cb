"""The hostile input cases of test_hostile_input.py: one list of (method, path, body)
cases, each naming the field (or the limit) its 4xx error must carry. An endpoint added
later adds its own here (the documents endpoints are listed already and run once their
routes exist)."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings

MEMORY_ID = "3f1c2a9e-0b7d-4c55-9e51-7a1d2c3b4a50"
DOCUMENT_ID = "8a6d1f0e-52c4-4b3a-9f7e-1d2c3b4a5e60"
DIMENSION = int(settings.EMBEDDING["DIMENSION"])
NUL, BELL = "%00", "%07"  # as they arrive in a path or query string


def nested_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def nested_list(depth: int) -> str:
    return "[" * depth + "]" * depth


def cursor_nested(depth: int) -> str:
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
MEMORIES, BATCH, SEARCH = "/api/v1/memories/", "/api/v1/memories/batch/", "/api/v1/search/"
USERS, ROOMS, CONTEXT = "/api/v1/users/", "/api/v1/rooms/", "/api/v1/context/"
IMPORT, PRUNE, DOCUMENTS = "/api/v1/import/", "/api/v1/prune/", "/api/v1/documents/"
MEMORY, ROOM = f"/api/v1/memories/{MEMORY_ID}/", "/api/v1/rooms/chat-1/"


def get(name: str, path: str, names: str) -> Case:
    return Case(name, "GET", path, None, names)


def post(name: str, path: str, body: str, names: str, *more: Any) -> Case:
    return Case(name, "POST", path, body, names, *more)


CASES = [
    # JSON nested too deep: in fields, in the body, in lists
    post("metadata 5000 deep, create", MEMORIES, memory_body(metadata=DEEP), "metadata"),
    Case("metadata 5000 deep, PATCH", "PATCH", MEMORY, f'{{"metadata": {DEEP}}}', "metadata"),
    post("content_json 5000 deep", MEMORIES, memory_body(content_json=DEEP), "content_json"),
    post("search metadata 5000 deep", SEARCH, search_body(metadata=DEEP), "metadata"),
    post(
        "metadata holding a list 50,000 deep",
        MEMORIES,
        memory_body(metadata='{"a": ' + nested_list(50_000) + "}"),
        "metadata",
    ),
    post("a body that is a list 50,000 deep", MEMORIES, nested_list(50_000), "detail"),
    post(
        "batch item metadata 5000 deep",
        BATCH,
        '{"memories": [' + memory_body(metadata=DEEP) + "]}",
        "memories",
    ),
    post(
        "metadata 33 levels (one past the limit)",
        MEMORIES,
        memory_body(metadata=nested_object(32)),
        "metadata",
    ),
    post(
        "user metadata 5000 deep",
        USERS,
        f'{{"external_id": "bob", "metadata": {DEEP}}}',
        "metadata",
    ),
    Case("room settings 5000 deep", "PATCH", ROOM, f'{{"settings": {DEEP}}}', "settings"),
    post(
        "context messages 5000 deep",
        CONTEXT,
        f'{{"user": "alice", "messages": {DEEP}}}',
        "messages",
    ),
    post(
        "buffer search filter 5000 deep",
        "/api/v1/rooms/chat-1/buffer/search/",
        f'{{"query": "cats", "filter_metadata": {DEEP}}}',
        "filter_metadata",
    ),
    post(
        "working item metadata 5000 deep",
        "/api/v1/rooms/chat-1/working/",
        f'{{"content": "note", "metadata": {DEEP}}}',
        "metadata",
    ),
    post(
        "import document 5000 deep",
        IMPORT,
        f'{{"format": "memoryhub-export", "version": 1, "memories": [{DEEP}]}}',
        "memories",
    ),
    get(
        "cursor nested 1,400 deep",
        f"/api/v1/memories/?cursor={cursor_nested(1400)[:3000]}",
        "cursor",
    ),
    get(
        "cursor of a deep list within its length",
        f"/api/v1/memories/?cursor={cursor_nested(100)}",
        "cursor",
    ),
    # vectors: finite doubles outside float32, wrong lengths
    post("embedding 1e39", SEARCH, search_body(embedding=vector("1e39")), "embedding"),
    post("embedding -3.5e38", SEARCH, search_body(embedding=vector("-3.5e38")), "embedding"),
    post("embedding []", SEARCH, search_body(embedding="[]"), "embedding"),
    post(
        "embedding of 200,000 numbers",
        SEARCH,
        search_body(embedding="[" + ",".join(["0.5"] * 200_000) + "]"),
        "embedding",
    ),
    post("embedding NaN", SEARCH, search_body(embedding=vector("NaN")), "detail"),
    post("embedding Infinity", SEARCH, search_body(embedding=vector("Infinity")), "detail"),
    post(
        "embedding 1e400 (a double's overflow)",
        SEARCH,
        search_body(embedding=vector("1e400")),
        "embedding",
    ),
    post("import vectors 1e39", IMPORT, "IMPORT_1E39", "memories"),
    # NUL and control characters in ids: the path, filters, bodies
    *[
        Case(f"NUL in the {what} path, {method}", method, path, body, "external_id")
        for what, path in (
            ("user", f"/api/v1/users/al{NUL}ice/"),
            ("room", f"/api/v1/rooms/chat{NUL}1/"),
        )
        for method, body in (("GET", None), ("PATCH", '{"name": "x"}'), ("DELETE", None))
    ],
    get("BEL in the user path", f"/api/v1/users/al{BELL}ice/", "external_id"),
    get("NUL in the synopsis path", f"/api/v1/users/a{NUL}/synopsis/", "external_id"),
    get("NUL in the export path", f"/api/v1/users/a{NUL}/export/", "external_id"),
    get("NUL in the buffer path", f"/api/v1/rooms/a{NUL}/buffer/", "external_id"),
    post(
        "NUL in a new working room",
        f"/api/v1/rooms/new{NUL}/working/",
        '{"content": "note"}',
        "external_id",
    ),
    Case(
        "NUL in the working item path",
        "DELETE",
        f"/api/v1/rooms/chat-1/working/x{NUL}/",
        None,
        "item_id",
    ),
    get("NUL in the memory id path", f"/api/v1/memories/{NUL}/", "memory_id"),
    get("NUL in the revisions path", f"/api/v1/memories/{NUL}/revisions/", "memory_id"),
    get(
        "NUL in the users external_id filter",
        f"/api/v1/users/?external_id=al{NUL}ice",
        "external_id",
    ),
    get("NUL in the rooms external_id filter", f"/api/v1/rooms/?external_id=c{NUL}", "external_id"),
    get(
        "ESC in the users external_id filter", "/api/v1/users/?external_id=al%1Bice", "external_id"
    ),
    get("NUL in the memories user filter", f"/api/v1/memories/?user=a{NUL}", "user"),
    get("BEL in the memories room filter", f"/api/v1/memories/?room=a{BELL}", "room"),
    get("BEL in the count user filter", f"/api/v1/memories/count/?user=a{BELL}", "user"),
    Case(
        "NUL in the bulk delete room filter",
        "DELETE",
        f"/api/v1/memories/?room=a{NUL}",
        None,
        "room",
    ),
    get("NUL in any query parameter", f"/api/v1/settings/?x=a{NUL}", "x"),
    post("NUL in a body user", MEMORIES, memory_body(user='"al\\u0000ice"'), "user"),
    post("BEL in a body room", MEMORIES, memory_body(room='"chat\\u00071"'), "room"),
    post("C1 control in a body agent", MEMORIES, memory_body(agent='"b\\u009bot"'), "agent"),
    post("NUL in a new user's external_id", USERS, '{"external_id": "b\\u0000b"}', "external_id"),
    post("tab in a new room's external_id", ROOMS, '{"external_id": "r\\t1"}', "external_id"),
    post(
        "NUL in a batch item's user",
        BATCH,
        '{"memories": [' + memory_body(user='"a\\u0000"') + "]}",
        "memories",
    ),
    post("NUL in the search user", SEARCH, search_body(user='"a\\u0000"'), "user"),
    post(
        "BEL in the context room",
        CONTEXT,
        '{"user": "alice", "room": "c\\u0007", "query": "q"}',
        "room",
    ),
    post("NUL in the prune user", PRUNE, '{"dry_run": true, "user": "a\\u0000"}', "user"),
    # strings PostgreSQL cannot store, anywhere in a body
    post("NUL in a metadata key", MEMORIES, memory_body(metadata='{"a\\u0000": 1}'), "metadata"),
    post(
        "lone surrogate in metadata", MEMORIES, memory_body(metadata='{"a": "\\ud800"}'), "metadata"
    ),
    post("lone surrogate in content", MEMORIES, memory_body(content='"x\\udfff"'), "content"),
    post(
        "lone surrogate in a context message",
        CONTEXT,
        '{"user": "alice", "messages": [{"role": "user", "content": "\\ud83d"}]}',
        "messages",
    ),
    # sizes: a 10 MB query text, a 10 MB query string, a body over the limit
    post("a 10 MB search query", SEARCH, search_body(query='"' + "a" * TEN_MB + '"'), "query"),
    Case(
        "a 10 MB query string", "GET", "/api/v1/memories/?user=" + "a" * TEN_MB, None, "limit", 413
    ),
    post("a body over the limit", BATCH, "OVER_LIMIT", "limit", 413),
    # not JSON
    post("a form body", MEMORIES, "content=x", "detail", 415, "application/x-www-form-urlencoded"),
    post("invalid JSON", MEMORIES, '{"user": ', "detail"),
    post("invalid UTF-8", MEMORIES, "INVALID_UTF8", "detail"),
]

# The documents endpoints (ingestion); they run once their routes exist.
DOCUMENT_CASES = [
    post(
        "document metadata 5000 deep",
        DOCUMENTS,
        f'{{"text": "Some text.", "metadata": {DEEP}}}',
        "metadata",
    ),
    post(
        "NUL in a document's user", DOCUMENTS, '{"text": "Some text.", "user": "a\\u0000"}', "user"
    ),
    get("NUL in the document id path", f"/api/v1/documents/{NUL}/", "document_id"),
    get("NUL in the document chunks path", f"/api/v1/documents/a{NUL}/chunks/", "document_id"),
    get("NUL in the documents user filter", f"/api/v1/documents/?user=a{NUL}", "user"),
    get(
        "documents cursor nested 1,400 deep",
        f"/api/v1/documents/?cursor={cursor_nested(1400)}",
        "cursor",
    ),
]


def case_body(case: Case) -> bytes | None:
    """The case's body as sent: its JSON text, or what one of the names stands for."""
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
                "id": str(uuid.uuid4()),
                "user": "imported",
                "room": None,
                "agent": None,
                "kind": "message",
                "role": "user",
                "content": "imported text",
                "content_json": {},
                "metadata": {},
                "importance": 0.5,
                "pinned": False,
                "confidence": 1.0,
                "status": "active",
                "source_ids": [],
                "created_at": now,
                "updated_at": now,
                "embeddings": [
                    {
                        "space": {
                            "provider": "local",
                            "model": "all-MiniLM-L6-v2",
                            "dimension": DIMENSION,
                        },
                        "windows": [[vector_first] + [0.0] * (DIMENSION - 1)],
                    }
                ],
            }
        ],
    }
