"""The client's types against the hub's OpenAPI schema (generated here, in-process): a
field the schema gains that a client type lacks fails here, naming both; a field a newer
hub sends that the client does not know is kept in ``extra``, never an error."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from drf_spectacular.generators import SchemaGenerator
from memoryhub_client import Memory, MemoryHub
from memoryhub_client.models import MODELS, Model

# answers the client unwraps: a batch into its list, a count or a deletion into an int
UNWRAPPED = {"MemoryBatchOutput", "CountOutput", "DeletedOutput", "WorkingClearedOutput"}
# response components the client hands over as plain dicts, on purpose: an export is
# imported back whole; settings values are a dict of sections described by `schema`
RAW = {
    "ExportDocument",
    "ExportScope",
    "ExportUser",
    "ExportRoom",
    "ExportAgent",
    "ExportMemory",
    "ExportEmbedding",
    "ExportSpace",
    "ProjectSettingsValues",
}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-any-return]


def unknown_fields(schema: dict[str, Any], models: tuple[type[Model], ...]) -> list[str]:
    """``Component.field (client type X)`` for each schema field a mapped type lacks."""
    components = schema["components"]["schemas"]
    problems = []
    for model in models:
        known = {field.name for field in dataclasses.fields(model)}
        for name in model.__schema__:
            if name not in components:
                problems.append(
                    f"{name}: no such component any more (client type {model.__name__})"
                )
                continue
            for field in components[name].get("properties", {}):
                if field not in known:
                    problems.append(f"{name}.{field} (client type {model.__name__})")
    return problems


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"].rsplit("/", 1)[-1]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def answered_components(schema: dict[str, Any]) -> set[str]:
    """Every object component a 2xx answer of /api/v1/ can hold, nested ones too."""
    components = schema["components"]["schemas"]
    todo = [
        ref
        for path, operations in schema["paths"].items()
        if path.startswith("/api/v1/")
        for operation in operations.values()
        if isinstance(operation, dict)
        for status, answer in operation.get("responses", {}).items()
        if status.startswith("2")
        for ref in _refs(answer)
    ]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_refs(components[name]))
    return {name for name in seen if "properties" in components[name]}


def test_every_schema_field_of_a_mapped_component_is_known(schema) -> None:
    assert unknown_fields(schema, MODELS) == []


def test_every_answered_component_is_mapped(schema) -> None:
    mapped = {name for model in MODELS for name in model.__schema__}
    pages = {name for name in answered_components(schema) if name.endswith("PageOutput")}
    settings_values = {
        name for name in answered_components(schema) if name.endswith("SettingsValues")
    }
    unmapped = answered_components(schema) - mapped - RAW - UNWRAPPED - pages - settings_values
    assert unmapped == set(), f"components the client has no type for: {sorted(unmapped)}"


def test_the_check_names_a_new_field(schema) -> None:
    drifted = {**schema, "components": {"schemas": {**schema["components"]["schemas"]}}}
    memory = drifted["components"]["schemas"]["MemoryOutput"]
    drifted["components"]["schemas"]["MemoryOutput"] = {
        **memory,
        "properties": {**memory["properties"], "mood": {"type": "string"}},
    }
    assert unknown_fields(drifted, MODELS) == ["MemoryOutput.mood (client type Memory)"]


def test_an_unknown_field_is_kept_in_extra() -> None:
    memory = Memory.from_json({"id": "m1", "content": "hi", "mood": "glad", "kind": "fact"})
    assert (memory.kind, memory.extra) == ("fact", {"mood": "glad"})


class Newer(httpx.BaseTransport):
    """A newer hub: every memory it returns has a field this client does not know."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        response.read()
        data = response.json()
        if isinstance(data, dict) and "memory" in data:
            data["memory"]["sentiment"] = {"score": 0.9}
        return httpx.Response(response.status_code, json=data)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.django_db(transaction=True)
def test_a_newer_hubs_answer_does_not_break_the_client(live_server, owner) -> None:
    with MemoryHub(live_server.url, owner.raw_key, transport=Newer()) as hub:
        created = hub.memories.add("I adopted a cat", user="alice")
    assert created.memory.content == "I adopted a cat"
    assert created.memory.extra == {"sentiment": {"score": 0.9}}
