"""The memory admin's actions and forms change memories through the services: each
change is recorded with the operator's name, new text is re-embedded, and the export
is the API's JSON of exactly the selected memories."""

from __future__ import annotations

import hashlib
import json

from django.contrib.admin.models import LogEntry

from memories.models import Embedding, EndUser, Memory, MemoryRevision
from memories.services import embedding as pipeline
from memories.services.embedding import embedding_enqueue
from memories.services.memories import MemoryInput
from tests.memories.admin.conftest import write
from tests.memories.admin.test_project_settings import inline_management

LIST = "/admin/memories/memory/"


def act(client, action, memories, url=LIST, **extra):  # type: ignore[no-untyped-def]
    selected = [str(memory.pk) for memory in memories]
    return client.post(url, {"action": action, "_selected_action": selected, **extra})


def three(owner):  # type: ignore[no-untyped-def]
    return write(
        owner.project,
        MemoryInput(content="Maria is allergic to peanuts", user="maria", room="chat-1"),
        MemoryInput(content="Maria lives in Lisbon", kind="fact", user="maria"),
        MemoryInput(content="Bob likes green tea", user="bob"),
    )


def operator_revisions(action: str) -> list[MemoryRevision]:
    return list(MemoryRevision.objects.filter(action=action, actor_type="operator", actor="admin"))


def test_re_embed_drops_the_vectors_sets_pending_and_queues_a_worker(
    admin_client, owner, provider, django_capture_on_commit_callbacks
):
    memories = three(owner)
    assert pipeline.embedding_run() == 3
    revisions = MemoryRevision.objects.count()
    with django_capture_on_commit_callbacks() as callbacks:
        response = act(admin_client, "re_embed", memories[:2])
    assert response.status_code == 302
    assert embedding_enqueue in callbacks
    statuses = {m.pk: (m.embedding_status, m.embedded_at) for m in Memory.objects.all()}
    assert statuses[memories[0].pk] == statuses[memories[1].pk] == ("pending", None)
    assert statuses[memories[2].pk][0] == "done"
    assert set(Embedding.objects.values_list("memory_id", flat=True)) == {memories[2].pk}
    # who asked is in the admin's log; the memory itself did not change: no revision
    log = LogEntry.objects.filter(change_message="Re-embedded")
    assert {(e.object_id, e.user.username) for e in log} == {
        (str(memories[0].pk), "admin"), (str(memories[1].pk), "admin"),
    }  # fmt: skip
    assert MemoryRevision.objects.count() == revisions
    provider.calls.clear()
    assert pipeline.embedding_run() == 2  # computed again, not copied back from a cache
    assert sorted(provider.texts) == sorted(m.content for m in memories[:2])


def test_archive_archives_the_active_ones_recording_the_operator(admin_client, owner):
    memories = three(owner)
    Memory.objects.filter(pk=memories[2].pk).update(status="superseded")
    response = act(admin_client, "archive", memories)
    assert response.status_code == 302
    statuses = dict(Memory.objects.values_list("pk", "status"))
    assert [statuses[m.pk] for m in memories] == ["archived", "archived", "superseded"]
    recorded = operator_revisions("archive")
    assert {r.memory_id for r in recorded} == {memories[0].pk, memories[1].pk}
    assert {(r.before["status"], r.after["status"]) for r in recorded} == {("active", "archived")}
    act(admin_client, "archive", memories)  # again: nothing left to archive, nothing recorded
    assert len(operator_revisions("archive")) == 2


def test_pin_and_unpin_over_a_whole_filtered_list(admin_client, owner):
    memories = three(owner)
    maria = f"{LIST}?user=maria"
    # "select all" of the filtered list: maria's two memories, not bob's
    response = act(admin_client, "pin", memories[:1], url=maria, select_across="1", index="0")
    assert response.status_code == 302
    pinned = dict(Memory.objects.values_list("pk", "pinned"))
    assert [pinned[m.pk] for m in memories] == [True, True, False]
    assert {(r.memory_id, r.after["pinned"]) for r in operator_revisions("update")} == {
        (memories[0].pk, True), (memories[1].pk, True),
    }  # fmt: skip
    act(admin_client, "unpin", memories)
    assert not Memory.objects.filter(pinned=True).exists()
    assert len(operator_revisions("update")) == 4  # bob's was not pinned: not recorded


def test_export_is_the_api_json_of_the_selected_memories_only(admin_client, owner):
    memories = three(owner)
    response = act(admin_client, "export_json", [memories[2], memories[0]])
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].startswith('attachment; filename="memories-')
    document = json.loads(b"".join(response.streaming_content))
    assert [item["id"] for item in document["results"]] == [str(memories[0].pk),
                                                            str(memories[2].pk)]  # fmt: skip
    for item in document["results"]:
        assert item == owner.client.get(f"/api/v1/memories/{item['id']}/").json()
    assert document["results"][0]["user"] == "maria"
    assert document["results"][0]["room"] == "chat-1"


def test_export_of_a_whole_filtered_list(admin_client, owner):
    memories = three(owner)
    response = act(
        admin_client, "export_json", memories[:1], url=f"{LIST}?user=maria", select_across="1",
        index="0",
    )  # fmt: skip
    document = json.loads(b"".join(response.streaming_content))
    assert {item["id"] for item in document["results"]} == {str(memories[0].pk),
                                                            str(memories[1].pk)}  # fmt: skip


def _form(memory: Memory, **changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "content": memory.content, "role": memory.role, "status": memory.status,
        "importance": memory.importance, "confidence": memory.confidence,
        "content_json": json.dumps(memory.content_json), "metadata": json.dumps(memory.metadata),
        "source_ids": json.dumps(memory.source_ids), **inline_management("embeddings"),
    }  # fmt: skip
    if memory.pinned:
        data["pinned"] = "on"
    return {**data, **changes}


def test_the_change_form_saves_through_the_update_service(
    admin_client, owner, provider, django_capture_on_commit_callbacks
):
    memory = three(owner)[1]
    pipeline.embedding_run()
    page = f"{LIST}{memory.pk}/change/"
    with django_capture_on_commit_callbacks() as callbacks:
        response = admin_client.post(
            page, _form(memory, content="Maria lives in Porto", kind="message", metadata='{"a": 1}')
        )
    assert response.status_code == 302, response.content.decode()[:2000]
    memory.refresh_from_db()
    assert (memory.content, memory.kind, memory.metadata) == ("Maria lives in Porto", "fact",
                                                              {"a": 1})  # fmt: skip
    assert memory.embedding_status == "pending"
    assert not Embedding.objects.filter(memory=memory).exists()
    assert embedding_enqueue in callbacks
    [revision] = operator_revisions("update")
    assert (revision.before["content"], revision.after["content"]) == (
        "Maria lives in Lisbon", "Maria lives in Porto",
    )  # fmt: skip
    admin_client.post(page, _form(memory))  # nothing changed: nothing recorded
    assert len(operator_revisions("update")) == 1


def test_the_change_form_shows_errors_in_place(admin_client, owner):
    memory = three(owner)[0]
    response = admin_client.post(f"{LIST}{memory.pk}/change/", _form(memory, metadata="[1"))
    assert response.status_code == 200
    assert b"errorlist" in response.content
    assert not operator_revisions("update")


def test_the_memory_page_shows_its_history_escaped(admin_client, owner):
    memory = three(owner)[0]
    patched = owner.client.patch(
        f"/api/v1/memories/{memory.pk}/", {"content": "<b>Maria</b> is allergic"}, format="json"
    )
    assert patched.status_code == 200
    html = admin_client.get(f"{LIST}{memory.pk}/change/").content.decode()
    history = html[html.index("Revisions, newest first") :]
    assert history.index(">update<") < history.index(">create<")
    assert f"{owner.key.prefix} (api_key)" in history
    assert (
        "<b>content</b>: &quot;Maria is allergic to peanuts&quot; → "
        "&quot;&lt;b&gt;Maria&lt;/b&gt; is allergic&quot;"
    ) in history
    assert f"/admin/memories/memoryrevision/?q={memory.pk}" in history


def test_delete_records_each_memory_as_deleted_by_the_operator(admin_client, owner):
    memories = three(owner)
    response = admin_client.post(f"{LIST}{memories[0].pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    response = act(admin_client, "delete_selected", memories[1:], post="yes")
    assert response.status_code == 302
    assert not Memory.objects.exists()
    deleted = operator_revisions("delete")
    assert {(r.memory_id, r.before["content_sha256"], r.after["erased"]) for r in deleted} == {
        (m.pk, hashlib.sha256(m.content.encode()).hexdigest(), "admin delete") for m in memories[1:]
    } | {(memories[0].pk, hashlib.sha256(memories[0].content.encode()).hexdigest(), "delete")}
    assert EndUser.objects.filter(external_id="maria").exists()  # only the memories went
