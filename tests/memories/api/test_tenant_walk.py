"""Another project's ids on every operation of the live schema: a 404, and nothing of the
owner's read or changed. The operations come from /api/schema/, so an endpoint added
later is walked without anyone editing this file (a new kind of path parameter fails
here until tests/memories/api/schema_walk.py has a factory for it)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.memories.api.schema_walk import (
    World,
    body_minimal,
    operations,
    project_rows,
    request_minimal,
    request_send,
    resolved,
    rows_changed,
    schema_load,
    unknown_parameters,
)

# Writes that make the object their path names when the caller's project has none: an
# external id is the project's own name for its object, so the outsider's request makes
# the outsider's room of that name and leaves the owner's alone (walked last, as the
# room they leave behind would answer the operations after them).
CREATES_IF_NEW = {"POST /api/v1/rooms/{external_id}/working/": "rooms/{external_id}"}
ID_KEYS = {"id", "run_id", "memory_id", "document_id", "external_id"}


@pytest.fixture
def walk(owner, outsider):
    """The live document, the owner's objects of every kind (project A) and the
    outsider's own (project B)."""
    document = schema_load(owner.client)
    missing = unknown_parameters(document)
    if missing:
        pytest.fail("\n".join(missing))
    tag = uuid.uuid4().hex[:8]
    return document, World.make(owner, f"a{tag}"), World.make(outsider, f"b{tag}")


def owned_state(tenant, world: World) -> tuple[Any, ...]:
    """All the tenant's rows, and what Redis holds of its room's working memory."""
    room = world.ids["rooms/{external_id}"][0]
    working = tenant.client.get(f"/api/v1/rooms/{room}/working/").json()
    return project_rows(tenant.project), working["results"]


def test_a_parameter_without_a_factory_is_named():
    document = {"paths": {"/api/v1/widgets/{widget_id}/": {"get": {}, "parameters": []}}}
    assert unknown_parameters(document) == [
        "add a factory for {widget_id} (widgets/{widget_id}, in GET /api/v1/widgets/{widget_id}/)"
        " to FACTORIES in tests/memories/api/schema_walk.py"
    ]


def test_another_projects_ids_are_a_404_on_every_operation(owner, outsider, walk):
    """Every operation with a path parameter, called with the outsider's read-write key on
    each of the owner's objects (and on mixes of the owner's and the outsider's own, for
    nested paths): 404. The same request on the outsider's own objects is a 2xx, so the
    404 comes from the scoping and not from a body the API refuses."""
    document, theirs, ours = walk
    before = owned_state(owner, theirs)
    walked = sorted(
        (operation for operation in operations(document) if operation.keys),
        key=lambda operation: operation.label in CREATES_IF_NEW,  # last: see there
    )
    assert set(CREATES_IF_NEW) <= {operation.label for operation in walked}, "stale entry"
    findings, sent = [], 0
    for operation in walked:
        for ids in theirs.combinations(operation, ours):
            response = request_send(outsider.client, document, operation, ids)
            findings += _cross_tenant_findings(outsider, operation, ids, response)
            sent += 1
        own = {key: values[0] for key, values in ours.ids.items()}
        control = request_send(outsider.client, document, operation, own)
        sent += 1
        if not 200 <= control.status_code < 300:
            findings.append("control: " + _seen(operation, own, control))
        if operation.method != "get":  # the next control starts from fresh objects
            ours = World.make(outsider, f"{ours.tag}x")
    print(f"walked {len(walked)} operations, {sent} requests")
    assert len(walked) >= 20  # the document has not lost its paths
    assert not findings, "\n".join(findings)
    after = owned_state(owner, theirs)
    assert not rows_changed(before[0], after[0]), rows_changed(before[0], after[0])
    assert before[1] == after[1]


def _cross_tenant_findings(outsider, operation, ids: dict[str, str], response) -> list[str]:
    """What is wrong with the outsider's answer on the owner's ids: anything but a 404,
    or for an operation that creates its object if new, anything but the outsider's own
    new object of that name (removed again, so that the walk goes on as before)."""
    key = CREATES_IF_NEW.get(operation.label)
    if key is None:
        return [] if response.status_code == 404 else [_seen(operation, ids, response)]
    url = f"/api/v1/{key.split('/', 1)[0]}/{ids[key]}/"
    made = outsider.client.get(url).status_code == 200
    outsider.client.delete(url)
    if 200 <= response.status_code < 300 and made:
        return []
    return [_seen(operation, ids, response) + f" (made the outsider's own: {made})"]


def test_no_operation_without_path_parameters_shows_another_projects_objects(owner, outsider, walk):
    """Every operation without a path parameter (lists, counts, search, context, writes)
    called by the outsider, plain and with the owner's user and room in the filters or
    the body that name them: nothing of the owner's in the answer, nothing of the owner's
    changed."""
    document, theirs, ours = walk
    before = owned_state(owner, theirs)
    named = {
        "user": theirs.ids["users/{external_id}"][0],
        "room": theirs.ids["rooms/{external_id}"][0],
    }
    flat = [operation for operation in operations(document) if not operation.keys]
    # plain first: the outsider has no object named as the owner's yet, so nothing in an
    # answer may carry the owner's names; then with them, where a write may make the
    # outsider's own user or room of that name (its echo is no leak)
    plain = [(operation, {}) for operation in flat]
    referring = [
        (operation, refer)
        for operation in flat
        for refer in _references(document, operation, named)
        if refer
    ]
    findings = []
    for operation, refer in plain + referring:
        response = _send_referring(outsider.client, document, operation, refer)
        if response.status_code >= 500:
            findings.append(f"{operation.label} {refer}: {response.status_code}")
        leaked = _leaks(response, theirs, echoes=set(named.values()) if refer else set())
        if leaked:
            findings.append(f"{operation.label} {refer}: {response.status_code} shows {leaked}")
    sent = len(plain) + len(referring)
    print(f"{sent} requests")
    assert sent >= 20
    assert not findings, "\n".join(findings)
    after = owned_state(owner, theirs)
    assert not rows_changed(before[0], after[0]), rows_changed(before[0], after[0])
    assert before[1] == after[1]


def test_a_memory_id_another_project_uses_neither_shows_nor_blocks(owner, outsider):
    memory_id = str(uuid.uuid4())
    mine = owner.client.post(
        "/api/v1/memories/", {"id": memory_id, "content": "the owner's"}, format="json"
    )
    assert mine.status_code == 201
    theirs = outsider.client.post(
        "/api/v1/memories/", {"id": memory_id, "content": "the outsider's"}, format="json"
    )
    assert theirs.status_code == 201, theirs.json()
    assert owner.client.get(f"/api/v1/memories/{memory_id}/").json()["content"] == "the owner's"
    assert outsider.client.get(f"/api/v1/memories/{memory_id}/").json()["content"] == (
        "the outsider's"
    )


def _references(document, operation, named: dict[str, str]) -> list[dict[str, str]]:
    """Each of the owner's objects the operation can be told of (a query parameter, or a
    property of its JSON body, of that name)."""
    names = {p["name"] for p in operation.spec.get("parameters", ()) if p["in"] == "query"}
    body = body_minimal(document, operation)
    if body is not None and body[0] == "application/json":
        content = operation.spec["requestBody"]["content"]["application/json"]
        names |= set(resolved(document, content["schema"]).get("properties", {}))
    return [{name: value} for name, value in named.items() if name in names]


def _send_referring(client, document, operation, refer: dict[str, str]):
    """The operation's minimal request with ``refer`` in its JSON body when it takes one,
    else in its query."""
    content = operation.spec.get("requestBody", {}).get("content", {})
    in_body = "application/json" in content
    query, fields = ({}, refer) if in_body else (refer, {})
    return request_minimal(client, document, operation, operation.path, query, fields)


def _leaks(response, theirs: World, echoes: set[str]) -> list[str]:
    """The owner's ids, or any text with the owner's tag, in a JSON answer (values the
    outsider sent itself excepted: an echo is not a leak)."""
    try:
        body = response.json()
    except (ValueError, TypeError):
        return []
    ids = theirs.all_ids()
    found = []
    for key, value in _values(body):
        text = str(value)
        if text in echoes:
            continue
        numeric = text.isdigit()
        if (text in ids and (not numeric or key in ID_KEYS)) or (
            isinstance(value, str) and theirs.tag in value
        ):
            found.append(f"{key}={text[:80]}")
    return found


def _values(body: Any, key: str = "") -> list[tuple[str, Any]]:
    if isinstance(body, dict):
        return [pair for k, v in body.items() for pair in _values(v, k)]
    if isinstance(body, list):
        return [pair for item in body for pair in _values(item, key)]
    return [(key, body)]


def _seen(operation, ids: dict[str, str], response) -> str:
    body = json.dumps(response.json())[:200] if response.content else ""
    return f"{operation.label} {ids}: {response.status_code} {body}"
