"""manage.py export_user and import_user: the API's documents, from and into files."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memories.models import EndUser, Memory, MemoryRevision
from tests.conftest import embed_pending


def run(*args):
    stdout, stderr = io.StringIO(), io.StringIO()
    call_command(*args, stdout=stdout, stderr=stderr)
    return stdout.getvalue(), stderr.getvalue()


def without_time(document):
    return {key: value for key, value in document.items() if key != "exported_at"}


def api_export(tenant, path, **params):
    response = tenant.client.get(f"/api/v1/{path}/export/", params)
    assert response.status_code == 200, response.json()
    return response.json()


@pytest.fixture
def remembered(owner):
    """Alice in rooms r1 and r2 and Bob in r1, with an archived turn and a summary of it."""
    items = [
        {"user": "alice", "room": "r1", "agent": "helper", "role": "user",
         "content": "Ich wohne in München", "metadata": {"lang": "de"}},
        {"user": "bob", "room": "r1", "role": "user", "content": "Hi from Bob"},
        {"user": "alice", "room": "r2", "kind": "fact", "content": "Alice lives in Munich",
         "importance": 0.8},
    ]  # fmt: skip
    response = owner.client.post("/api/v1/memories/batch/", {"memories": items})
    ids = [result["memory"]["id"] for result in response.json()["results"]]
    owner.client.patch(f"/api/v1/memories/{ids[0]}/", {"status": "archived"})
    summary = owner.client.post(
        "/api/v1/memories/",
        {"user": "alice", "room": "r1", "kind": "summary", "content": "Alice is in Munich."},
    ).json()["memory"]
    Memory.objects.filter(pk=summary["id"]).update(source_ids=ids[:1])
    return owner


def test_export_user_writes_the_apis_document_to_a_file(remembered, tmp_path):
    path = tmp_path / "alice.json"
    _, stderr = run("export_user", "--project", "owner", "alice", "-o", str(path))
    assert "Exported 3 memories of user 'alice'" in stderr
    written = json.loads(path.read_text(encoding="utf-8"))
    assert without_time(written) == without_time(api_export(remembered, "users/alice"))
    assert "München" in path.read_text(encoding="utf-8")  # UTF-8, not \u escapes


def test_export_user_writes_to_stdout_by_default_and_finds_a_project_by_id(remembered):
    stdout, _ = run("export_user", "--project", str(remembered.project.pk), "alice")
    assert without_time(json.loads(stdout)) == without_time(api_export(remembered, "users/alice"))


def test_export_user_room_and_vectors(remembered, provider):
    embed_pending()
    stdout, _ = run("export_user", "--project", "owner", "--room", "r1", "--vectors")
    exported = json.loads(stdout)
    assert exported["scope"] == {"type": "room", "id": "r1"}
    assert all(memory["embeddings"] for memory in exported["memories"])
    assert without_time(exported) == without_time(
        api_export(remembered, "rooms/r1", vectors="true")
    )


def test_import_user_restores_what_export_user_wrote(remembered, tmp_path):
    path = tmp_path / "alice.json"
    run("export_user", "--project", "owner", "alice", "-o", str(path))
    before = json.loads(path.read_text())
    remembered.client.delete("/api/v1/users/alice/")

    stdout, _ = run("import_user", "--project", "owner", str(path))
    assert "memories 3 created, 0 skipped" in stdout
    assert "users 1 created, 0 existing" in stdout
    assert without_time(api_export(remembered, "users/alice")) == without_time(before)
    imported = Memory.objects.filter(end_user__external_id="alice")
    actors = MemoryRevision.objects.filter(memory_id__in=imported, action="create").values_list(
        "actor", flat=True
    )
    assert "import_user" in set(actors)

    stdout, _ = run("import_user", "--project", "owner", str(path))
    assert "memories 0 created, 3 skipped" in stdout


def test_import_user_of_an_invalid_document_names_the_fields_and_writes_nothing(
    remembered, tmp_path
):
    exported = api_export(remembered, "users/alice")
    remembered.client.delete("/api/v1/users/alice/")
    exported["memories"][1]["kind"] = "memo"
    del exported["memories"][2]["content"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(exported))
    with pytest.raises(CommandError) as raised:
        run("import_user", "--project", "owner", str(path))
    message = str(raised.value)
    assert "Nothing was imported" in message
    assert "memories[1].kind: Must be one of" in message
    assert "memories[2].content: This field is required." in message
    assert not EndUser.objects.filter(external_id="alice").exists()


def test_import_user_of_a_file_that_is_not_json(owner, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"format": "memoryhub-export", ')
    with pytest.raises(CommandError, match="not a JSON document"):
        run("import_user", "--project", "owner", str(path))
    with pytest.raises(CommandError, match="Cannot read"):
        run("import_user", "--project", "owner", str(tmp_path / "missing.json"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("export_user", "--project", "nope", "alice"), "No project"),
        (("export_user", "--project", "owner", "nobody"), "No user 'nobody'"),
        (("export_user", "--project", "owner", "--room", "nowhere"), "No room 'nowhere'"),
        (("export_user", "--project", "owner"), "Give a user"),
        (("export_user", "--project", "owner", "alice", "--room", "r1"), "not both"),
        (("import_user", "--project", "nope", "x.json"), "No project"),
    ],
)
def test_wrong_arguments_are_command_errors(remembered, args, message):
    with pytest.raises(CommandError, match=message):
        run(*args)
