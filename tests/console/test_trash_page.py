"""The console's Trash page: what waits there, by whom and until when; restore and
erase now, one, many or all; viewers read only; another project's memories untouched."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memories.models import EndUser, Memory, MemoryRevision, content_hash
from memories.services.revisions import Actor
from memories.services.trash import memories_trash
from tests.console.operators import operator_client

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def editor(owner):
    return operator_client("erin", project=owner.project)


@pytest.fixture
def viewer(owner):
    return operator_client("vic", project=owner.project, role="viewer")


def url(name, tenant):
    return reverse(name, args=[tenant.project.pk])


def memory_of(tenant, text, user="maria"):
    end_user, _ = EndUser.objects.get_or_create(project=tenant.project, external_id=user)
    return Memory.objects.create(
        project=tenant.project,
        end_user=end_user,
        kind="fact",
        content=text,
        content_hash=content_hash(text),
    )


@pytest.fixture
def trashed(owner):
    rows = [memory_of(owner, "likes green tea"), memory_of(owner, "lives in Porto", user="bob")]
    memories_trash(project=owner.project, ids=[m.pk for m in rows], actor=Actor.operator("erin"))
    return rows


def status_of(memory):
    return Memory.objects.filter(pk=memory.pk).values_list("status", flat=True).first()


def test_the_trash_lists_what_waits_by_whom_and_until_when(owner, editor, trashed):
    html = editor.get(url("console-trash", owner)).content.decode()
    assert "2 memories in the trash" in html
    assert "likes green tea" in html and "lives in Porto" in html
    assert "<td>erin</td>" in html and "erased after" in html
    only_bob = editor.get(url("console-trash", owner), {"user": "bob"}, **HTMX).content.decode()
    assert "lives in Porto" in only_bob and "likes green tea" not in only_bob


def test_restore_selected_puts_them_back_and_records_the_undo(owner, editor, trashed):
    tea, porto = trashed
    done = editor.post(url("console-trash-restore", owner), {"ids": [str(tea.pk)]}, **HTMX)
    assert "1 restored." in done.content.decode()
    assert (status_of(tea), status_of(porto)) == ("active", "trashed")
    undo = MemoryRevision.objects.filter(memory_id=tea.pk).latest("created_at")
    assert (undo.action, undo.intent, undo.actor) == ("update", "undo", "erin")


def test_erase_needs_the_confirmation_then_erases_only_the_trash(owner, editor, trashed):
    tea, porto = trashed
    kept = memory_of(owner, "not trashed")
    erase = url("console-trash-erase", owner)
    unconfirmed = editor.post(erase, {"ids": [str(tea.pk)]}, **HTMX).content.decode()
    assert "Nothing was erased" in unconfirmed and status_of(tea) == "trashed"
    ids = [str(tea.pk), str(kept.pk)]  # a memory not in the trash is not erased
    done = editor.post(erase, {"ids": ids, "confirm": "yes"}, **HTMX).content.decode()
    assert "1 erased for good." in done
    assert (status_of(tea), status_of(kept), status_of(porto)) == (None, "active", "trashed")
    deleted = MemoryRevision.objects.get(memory_id=tea.pk, action="delete")
    assert "content" not in deleted.before
    emptied = editor.post(erase, {"all": "yes", "confirm": "yes"}, **HTMX).content.decode()
    assert "1 erased for good." in emptied and status_of(porto) is None


def test_bad_ids_are_refused_by_name(owner, editor, trashed):
    for ids in ([], ["junk"]):
        html = editor.post(url("console-trash-restore", owner), {"ids": ids}, **HTMX)
        assert "ids:" in html.content.decode()
    assert all(status_of(m) == "trashed" for m in trashed)


def test_viewers_read_and_other_projects_are_untouched(owner, outsider, viewer, editor, trashed):
    assert viewer.get(url("console-trash", owner)).status_code == 200
    ids = {"ids": [str(trashed[0].pk)], "confirm": "yes"}
    for name in ("console-trash-restore", "console-trash-erase"):
        assert viewer.post(url(name, owner), ids).status_code == 403
    theirs = memory_of(outsider, "their fact")
    memories_trash(project=outsider.project, ids=[theirs.pk], actor=Actor.operator("x"))
    editor.post(url("console-trash-erase", owner), {"ids": [str(theirs.pk)], "confirm": "yes"})
    editor.post(url("console-trash-restore", owner), {"ids": [str(theirs.pk)]})
    assert status_of(theirs) == "trashed"
    assert editor.get(url("console-trash", outsider)).status_code == 404
