"""The console's project-wide Memories table: every user's memories newest first, the
filters combined, keyset pages (no OFFSET, a capped count), and the bulk actions
(archive, pin, unpin, forget with its confirmation, re-embed, export) recorded as the
operator's with the intent "bulk"; a large selection carried out by a worker (a
MaintenanceRun holding the ids, resumed after a crash, followed by a polling panel);
viewers read only; another project untouched."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from console.services import memory_table as table_service
from console.views import memory_table as table_view
from memories.models import (
    Embedding,
    EmbeddingSpace,
    EndUser,
    MaintenanceRun,
    Memory,
    MemoryRevision,
    Room,
    content_hash,
)
from memories.services import bulk
from memories.tasks import bulk_apply_task
from tests.conftest import wait_until
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


def memory_of(tenant, text, *, user="maria", room=None, ago=0, **fields):
    end_user, _ = EndUser.objects.get_or_create(project=tenant.project, external_id=user)
    if room is not None:
        fields["room"], _ = Room.objects.get_or_create(project=tenant.project, external_id=room)
    fields.setdefault("kind", "fact")
    return Memory.objects.create(
        project=tenant.project,
        end_user=end_user,
        content=text,
        content_hash=content_hash(text),
        created_at=timezone.now() - timedelta(minutes=ago),
        **fields,
    )


def row_of(memory):
    return Memory.objects.get(pk=memory.pk)


def texts(html, *candidates):
    return [text for text in candidates if text in html]


@pytest.fixture
def memories(owner):
    return {
        "tea": memory_of(owner, "likes green tea", ago=1, metadata={"source": "email"}),
        "porto": memory_of(owner, "lives in Porto", user="bob", room="bob-chat", ago=2),
        "cat": memory_of(owner, "adopted a cat", user="bob", kind="message", role="user", ago=3),
        "old": memory_of(owner, "an old green plan", status="archived", ago=60 * 24 * 10),
    }


def test_the_table_lists_every_users_memories_newest_first(owner, editor, memories):
    html = editor.get(url("console-memories", owner)).content.decode()
    assert "4 memories match" in html
    found = [html.index(text) for text in ("likes green tea", "lives in Porto", "adopted a cat")]
    assert found == sorted(found)  # newest first
    bob = EndUser.objects.get(project=owner.project, external_id="bob")
    assert reverse("console-user", args=[owner.project.pk, bob.pk]) in html
    assert "bob-chat" in html and "embedding pending" in html
    assert 'aria-current="page">Memories' in html


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"user": "bob"}, ["lives in Porto", "adopted a cat"]),
        ({"user": "bob", "kind": "message"}, ["adopted a cat"]),
        ({"room": "bob-chat"}, ["lives in Porto"]),
        ({"status": "archived"}, ["an old green plan"]),
        ({"q": "green"}, ["likes green tea", "an old green plan"]),
        ({"q": "green", "status": "active"}, ["likes green tea"]),
        ({"metadata": "source=email"}, ["likes green tea"]),
        ({"metadata": "source=sms"}, []),
        ({"start": str((timezone.now() - timedelta(days=2)).date())}, None),
    ],
)
def test_the_filters_combine(owner, editor, memories, query, expected):
    html = editor.get(url("console-memories", owner), query, **HTMX).content.decode()
    every = ("likes green tea", "lives in Porto", "adopted a cat", "an old green plan")
    if expected is None:  # the last 2 days: all but the 10-day-old one
        expected = list(every[:3])
    assert texts(html, *every) == expected


def test_a_bad_filter_is_named_and_left_out(owner, editor, memories):
    html = editor.get(url("console-memories", owner), {"metadata": "no equals sign"}).content
    assert "metadata: Write key=value" in html.decode()
    assert "4 memories match" in html.decode()
    html = editor.get(url("console-memories", owner), {"status": "gone"}).content.decode()
    assert "status: Select a valid choice" in html


def test_keyset_pages_without_offset_forward_and_back(owner, editor):
    for n in range(120):
        memory_of(owner, f"note number {n:03d}", ago=n)
    with CaptureQueriesContext(connection) as queries:
        first = editor.get(url("console-memories", owner)).content.decode()
    assert not any("OFFSET" in query["sql"] for query in queries.captured_queries)
    assert "note number 000" in first and "note number 049" in first
    assert "note number 050" not in first and "Newer" not in first
    older = editor.get(next_link(first, "Next page")).content.decode()
    assert "note number 050" in older and "note number 099" in older
    assert "note number 049" not in older and "note number 100" not in older
    back = editor.get(next_link(older, "← Newer")).content.decode()
    assert "note number 000" in back and "note number 049" in back and "Newer" not in back
    last = editor.get(next_link(older, "Next page")).content.decode()
    assert "note number 100" in last and "note number 119" in last and "Next page" not in last


def next_link(html, label):
    """The href of the pager link whose text starts with ``label``."""
    end = html.find(f">{label}")
    assert end >= 0, f"no {label} link"
    start = html.rindex('href="', 0, end) + len('href="')
    return html[start : html.index('"', start)].replace("&amp;", "&")


def test_a_cursor_that_is_not_one_is_named(owner, editor, memories):
    html = editor.get(url("console-memories", owner), {"after": "junk!"}).content.decode()
    assert "after: not a page of this table" in html and "likes green tea" in html


def test_the_count_stops_at_the_selection_bound(owner, editor, memories, monkeypatch):
    monkeypatch.setattr(table_service, "SELECT_MAX", 2)
    monkeypatch.setattr(table_view, "SELECT_MAX", 2)
    html = editor.get(url("console-memories", owner)).content.decode()
    assert "More than 2 memories match" in html and "narrow the filters" in html


def post(client, tenant, data, name="console-memories-action"):
    return client.post(url(name, tenant), data, **HTMX)


def ids(*rows):
    return [str(row.pk) for row in rows]


def bulk_revision(memory):
    return MemoryRevision.objects.filter(memory_id=memory.pk).latest("created_at", "pk")


def test_archive_the_selected_says_what_it_did_and_records_it(owner, editor, memories):
    chosen = ids(memories["tea"], memories["porto"], memories["old"])
    html = post(editor, owner, {"action": "archive", "ids": chosen}).content.decode()
    assert "2 archived, 1 skipped: already archived." in html
    assert (
        row_of(memories["tea"]).status == "archived" and row_of(memories["cat"]).status == "active"
    )
    revision = bulk_revision(memories["porto"])
    assert (revision.action, revision.intent, revision.actor) == ("archive", "bulk", "erin")


def test_pin_and_unpin(owner, editor, memories):
    chosen = ids(memories["tea"], memories["porto"])
    assert "2 pinned." in post(editor, owner, {"action": "pin", "ids": chosen}).content.decode()
    assert row_of(memories["tea"]).pinned and row_of(memories["porto"]).pinned
    assert bulk_revision(memories["tea"]).intent == "bulk"
    html = post(editor, owner, {"action": "unpin", "ids": ids(memories["tea"], memories["cat"])})
    assert "1 unpinned, 1 skipped: already unpinned." in html.content.decode()
    assert not row_of(memories["tea"]).pinned and row_of(memories["porto"]).pinned


def test_forget_asks_first_then_moves_them_to_the_trash(owner, editor, memories):
    chosen = ids(memories["tea"], memories["porto"])
    asked = post(editor, owner, {"action": "forget", "ids": chosen}).content.decode()
    assert "Forget 2 memories?" in asked and "trash</a> for 7 days" in asked
    assert row_of(memories["tea"]).status == "active"  # nothing yet
    done = post(editor, owner, {"action": "forget", "ids": chosen, "confirm": "yes"})
    assert "2 moved to the trash." in done.content.decode()
    assert row_of(memories["tea"]).status == row_of(memories["porto"]).status == "trashed"
    revision = bulk_revision(memories["tea"])
    assert (revision.action, revision.intent, revision.actor) == ("trash", "bulk", "erin")
    again = post(editor, owner, {"action": "forget", "ids": chosen[:1], "confirm": "yes"})
    assert "0 moved to the trash, 1 skipped: already in the trash." in again.content.decode()


def test_reembed_drops_the_vectors_and_queues_them(owner, editor, memories):
    tea = memories["tea"]
    Memory.objects.filter(pk=tea.pk).update(embedding_status="done", embedded_at=timezone.now())
    space = EmbeddingSpace.objects.create(provider="test", model="table", dimension=3)
    Embedding.objects.create(memory=tea, space=space, vector=[1.0, 0.0, 0.0])
    html = post(editor, owner, {"action": "reembed", "ids": ids(tea, memories["porto"])})
    assert "1 queued for embedding, 1 skipped: already waiting for the workers." in (
        html.content.decode()
    )
    assert row_of(tea).embedding_status == "pending" and row_of(tea).embedded_at is None
    assert not Embedding.objects.filter(memory=tea).exists()


def test_all_matching_acts_on_the_filters_only_and_is_bounded(owner, editor, memories, monkeypatch):
    everyone = {"action": "archive", "scope": "all", "user": "bob"}
    html = post(editor, owner, everyone).content.decode()
    assert "2 archived." in html
    assert (
        row_of(memories["cat"]).status == "archived" and row_of(memories["tea"]).status == "active"
    )
    monkeypatch.setattr(table_service, "SELECT_MAX", 1)
    refused = post(editor, owner, {"action": "pin", "scope": "all"})
    assert (
        refused.status_code == 422
        and "scope: more than 1 memories match" in refused.content.decode()
    )
    assert not Memory.objects.filter(project=owner.project, pinned=True).exists()
    bad = post(editor, owner, {"action": "pin", "scope": "all", "metadata": "oops"})
    assert "metadata: Write key=value" in bad.content.decode() and "Nothing was changed" in (
        bad.content.decode()
    )
    assert not Memory.objects.filter(project=owner.project, pinned=True).exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"action": "archive"}, "ids: select at least one memory."),
        ({"action": "archive", "ids": ["junk"]}, "ids: not a memory id."),
        ({"action": "explode", "ids": ["junk"]}, "action: not one of archive"),
    ],
)
def test_bad_input_is_named_and_changes_nothing(owner, editor, memories, data, message):
    response = post(editor, owner, data)
    assert response.status_code == 422 and message in response.content.decode()
    assert not MemoryRevision.objects.filter(project=owner.project).exists()


def test_export_downloads_the_selection_as_json_lines(owner, editor, memories):
    response = editor.post(
        url("console-memories-export", owner), {"ids": ids(memories["porto"], memories["tea"])}
    )
    assert response["Content-Type"] == "application/x-ndjson"
    assert response["Content-Disposition"].startswith('attachment; filename="memories-')
    lines = b"".join(response.streaming_content).decode().splitlines()
    documents = [json.loads(line) for line in lines]
    assert [d["content"] for d in documents] == [
        "lives in Porto",
        "likes green tea",
    ]  # oldest first
    assert documents[0]["user"] == "bob" and documents[0]["room"] == "bob-chat"
    assert documents[1]["id"] == str(memories["tea"].public_id)
    assert documents[1]["metadata"] == {"source": "email"}


def test_viewers_see_the_table_without_actions(owner, viewer, memories):
    html = viewer.get(url("console-memories", owner)).content.decode()
    assert "likes green tea" in html and 'name="ids"' not in html and "Forget…" not in html
    chosen = {"action": "archive", "ids": ids(memories["tea"]), "confirm": "yes"}
    assert viewer.post(url("console-memories-action", owner), chosen).status_code == 403
    assert viewer.post(url("console-memories-export", owner), chosen).status_code == 403
    assert row_of(memories["tea"]).status == "active"


def test_another_projects_memories_are_out_of_reach(owner, outsider, editor, memories):
    theirs = memory_of(outsider, "their secret")
    assert "their secret" not in editor.get(url("console-memories", owner)).content.decode()
    assert editor.get(url("console-memories", outsider)).status_code == 404
    html = post(editor, owner, {"action": "archive", "ids": ids(theirs)}).content.decode()
    assert "0 archived." in html and row_of(theirs).status == "active"
    exported = editor.post(url("console-memories-export", owner), {"ids": ids(theirs)})
    assert b"".join(exported.streaming_content) == b""


# --- large selections: a worker carries them out ------------------------------------


@pytest.fixture
def background(monkeypatch):
    """Past 2 memories a selection goes to a worker, in batches of 2 (not 500 and 500)."""
    monkeypatch.setattr(table_service, "BACKGROUND_OVER", 2)
    monkeypatch.setattr(bulk, "BATCH", 2)
    sent = []
    monkeypatch.setattr(bulk, "task_send", lambda name, args: sent.append((name, args)))
    return sent


@pytest.fixture
def five(owner):
    rows = [memory_of(owner, f"bulk note {n}", user=("ann", "ben")[n % 2], ago=n) for n in range(4)]
    return [*rows, memory_of(owner, "archived before", status="archived", ago=9)]


def run_url(tenant, run):
    return reverse("console-memories-run", args=[tenant.project.pk, run.pk])


def statuses(rows):
    return [row_of(row).status for row in rows]


def queue_archive(editor, owner, rows, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = post(editor, owner, {"action": "archive", "ids": ids(*rows)})
    assert response.status_code == 200 and len(callbacks) == 1
    return response.content.decode(), MaintenanceRun.objects.get(task="bulk archive")


def test_a_large_selection_is_queued_with_its_ids_not_applied_in_the_request(
    owner, editor, five, background, django_capture_on_commit_callbacks
):
    html, run = queue_archive(editor, owner, five, django_capture_on_commit_callbacks)
    assert background == [(bulk.BULK_QUEUED_TASK, [run.pk])]  # only the run's id
    assert statuses(five) == ["active"] * 4 + ["archived"]  # nothing changed yet
    assert not MemoryRevision.objects.filter(project=owner.project).exists()
    assert (run.project, run.status, run.counts["total"], run.counts["done"]) == (
        owner.project,
        "running",
        5,
        0,
    )
    assert sorted(run.details["ids"]) == sorted(ids(*five)) and run.details["actor"] == "erin"
    assert f'id="bulk-run-{run.pk}"' in html and 'hx-trigger="every 1s"' in html
    assert "0 of 5 archived…" in html and 'role="progressbar"' in html
    reloaded = editor.get(url("console-memories", owner)).content.decode()
    assert f'id="bulk-run-{run.pk}"' in reloaded  # the page follows the runs under way


def test_the_task_applies_the_run_records_it_and_a_second_delivery_changes_nothing(
    owner, editor, five, background, django_capture_on_commit_callbacks
):
    _, run = queue_archive(editor, owner, five, django_capture_on_commit_callbacks)
    assert bulk_apply_task(run.pk) == 4  # what the worker does with the message
    assert statuses(five) == ["archived"] * 5
    revisions = MemoryRevision.objects.filter(project=owner.project)
    assert (
        sorted(revisions.values_list("action", "intent", "actor"))
        == [("archive", "bulk", "erin")] * 4
    )
    run.refresh_from_db()
    assert run.status == "ok" and run.finished_at is not None
    assert {k: run.counts[k] for k in ("total", "done", "changed", "skipped")} == {
        "total": 5,
        "done": 5,
        "changed": 4,
        "skipped": 1,
    }
    assert run.details["skipped"] == {"already archived": 1}
    assert bulk_apply_task(run.pk) == 0  # redelivered: the run is over
    assert revisions.count() == 4


def test_a_run_whose_worker_died_resumes_after_its_last_batch(
    owner, editor, five, background, monkeypatch, django_capture_on_commit_callbacks
):
    _, run = queue_archive(editor, owner, five, django_capture_on_commit_callbacks)
    archive, calls = bulk._BATCHES["archive"], []

    def dies_at_the_second_batch(*args):
        calls.append(args)
        if len(calls) == 2:
            raise RuntimeError("the worker's process was killed")
        archive(*args)

    monkeypatch.setitem(bulk._BATCHES, "archive", dies_at_the_second_batch)
    with pytest.raises(RuntimeError):
        bulk_apply_task(run.pk)
    # as a killed worker leaves it: still running, the first batch and its counts committed
    MaintenanceRun.objects.filter(pk=run.pk).update(status="running", error="")
    run.refresh_from_db()
    first = [row for row in five if str(row.pk) in run.details["ids"][:2]]
    active = sum(row.status == "active" for row in first)  # as selected (pk order)
    assert (run.counts["done"], run.counts["changed"]) == (2, active)
    assert statuses(first) == ["archived", "archived"]
    monkeypatch.setitem(bulk._BATCHES, "archive", archive)
    bulk_apply_task(run.pk)  # the redelivery
    run.refresh_from_db()
    assert run.status == "ok" and run.counts["done"] == 5 and run.counts["changed"] == 4
    assert statuses(five) == ["archived"] * 5
    assert MemoryRevision.objects.filter(project=owner.project).count() == 4  # none twice


def test_the_panel_polls_while_the_run_goes_then_shows_its_outcome(
    owner, editor, viewer, five, background, django_capture_on_commit_callbacks
):
    _, run = queue_archive(editor, owner, five, django_capture_on_commit_callbacks)
    MaintenanceRun.objects.filter(pk=run.pk).update(counts={**run.counts, "done": 2})
    going = viewer.get(run_url(owner, run), {"user": "ann"}, **HTMX)  # viewers may read it
    html = going.content.decode()
    assert going.status_code == 200 and "2 of 5 archived…" in html
    assert 'hx-trigger="every 1s"' in html and "?user=ann" in html and 'aria-valuenow="40"' in html
    MaintenanceRun.objects.filter(pk=run.pk).update(counts={**run.counts, "done": 0})
    bulk_apply_task(run.pk)
    done = editor.get(run_url(owner, run), {"user": "ann"}, **HTMX).content.decode()
    assert "hx-trigger" not in done and "4 archived, 1 skipped: already archived." in done
    assert "Reload the table" in done and "memories/?user=ann" in done
    page = editor.get(url("console-memories", owner)).content.decode()
    assert f"bulk-run-{run.pk}" not in page  # over: no longer followed


def test_a_failed_run_shows_its_error(owner, editor, five, background, monkeypatch,
                                      django_capture_on_commit_callbacks):  # fmt: skip
    _, run = queue_archive(editor, owner, five, django_capture_on_commit_callbacks)

    def fails(*args):
        raise RuntimeError("disk full")

    monkeypatch.setitem(bulk._BATCHES, "archive", fails)
    with pytest.raises(RuntimeError):
        bulk_apply_task(run.pk)
    html = editor.get(run_url(owner, run), **HTMX).content.decode()
    assert "stopped after 0 of 5" in html and "RuntimeError: disk full" in html
    assert "hx-trigger" not in html


def test_another_projects_run_and_other_runs_are_404s(
    owner, outsider, editor, five, background, django_capture_on_commit_callbacks
):
    _, run = queue_archive(editor, owner, five, django_capture_on_commit_callbacks)
    stranger = operator_client("sam", project=outsider.project)
    assert stranger.get(run_url(outsider, run)).status_code == 404
    assert stranger.get(run_url(owner, run)).status_code == 404  # not a member there
    prune = MaintenanceRun.objects.create(task="prune", project=owner.project)
    assert editor.get(run_url(owner, prune)).status_code == 404


def test_a_large_forget_is_confirmed_then_queued(
    owner, editor, five, background, django_capture_on_commit_callbacks
):
    chosen = {"action": "forget", "ids": ids(*five[:3])}
    assert "Forget 3 memories?" in post(editor, owner, chosen).content.decode()
    assert not MaintenanceRun.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        html = post(editor, owner, {**chosen, "confirm": "yes"}).content.decode()
    run = MaintenanceRun.objects.get(task="bulk forget")
    assert "0 of 3 moved to the trash…" in html and statuses(five[:3]) == ["active"] * 3
    bulk_apply_task(run.pk)
    assert statuses(five[:3]) == ["trashed"] * 3
    assert bulk_revision(five[0]).intent == "bulk"


@pytest.mark.django_db(transaction=True)  # autocommit, as served: the send is tried at once
def test_a_run_the_broker_cannot_take_is_said_and_recorded_failed(owner, monkeypatch):
    monkeypatch.setattr(table_service, "BACKGROUND_OVER", 2)
    editor = operator_client("erin", project=owner.project)
    five = [memory_of(owner, f"bulk note {n}", ago=n) for n in range(5)]

    def unreachable(*args, **kwargs):
        raise bulk.TaskNotSent("the broker failed")

    monkeypatch.setattr(bulk, "task_send", unreachable)
    response = post(editor, owner, {"action": "pin", "ids": ids(*five)})
    assert response.status_code == 503 and "could not queue the run" in response.content.decode()
    assert MaintenanceRun.objects.get().status == "failed"
    assert not Memory.objects.filter(project=owner.project, pinned=True).exists()


@pytest.mark.django_db(transaction=True)  # autocommit: the send (here the run) at once
def test_a_run_a_fast_worker_ended_before_the_answer_is_shown_done(owner, monkeypatch):
    monkeypatch.setattr(table_service, "BACKGROUND_OVER", 2)
    monkeypatch.setattr(bulk, "task_send", lambda name, args: bulk_apply_task(*args))
    editor = operator_client("erin", project=owner.project)
    rows = [memory_of(owner, f"fast note {n}", ago=n) for n in range(3)]
    html = post(editor, owner, {"action": "unpin", "ids": ids(*rows)}).content.decode()
    run = MaintenanceRun.objects.get(task="bulk unpin")
    assert run.status == "ok" and f"bulk-run-{run.pk}" in html
    assert "0 unpinned, 3 skipped: already unpinned." in html and "hx-trigger" not in html


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_real_worker_carries_out_a_queued_run(owner, monkeypatch, celery_worker_process):
    monkeypatch.setattr(table_service, "BACKGROUND_OVER", 2)
    editor = operator_client("erin", project=owner.project)
    rows = [memory_of(owner, f"worker note {n}", ago=n) for n in range(4)]
    html = post(editor, owner, {"action": "pin", "ids": ids(*rows)}).content.decode()
    run = MaintenanceRun.objects.get(task="bulk pin")
    assert f"bulk-run-{run.pk}" in html

    def ended():
        run.refresh_from_db()
        return run.status != "running"

    wait_until(ended, timeout=60)
    assert run.status == "ok" and run.counts["changed"] == 4
    assert all(row_of(row).pinned for row in rows)
    done = editor.get(run_url(owner, run), **HTMX).content.decode()
    assert "4 pinned." in done and "hx-trigger" not in done
