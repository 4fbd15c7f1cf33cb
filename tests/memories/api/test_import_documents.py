"""POST /api/v1/import/ with documents written by hand: each malformed one is a 400
naming the field and writes nothing; a minimal one gets the defaults."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import EndUser, Memory, MemoryRevision
from tests.memories.api.export_calls import IMPORT, import_, user_export


def minimal(**memory):
    return {
        "format": "memoryhub-export",
        "version": 1,
        "users": [{"external_id": "carol"}],
        "rooms": [],
        "agents": [],
        "memories": [
            {"id": str(uuid.uuid4()), "user": "carol", "content": "first"},
            {"id": str(uuid.uuid4()), "user": "carol", "content": "second", **memory},
        ],
    }


def broken(change):
    document = minimal()
    change(document)
    return document


@pytest.mark.parametrize(
    ("document", "path", "message"),
    [
        ([1, 2], "document", "Must be a JSON object"),
        (broken(lambda d: d.update(format="something-else")), "format", "not a MemoryHub export"),
        (broken(lambda d: d.update(version=2)), "version", "Unsupported version"),
        (broken(lambda d: d.pop("memories")), "memories", "required"),
        (broken(lambda d: d.update(memories={"a": 1})), "memories", "Must be a list"),
        (broken(lambda d: d["memories"].append("text")), "memories[2]", "JSON object"),
        (minimal(kind="memo"), "memories[1].kind", "Must be one of"),
        (
            minimal(kind="relationship", content_json={"subject": "Carol", "predicate": "sister"}),
            "memories[1].content_json.object",
            "Required for a relationship",
        ),
        (
            minimal(kind="goal", content_json={"status": "paused"}),
            "memories[1].content_json.status",
            "Must be one of",
        ),
        (minimal(pinned="yes"), "memories[1].pinned", ""),
        (minimal(role="robot"), "memories[1].role", "Must be one of"),
        (minimal(status="gone"), "memories[1].status", "Must be one of"),
        (broken(lambda d: d["memories"][1].pop("content")), "memories[1].content", "required"),
        (minimal(content="   "), "memories[1].content", "blank"),
        (minimal(content=["a list"]), "memories[1].content", "string"),
        (minimal(content="x" * 32_001), "memories[1].content", "32000"),
        (minimal(metadata=[1]), "memories[1].metadata", "JSON object"),
        (minimal(metadata={"k": "x" * 20_000}), "memories[1].metadata", "bytes"),
        (minimal(content_json={"k": "a\x00b"}), "memories[1].content_json", "Null"),
        (minimal(id="not-a-uuid"), "memories[1].id", "UUID"),
        (minimal(importance=1.5), "memories[1].importance", "between 0 and 1"),
        (minimal(confidence="high"), "memories[1].confidence", "number"),
        (minimal(access_count=-1), "memories[1].access_count", "between"),
        (minimal(created_at="yesterday"), "memories[1].created_at", "ISO 8601"),
        (minimal(source_ids=["m1"]), "memories[1].source_ids", "UUID"),
        (minimal(unique="yes"), "memories[1].unique", "true or false"),
        (minimal(user="dave"), "memories[1].user", "not among the document's users"),
        (minimal(room="r/1"), "memories[1].room", "'/'"),
        (
            broken(lambda d: d["users"].append({"external_id": "carol"})),
            "users[1].external_id",
            "Duplicate of users[0]",
        ),
        (
            broken(lambda d: d["memories"][1].update(id=d["memories"][0]["id"])),
            "memories[1].id",
            "Duplicate of memories[0]",
        ),
        (
            broken(lambda d: d["rooms"].append({"external_id": "r9", "agent": "x"})),
            "rooms[0].agent",
            "not among the document's agents",
        ),
        (
            broken(lambda d: d["rooms"].append({"external_id": "r9", "settings": {"search": {}}})),
            "rooms[0].settings.search",
            "Rooms override only",
        ),
        (
            broken(
                lambda d: d["rooms"].append(
                    {"external_id": "r9", "settings": {"buffer": {"max_size": "big"}}}
                )
            ),
            "rooms[0].settings.buffer.max_size",
            "integer",
        ),
        (
            minimal(
                embeddings=[
                    {
                        "space": {"provider": "hashing", "model": "m", "dimension": 3},
                        "windows": [[0.1, 0.2]],
                    }
                ]
            ),
            "memories[1].embeddings[0].windows[0]",
            "Must be 3 numbers",
        ),
    ],
)
def test_a_malformed_document_is_a_400_naming_the_field_and_writes_nothing(
    owner, document, path, message
):
    response = owner.client.post(IMPORT, document)
    assert response.status_code == 400, response.json()
    errors = response.json()
    assert path in errors, errors
    assert message in " ".join(errors[path]), errors
    assert not EndUser.objects.exists()
    assert not Memory.objects.exists()
    assert not MemoryRevision.objects.exists()


def test_every_bad_field_is_named_at_once(owner):
    document = minimal(kind="memo", importance=7)
    document["memories"][0]["status"] = "gone"
    errors = owner.client.post(IMPORT, document).json()
    assert set(errors) == {"memories[1].kind", "memories[1].importance", "memories[0].status"}


def test_a_body_that_is_not_json_is_a_400(owner):
    response = owner.client.post(IMPORT, "{not json", content_type="application/json")
    assert response.status_code == 400
    assert not Memory.objects.exists()


def test_a_hand_written_document_gets_defaults(owner):
    document = minimal()
    report = import_(owner, document)
    assert report["memories"] == {"created": 2, "skipped": 0}
    memory = Memory.objects.get(pk=document["memories"][1]["id"])
    assert (memory.kind, memory.status, memory.importance) == ("message", "active", 0.5)
    assert memory.updated_at == memory.created_at
    assert timezone.now() - memory.created_at < timedelta(minutes=1)


def test_pinned_travels_with_the_memory(owner):
    document = minimal(pinned=True)
    import_(owner, document)
    exported = user_export(owner, "carol")
    assert [m["pinned"] for m in exported["memories"]] == [False, True]
