"""Changing memories from the user page: edit in place (seen through the API, re-embedded,
recorded as the operator), field errors in place, pin and unpin, forget with its
confirmation, forget a whole user, history and restore; viewers and other tenants."""

import json

import pytest
from django.urls import reverse

from memories.models import EndUser, Membership, Memory, MemoryRevision
from tests.conftest import embed_pending
from tests.console.test_user_page import operator_client, write

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def editor(owner):
    return operator_client(owner.project, "erin")


@pytest.fixture
def viewer(owner):
    return operator_client(owner.project, "victor", Membership.Role.VIEWER)


@pytest.fixture
def maria(owner):
    write(
        owner,
        {
            "user": "maria",
            "room": "kitchen",
            "role": "user",
            "importance": 0.4,
            "content": "I adopted a cat called Miso",
            "metadata": {"topic": "pets"},
        },
        {"user": "maria", "kind": "fact", "content": "Maria lives in Lisbon"},
        {"user": "maria", "kind": "goal", "content": "Plant basil in spring"},
    )
    return EndUser.objects.get(project=owner.project, external_id="maria")


@pytest.fixture
def cat(maria):
    return maria.memories.get(content__startswith="I adopted")


def url(name, owner, user, *rest):
    return reverse(name, args=[owner.project.pk, user.pk, *rest])


def api_memory(owner, memory):
    response = owner.client.get(f"/api/v1/memories/{memory.pk}/")
    return response.status_code, response.json() if response.status_code == 200 else None


def api_revisions(owner, memory):
    return owner.client.get(f"/api/v1/memories/{memory.pk}/revisions/").json()["results"]


def edit(client, owner, maria, memory, **fields):
    data = {
        "content": memory.content,
        "metadata": json.dumps(memory.metadata),
        "importance": str(memory.importance),
        **fields,
    }
    return client.post(url("console-memory-edit", owner, maria, memory.pk), data, **HTMX)


def test_the_edit_form_takes_the_rows_place(owner, editor, maria, cat):
    response = editor.get(url("console-memory-edit", owner, maria, cat.pk), **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert 'class="memory editing"' in html
    assert "I adopted a cat called Miso</textarea>" in html
    assert "&quot;topic&quot;: &quot;pets&quot;" in html
    assert 'value="0.4"' in html


def test_an_edit_changes_the_memory_reembeds_it_and_is_recorded(owner, editor, maria, cat):
    embed_pending()
    assert api_memory(owner, cat)[1]["embedding_status"] == "done"
    response = edit(
        editor,
        owner,
        maria,
        cat,
        content="I adopted two cats, Miso and Tofu",
        metadata='{"topic": "pets", "count": 2}',
        importance="0.9",
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "I adopted two cats, Miso and Tofu" in html and "Saved." in html
    assert "embedding pending" in html and 'hx-trigger="load delay:2s"' in html  # it watches
    _, seen = api_memory(owner, cat)
    assert seen["content"] == "I adopted two cats, Miso and Tofu"
    assert seen["metadata"] == {"topic": "pets", "count": 2}
    assert seen["importance"] == 0.9
    assert seen["embedding_status"] == "pending"
    newest = api_revisions(owner, cat)[0]
    assert (newest["action"], newest["actor_type"], newest["actor"]) == (
        "update",
        "operator",
        "erin",
    )
    assert newest["before"]["content"] == "I adopted a cat called Miso"
    # the worker embeds the new text; the badge says so when asked again
    embed_pending()
    badge = editor.get(url("console-memory-embedding", owner, maria, cat.pk), **HTMX)
    assert "embedding done" in badge.content.decode() and "hx-trigger" not in badge.content.decode()


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"metadata": "[1, 2]"}, "Must be a JSON object"),
        ({"metadata": '{"topic": '}, "Not valid JSON"),
        ({"metadata": '{"a": ' * 100_000 + "1" + "}" * 100_000}, "Nested too deep to read."),
        ({"importance": "1.5"}, "less than or equal to 1.0"),
        ({"content": "   "}, "This field may not be blank."),
        ({"metadata": '{"a": "\\u0000"}'}, "Null characters are not allowed."),
    ],
)
def test_bad_input_is_an_error_in_place_and_writes_nothing(
    owner, editor, maria, cat, fields, error
):
    revisions = MemoryRevision.objects.count()
    response = edit(editor, owner, maria, cat, **{"content": "changed", **fields})
    assert response.status_code == 422
    html = response.content.decode()
    assert 'class="memory editing"' in html and error in html
    assert 'class="field-error"' in html
    assert api_memory(owner, cat)[1]["content"] == "I adopted a cat called Miso"
    assert MemoryRevision.objects.count() == revisions


def test_pin_and_unpin(owner, editor, maria, cat):
    pin = url("console-memory-pin", owner, maria, cat.pk)
    html = editor.post(pin, {"pinned": "true"}, **HTMX).content.decode()
    assert "pinned</span>" in html and ">Unpin<" in html
    assert api_memory(owner, cat)[1]["pinned"] is True
    html = editor.post(pin, {"pinned": "false"}, **HTMX).content.decode()
    assert ">Pin<" in html
    assert api_memory(owner, cat)[1]["pinned"] is False
    actions = [(r["actor"], r["after"]["pinned"]) for r in api_revisions(owner, cat)[:2]]
    assert actions == [("erin", False), ("erin", True)]
    assert editor.post(pin, {"pinned": "maybe"}, **HTMX).status_code == 400


def test_forgetting_a_memory_needs_the_confirmation(owner, editor, maria, cat):
    forget = url("console-memory-forget", owner, maria, cat.pk)
    asked = editor.get(forget, **HTMX).content.decode()
    assert "Forget this message?" in asked and 'name="confirm" value="yes"' in asked
    unconfirmed = editor.post(forget, **HTMX)
    assert "Forget this message?" in unconfirmed.content.decode()
    assert api_memory(owner, cat)[0] == 200
    done = editor.post(forget, {"confirm": "yes"}, **HTMX).content.decode()
    assert "Moved to the trash" in done and "erased after 7 days" in done
    assert api_memory(owner, cat)[1]["status"] == "trashed"
    trashed = api_revisions(owner, cat)[0]
    recorded = (trashed["action"], trashed["actor_type"], trashed["actor"])
    assert recorded == ("trash", "operator", "erin")
    body = {"query": "cat", "user": "maria", "mode": "keyword"}
    search = owner.client.post("/api/v1/search/", body, format="json")
    assert search.status_code == 200 and search.json()["results"] == []
    # the undo in the same place brings the row back as it was
    undo = url("console-memory-undo", owner, maria, cat.pk)
    back = editor.post(undo, **HTMX).content.decode()
    assert "Back from the trash." in back and "I adopted a cat called Miso" in back
    assert api_memory(owner, cat)[1]["status"] == "active"
    undone = api_revisions(owner, cat)[0]
    assert (undone["action"], undone["intent"], undone["actor"]) == ("update", "undo", "erin")


def test_forget_this_user_says_what_goes_then_what_went(owner, editor, maria):
    forget = url("console-user-forget", owner, maria)
    asked = editor.get(forget).content.decode()
    assert "Forget maria?" in asked
    for line in ("1 message</span>", "1 fact</span>", "1 goal</span>"):
        assert line in asked
    assert "<strong>3</strong> memories in all" in asked
    unconfirmed = editor.post(forget).content.decode()
    assert "Nothing was deleted" in unconfirmed
    assert owner.client.get("/api/v1/users/maria/").status_code == 200
    done = editor.post(forget, {"confirm": "yes"})
    assert done.status_code == 200
    html = done.content.decode()
    assert "maria is forgotten" in html and "Deleted <strong>3</strong> memories" in html
    assert "1 fact</span>" in html
    assert owner.client.get("/api/v1/users/maria/").status_code == 404
    assert not Memory.objects.filter(project=owner.project).exists()
    deletions = MemoryRevision.objects.filter(action="delete", actor_type="operator", actor="erin")
    assert deletions.count() == 3
    # the receipt, and the history without the words
    assert '<th scope="row">revisions_redacted</th><td>3</td>' in html
    assert all("content" not in revision.before for revision in deletions)


def test_history_and_restoring_a_version(owner, editor, maria, cat):
    edit(editor, owner, maria, cat, content="I adopted a dog called Rex", importance="0.7")
    cat.refresh_from_db()
    edit(editor, owner, maria, cat, content="I adopted a parrot", metadata="{}")
    history = editor.get(url("console-memory-history", owner, maria, cat.pk), **HTMX)
    html = history.content.decode()
    assert html.count('class="revision"') == 3
    assert "current version" in html and html.count("Restore this version") == 2
    assert "operator <strong>erin</strong>" in html and "API key <strong>" in html
    assert "end_user_id" not in html and "source_ids" not in html  # a create shows what it holds
    assert '<th scope="row">metadata</th>' in html
    assert "I adopted a dog called Rex</td>" in html  # before and after of each change
    created = MemoryRevision.objects.get(memory_id=cat.pk, action="create")
    restore = url("console-memory-restore", owner, maria, cat.pk)
    response = editor.post(restore, {"revision": created.pk}, **HTMX)
    html = response.content.decode()
    assert "Restored." in html and "I adopted a cat called Miso" in html
    assert 'class="history"' in html  # the history stays open, with the restore on top
    _, seen = api_memory(owner, cat)
    assert seen["content"] == "I adopted a cat called Miso"
    assert seen["metadata"] == {"topic": "pets"} and seen["importance"] == 0.4
    assert seen["embedding_status"] == "pending"
    newest = api_revisions(owner, cat)[0]
    assert (newest["action"], newest["intent"], newest["actor"]) == ("update", "restore", "erin")


def test_a_restore_takes_only_this_memorys_revisions(owner, outsider, editor, maria, cat):
    restore = url("console-memory-restore", owner, maria, cat.pk)
    fact = maria.memories.get(kind="fact")
    other = MemoryRevision.objects.get(memory_id=fact.pk)
    assert editor.post(restore, {"revision": other.pk}, **HTMX).status_code == 400
    write(outsider, {"user": "x", "content": "theirs"})
    theirs = MemoryRevision.objects.get(project=outsider.project)
    assert editor.post(restore, {"revision": theirs.pk}, **HTMX).status_code == 404
    assert editor.post(restore, {"revision": "junk"}, **HTMX).status_code == 404
    assert api_memory(owner, cat)[1]["content"] == "I adopted a cat called Miso"


def test_a_viewer_gets_403_on_every_change(owner, viewer, maria, cat):
    created = MemoryRevision.objects.get(memory_id=cat.pk, action="create")
    posts = [
        (url("console-memory-edit", owner, maria, cat.pk), {"content": "x", "importance": "1"}),
        (url("console-memory-pin", owner, maria, cat.pk), {"pinned": "true"}),
        (url("console-memory-forget", owner, maria, cat.pk), {"confirm": "yes"}),
        (url("console-memory-undo", owner, maria, cat.pk), {}),
        (url("console-memory-restore", owner, maria, cat.pk), {"revision": created.pk}),
        (url("console-user-forget", owner, maria), {"confirm": "yes"}),
    ]
    for path, data in posts:
        assert viewer.post(path, data, **HTMX).status_code == 403, path
    assert viewer.get(url("console-memory-edit", owner, maria, cat.pk)).status_code == 403
    _, seen = api_memory(owner, cat)
    assert (seen["content"], seen["pinned"]) == ("I adopted a cat called Miso", False)
    assert Memory.objects.filter(project=owner.project).count() == 3
    # reading the history is allowed, without the restore buttons
    history = viewer.get(url("console-memory-history", owner, maria, cat.pk)).content.decode()
    assert 'class="revision"' in history and "Restore" not in history


def test_other_tenants_and_other_users_memories_are_404(owner, outsider, editor, maria, cat):
    write(owner, {"user": "bob", "content": "Bob's memory"})
    bob = EndUser.objects.get(project=owner.project, external_id="bob")
    # Maria's memory under Bob's URL
    assert edit(editor, owner, bob, cat, content="hijacked").status_code == 404
    write(outsider, {"user": "maria", "content": "their maria"})
    theirs = Memory.objects.get(project=outsider.project)
    for name in ("console-memory-row", "console-memory-history", "console-memory-edit"):
        assert editor.get(url(name, owner, maria, theirs.pk)).status_code == 404
    assert (
        editor.post(
            url("console-memory-forget", owner, maria, theirs.pk), {"confirm": "yes"}
        ).status_code
        == 404
    )
    assert Memory.objects.filter(project=outsider.project).count() == 1
    assert api_memory(owner, cat)[1]["content"] == "I adopted a cat called Miso"
