"""Walking the live OpenAPI document: its operations and the objects their path parameters
name, one object of every such kind made in a project through the API, minimal
schema-valid bodies, and a snapshot of everything a project owns (to show that another
tenant's requests changed none of it).

A path parameter is known by the path segment before it (``users/{external_id}`` is a
user, ``rooms/{external_id}`` a room): FACTORIES maps each to the function that makes
that kind of object. An endpoint added later with a new kind of parameter makes
``unknown_parameters`` name it, and the tests that walk the schema fail until a factory
is added here."""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.apps import apps
from django.db import models

from ingestion.services.pipeline import document_ingest
from memories.models import Project

SCHEMA_URL = "/api/schema/?format=json"
METHODS = ("get", "post", "put", "patch", "delete")
MEMORY_KINDS = ("message", "summary", "fact", "knowledge", "relationship", "goal")
APPS = ("memories", "ingestion", "synopsis")  # the apps whose rows belong to a project
RELATIONSHIP = {"subject": "walker", "predicate": "walks", "object": "the schema"}
PARAMETER = re.compile(r"([^/{}]+)/\{([^/{}]+)\}")
# What an operation needs beyond its schema's minimum (a rule across fields the schema
# cannot state), so that the minimal request gets past validation to the objects
BODY_EXTRAS: dict[str, dict[str, Any]] = {
    "POST /api/v1/context/": {"query": "walk"},  # a query or messages
    "POST /api/v1/import/": {"memories": []},  # its memories' users must be in the document
}


@dataclass(frozen=True)
class Operation:
    """One method on one path of the document."""

    method: str
    path: str
    spec: dict[str, Any] = field(repr=False, compare=False)

    @property
    def label(self) -> str:
        return f"{self.method.upper()} {self.path}"

    @property
    def keys(self) -> list[str]:
        """Its path parameters as ``segment/{name}``, outermost first."""
        return [key for key, _ in path_parameters(self.path)]

    def url(self, ids: dict[str, str]) -> str:
        """The path with each parameter replaced by the id given for its key."""
        url = self.path
        for key in self.keys:
            segment, name = key.split("/", 1)
            url = url.replace(f"{segment}/{name}", f"{segment}/{ids[key]}", 1)
        return url


def path_parameters(path: str) -> list[tuple[str, str]]:
    """(key, name) of each parameter in a path: ("users/{external_id}", "external_id")."""
    return [(f"{segment}/{{{name}}}", name) for segment, name in PARAMETER.findall(path)]


def schema_load(client: Any) -> dict[str, Any]:
    """The document /api/schema/ serves, read through ``client`` (a tenant's API client)."""
    response = client.get(SCHEMA_URL)
    assert response.status_code == 200, response.content[:300]
    return response.json()  # type: ignore[no-any-return]


def operations(document: dict[str, Any]) -> list[Operation]:
    return [
        Operation(method, path, spec)
        for path, item in document["paths"].items()
        for method, spec in item.items()
        if method in METHODS
    ]


def unknown_parameters(document: dict[str, Any]) -> list[str]:
    """What the walk cannot fill in: one line per path parameter without a factory."""
    return [
        f"add a factory for {key.split('/', 1)[1]} ({key}, in {operation.label}) "
        "to FACTORIES in tests/memories/api/schema_walk.py"
        for operation in operations(document)
        for key in operation.keys
        if key not in FACTORIES
    ]


# --- minimal schema-valid values ----------------------------------------------------------


def resolved(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with $ref and a single-branch allOf (drf-spectacular's enum wrapper) taken
    in; oneOf/anyOf by their first branch."""
    while True:
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[1]
            schema = {**document["components"]["schemas"][name], **_siblings(schema, "$ref")}
        elif len(schema.get("allOf", ())) == 1:
            schema = {**schema["allOf"][0], **_siblings(schema, "allOf")}
        elif schema.get("oneOf") or schema.get("anyOf"):
            branches = schema.get("oneOf") or schema["anyOf"]
            schema = {**branches[0], **_siblings(schema, "oneOf", "anyOf")}
        else:
            return schema


def _siblings(schema: dict[str, Any], *without: str) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in without}


def value_minimal(document: dict[str, Any], schema: dict[str, Any], *, touch: bool = False) -> Any:
    """The smallest value ``schema`` accepts; with ``touch``, an object that has no
    required property gets its first property filled in all the same (a PATCH body that
    changes something, so a request that reached the wrong row would show)."""
    schema = resolved(document, schema)
    if "enum" in schema:
        return next(value for value in schema["enum"] if value not in (None, ""))
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        names = [n for n in schema.get("required", ()) if not properties.get(n, {}).get("readOnly")]
        if not names and touch:
            names = [n for n, s in properties.items() if _fillable(document, s)][:1]
        return {name: value_minimal(document, properties[name], touch=touch) for name in names}
    if kind == "array":
        count = max(schema.get("minItems", 0), 1 if touch else 0)
        return [value_minimal(document, schema.get("items", {})) for _ in range(count)]
    if kind == "string":
        return _string(schema)
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1)
        value = min(max(low, 1), schema.get("maximum", low if low > 1 else 1))
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return schema.get("default", False)
    return "walk"  # untyped: any JSON value


def _fillable(document: dict[str, Any], schema: dict[str, Any]) -> bool:
    schema = resolved(document, schema)
    return not schema.get("readOnly") and ("type" in schema or "enum" in schema)


def _string(schema: dict[str, Any]) -> str:
    kind = schema.get("format")
    if kind == "uuid":
        return str(uuid.uuid4())
    if kind == "date-time":
        return "2026-01-01T00:00:00Z"
    if kind == "date":
        return "2026-01-01"
    text = "walk".ljust(schema.get("minLength", 0), "k")
    return text[: schema.get("maxLength", len(text))]


def body_minimal(document: dict[str, Any], operation: Operation) -> tuple[str, Any] | None:
    """(media type, body) for an operation that takes a body: JSON when it accepts JSON."""
    content = operation.spec.get("requestBody", {}).get("content", {})
    if not content:
        return None
    media = "application/json" if "application/json" in content else next(iter(content))
    body = value_minimal(document, content[media].get("schema", {}), touch=True)
    return media, {**body, **BODY_EXTRAS.get(operation.label, {})}


def query_minimal(document: dict[str, Any], operation: Operation) -> dict[str, Any]:
    """The required query parameters, each with its smallest value."""
    return {
        p["name"]: value_minimal(document, p.get("schema", {}))
        for p in operation.spec.get("parameters", ())
        if p["in"] == "query" and p.get("required")
    }


def request_send(
    client: Any, document: dict[str, Any], operation: Operation, ids: dict[str, str]
) -> Any:
    """Send ``operation`` with ``client`` on the objects ``ids`` names, a minimal body."""
    return request_minimal(client, document, operation, operation.url(ids), {}, {})


def request_minimal(
    client: Any,
    document: dict[str, Any],
    operation: Operation,
    url: str,
    query: dict[str, str],
    fields: dict[str, Any],
) -> Any:
    """Send ``operation`` to ``url`` with its minimal query and body, ``query`` added to
    the query string and ``fields`` to a JSON body."""
    query = {**query_minimal(document, operation), **query}
    if query:
        url += "?" + urlencode(query, doseq=True)
    body = body_minimal(document, operation)
    if body is None:
        return getattr(client, operation.method)(url)
    media, data = body
    if media == "application/json":
        return getattr(client, operation.method)(url, {**data, **fields}, format="json")
    return getattr(client, operation.method)(url, data, format="multipart")


# --- objects of every kind a path parameter names ------------------------------------------


def _created(response: Any, *statuses: int) -> dict[str, Any]:
    assert response.status_code in statuses, (response.status_code, response.content[:300])
    return response.json()  # type: ignore[no-any-return]


def user_make(tenant: Any, world: World) -> list[str]:
    external_id = f"{world.tag}-user"
    _created(tenant.client.post("/api/v1/users/", {"external_id": external_id}), 201)
    # a synopsis part written by hand, so the synopsis endpoints have one to show or keep
    body = {"identity": {"text": f"{world.tag} likes tea.", "locked": False}}
    response = tenant.client.patch(f"/api/v1/users/{external_id}/synopsis/", body, format="json")
    _created(response, 200)
    return [external_id]


def room_make(tenant: Any, world: World) -> list[str]:
    external_id = f"{world.tag}-room"
    _created(tenant.client.post("/api/v1/rooms/", {"external_id": external_id}), 201)
    return [external_id]


def memory_make(tenant: Any, world: World) -> list[str]:
    """One memory of each kind, of the world's user and room, and a document's chunk."""
    ids = []
    for kind in MEMORY_KINDS:
        body = {
            "content": f"{world.tag} {kind}: the walk was here",
            "kind": kind,
            "user": world.ids["users/{external_id}"][0],
            "room": world.ids["rooms/{external_id}"][0],
            "content_json": RELATIONSHIP if kind == "relationship" else {},
        }
        response = tenant.client.post("/api/v1/memories/", body, format="json")
        ids.append(_created(response, 201)["memory"]["id"])
    return ids


def working_item_make(tenant: Any, world: World) -> list[str]:
    room = world.ids["rooms/{external_id}"][0]
    url = f"/api/v1/rooms/{room}/working/"
    item = _created(tenant.client.post(url, {"content": f"{world.tag} tool output"}), 201)
    return [item["id"]]


def prune_run_make(tenant: Any, world: World) -> list[str]:
    """A dry run: recorded at once, changes nothing."""
    run = _created(tenant.client.post("/api/v1/prune/", {}, format="json"), 200)
    return [str(run["id"])]


def document_make(tenant: Any, world: World) -> list[str]:
    """A small text uploaded as JSON and ingested here and now, so it has chunks."""
    body = {"text": f"# {world.tag}\n\nThe walk was here.", "source": f"{world.tag}.md"}
    document = _created(tenant.client.post("/api/v1/documents/", body, format="json"), 202)
    for _ in range(100):
        if document_ingest(document_id=document["id"]):
            break
    chunks = _created(tenant.client.get(f"/api/v1/documents/{document['id']}/chunks/"), 200)
    assert chunks["results"], chunks  # its chunks are knowledge memories: walk them too
    world.ids["memories/{memory_id}"] += [chunk["id"] for chunk in chunks["results"]]
    return [document["id"]]


FACTORIES: dict[str, Callable[[Any, World], list[str]]] = {
    "users/{external_id}": user_make,
    "rooms/{external_id}": room_make,
    "memories/{memory_id}": memory_make,
    "working/{item_id}": working_item_make,
    "runs/{run_id}": prune_run_make,
    "documents/{document_id}": document_make,
}


@dataclass
class World:
    """A tenant's objects of every kind FACTORIES knows, by parameter key."""

    tag: str
    ids: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def make(cls, tenant: Any, tag: str) -> World:
        """Each factory once, in FACTORIES' order (later ones use earlier objects)."""
        world = cls(tag)
        for key, factory in FACTORIES.items():
            world.ids[key] = factory(tenant, world)
        return world

    def all_ids(self) -> set[str]:
        return {value for values in self.ids.values() for value in values}

    def combinations(self, operation: Operation, own: World) -> Iterator[dict[str, str]]:
        """Every filling of the operation's parameters with this world's ids or ``own``'s
        (the caller's), at least one of them this world's."""
        keys = operation.keys
        choices = [[*self.ids[key], own.ids[key][0]] for key in keys]
        for chosen in itertools.product(*choices):
            filled = dict(zip(keys, chosen, strict=True))
            if any(filled[key] in self.ids[key] for key in keys):
                yield filled


# --- what a project owns --------------------------------------------------------------------


def _project_lookup(model: type[models.Model]) -> str | None:
    """The ORM path from ``model`` to its Project: itself, a foreign key, or one hop on."""
    if model is Project:
        return "pk"
    relations = [f for f in model._meta.get_fields() if f.many_to_one and f.concrete]
    for relation in relations:
        if relation.related_model is Project:
            return relation.name
    for relation in relations:
        target = relation.related_model
        assert isinstance(target, type)
        for hop in target._meta.get_fields():
            if hop.many_to_one and hop.concrete and hop.related_model is Project:
                return f"{relation.name}__{hop.name}"
    return None


def project_rows(project: Project) -> dict[str, dict[Any, dict[str, Any]]]:
    """Every row of the project's apps that belongs to ``project``: by model, by pk."""
    rows = {}
    for model in apps.get_models():
        lookup = _project_lookup(model)
        if model._meta.app_label in APPS and lookup is not None:
            pk = model._meta.pk.attname  # type: ignore[union-attr]
            values = model._default_manager.filter(**{lookup: project.pk}).values()
            rows[model._meta.label] = {row[pk]: row for row in values}
    return rows


def rows_changed(
    before: dict[str, dict[Any, dict[str, Any]]], after: dict[str, dict[Any, dict[str, Any]]]
) -> list[str]:
    """What differs, a line per model: the pks of rows added, removed or changed."""
    lines = []
    for label in sorted(set(before) | set(after)):
        old, new = before.get(label, {}), after.get(label, {})
        added, removed = new.keys() - old.keys(), old.keys() - new.keys()
        changed = [pk for pk in old.keys() & new.keys() if old[pk] != new[pk]]
        if added or removed or changed:
            lines.append(f"{label}: added {added}, removed {removed}, changed {changed}")
    return lines
