"""A user's Facts tab: facts, relationships and goals grouped by kind with their
confidence, structured fields, source turn (a link into the room view) and superseded
chain; the filters; edits of the confidence and structured fields through
memory_update (recorded under the operator, bad input in place and nothing changed);
a goal marked done (content_json status, which the synopsis and the context follow);
forget to the trash and its undo; viewers, other projects and other users."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from memories.models import EndUser, Membership, Memory, MemoryRevision
from memories.services.context import context_build
from synopsis.services.facts import messages_facts_extract
from synopsis.services.synopsis_material import open_goals
from tests.console.operators import operator_client

HTMX = {"HTTP_HX_REQUEST": "true"}


def write(tenant, *items):
    response = tenant.client.post("/api/v1/memories/batch/", {"memories": list(items)})
    assert response.status_code == 201, response.json()
    return [row["memory"]["id"] for row in response.json()["results"]]


@pytest.fixture
def maria(owner):
    """Maria said where she lives, then that she moved (mined by the offline extractor:
    Porto supersedes Lisbon); a relationship and a goal written by an agent; Bob's fact."""
    lisbon_turn, porto_turn = write(
        owner,
        {"user": "maria", "room": "chat", "role": "user", "content": "I live in Lisbon."},
        {"user": "maria", "room": "chat", "role": "user", "content": "Big news: I moved to Porto."},
    )
    messages_facts_extract(memory_ids=[Memory.objects.get(public_id=lisbon_turn).pk])
    messages_facts_extract(memory_ids=[Memory.objects.get(public_id=porto_turn).pk])
    write(
        owner,
        {
            "user": "maria",
            "kind": "relationship",
            "content": "Maria's sister is Ana",
            "content_json": {"subject": "Maria", "predicate": "sister", "object": "Ana"},
            "confidence": 0.7,
        },
        {
            "user": "maria",
            "kind": "goal",
            "content": "Run a marathon",
            "content_json": {"status": "open", "due": "2027-06-01"},
        },
        {"user": "bob", "kind": "fact", "content": "Bob likes dogs"},
    )
    return EndUser.objects.get(project=owner.project, external_id="maria")


def fact(owner, content):
    return Memory.objects.get(project=owner.project, content=content)


def url(name, owner, user, *rest):
    return reverse(name, args=[owner.project.pk, user.pk, *rest])


@pytest.fixture
def editor(owner):
    return operator_client("erin", project=owner.project)


def test_the_tab_shows_facts_as_what_they_are(owner, editor, maria):
    porto, lisbon = fact(owner, "User moved to Porto."), fact(owner, "User lives in Lisbon.")
    assert lisbon.status == "superseded"  # the extractor's chain, as the tab reads it
    response = editor.get(url("console-user-facts", owner, maria))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'aria-current="page">Facts</a>' in html
    # grouped by kind, in order: facts, relationships, goals
    assert html.index(">Facts <small") < html.index(">Relationships <small")
    assert html.index(">Relationships <small") < html.index(">Goals <small")
    # active only by default: the superseded Lisbon is in Porto's timeline, not a row
    assert f'id="fact-{porto.pk}"' in html and f'id="fact-{lisbon.pk}"' not in html
    assert "Replaced 1 older value" in html and "Lisbon" in html
    assert "Bob likes dogs" not in html
    # confidence as a bar, structured fields, the goal's due date and state
    assert 'class="confidence-bar"' in html and "width: 70%" in html
    assert "<dt>object</dt><dd>Ana</dd>" in html
    assert "<dt>category</dt><dd>location</dd>" in html
    assert 'datetime="2027-06-01"' in html and "goal-open" in html
    # the source turn: a link into the room view at that message
    turn = Memory.objects.get(project=owner.project, content="Big news: I moved to Porto.")
    room_view = url("console-user-room-view", owner, maria, turn.room_id)
    assert f'href="{room_view}?turn={turn.pk}#turn-{turn.pk}"' in html
    # the row's actions (built from one reversed prefix) are the named URLs
    for name in ("console-user-fact-edit", "console-user-fact-forget"):
        assert url(name, owner, maria, porto.pk) in html
    goal = fact(owner, "Run a marathon")
    assert url("console-user-fact-goal", owner, maria, goal.pk) in html


def test_the_filters(owner, editor, maria):
    tab = url("console-user-facts", owner, maria)
    superseded = editor.get(tab, {"status": "superseded"}, **HTMX).content.decode()
    assert 'id="facts-list"' in superseded and "<html" not in superseded
    assert f'id="fact-{fact(owner, "User lives in Lisbon.").pk}"' in superseded
    assert "Porto" not in superseded
    goals = editor.get(tab, {"kind": "goal", "status": ""}).content.decode()
    assert "Run a marathon" in goals and "Ana" not in goals and "1 found" in goals
    text = editor.get(tab, {"q": "sister", "status": "active"}).content.decode()
    assert "Maria&#x27;s sister is Ana" in text and "Porto" not in text
    bad = editor.get(tab, {"status": "bogus"}).content.decode()
    assert re.search(r"status: Select a valid choice", bad)


def test_edit_confidence_and_structured_fields(owner, editor, maria):
    sister = fact(owner, "Maria's sister is Ana")
    edit = url("console-user-fact-edit", owner, maria, sister.pk)
    form = editor.get(edit, **HTMX).content.decode()
    assert 'name="confidence"' in form and 'name="predicate"' in form
    body = {"confidence": "0.95", "subject": "Maria", "predicate": "sister", "object": "Ana Sousa"}
    response = editor.post(edit, body, **HTMX)
    assert response.status_code == 200
    assert "Saved." in response.content.decode() and "width: 95%" in response.content.decode()
    sister.refresh_from_db()
    assert sister.confidence == 0.95 and sister.content_json["object"] == "Ana Sousa"
    revision = MemoryRevision.objects.filter(memory_id=sister.pk, action="update").get()
    assert (revision.actor_type, revision.actor) == ("operator", "erin")
    assert revision.before["confidence"] == 0.7 and revision.after["confidence"] == 0.95


@pytest.mark.parametrize(
    ("content", "body", "field"),
    [
        ("Maria's sister is Ana", {"confidence": "1.5"}, "confidence"),
        (
            "Maria's sister is Ana",
            {"confidence": "0.5", "subject": "", "predicate": "x"},
            "subject",
        ),
        ("User moved to Porto.", {"confidence": "0.5", "category": "astrology"}, "category"),
        ("Run a marathon", {"confidence": "0.5", "status": "open", "due": "soon"}, "due"),
    ],
)
def test_bad_input_names_the_field_and_changes_nothing(owner, editor, maria, content, body, field):
    memory = fact(owner, content)
    before = memory.snapshot()
    response = editor.post(url("console-user-fact-edit", owner, maria, memory.pk), body, **HTMX)
    assert response.status_code == 422
    assert f"{field}: " in response.content.decode()
    memory.refresh_from_db()
    assert memory.snapshot() == before
    assert not MemoryRevision.objects.filter(memory_id=memory.pk, actor="erin").exists()


def test_mark_a_goal_done_and_open_again(owner, editor, maria):
    goal = fact(owner, "Run a marathon")
    done = url("console-user-fact-goal", owner, maria, goal.pk)
    response = editor.post(done, {"done": "yes"}, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Marked done." in html and "goal-done" in html and "Mark not done" in html
    goal.refresh_from_db()
    assert goal.content_json["status"] == "done" and goal.content_json["due"] == "2027-06-01"
    assert MemoryRevision.objects.filter(memory_id=goal.pk, actor="erin").count() == 1
    # the synopsis leaves a done goal out; the context says it is done
    assert "Run a marathon" not in [item.content for item in open_goals(maria)]
    context = context_build(end_user=maria, query="marathon", record_access=False)
    assert "Run a marathon (goal, done, due 2027-06-01)" in context.prompt
    editor.post(done, {"done": "no"}, **HTMX)
    goal.refresh_from_db()
    assert goal.content_json["status"] == "open"
    assert editor.post(done, {"done": "maybe"}, **HTMX).status_code == 400
    porto = fact(owner, "User moved to Porto.")
    not_goal = url("console-user-fact-goal", owner, maria, porto.pk)
    assert editor.post(not_goal, {"done": "yes"}, **HTMX).status_code == 400


def test_forget_to_the_trash_and_undo(owner, editor, maria):
    porto = fact(owner, "User moved to Porto.")
    response = editor.post(url("console-user-fact-forget", owner, maria, porto.pk), **HTMX)
    assert "Moved to the trash" in response.content.decode()
    porto.refresh_from_db()
    assert porto.status == "trashed"
    revision = MemoryRevision.objects.get(memory_id=porto.pk, action="trash")
    assert revision.actor == "erin"
    tab = editor.get(url("console-user-facts", owner, maria), {"status": "trashed"})
    assert f'id="fact-{porto.pk}"' in tab.content.decode()
    editor.post(url("console-user-fact-undo", owner, maria, porto.pk), **HTMX)
    porto.refresh_from_db()
    assert porto.status == "active"


def test_viewers_read_only_other_projects_and_users_not_at_all(owner, outsider, maria):
    viewer = operator_client("victor", project=owner.project, role=Membership.Role.VIEWER)
    porto = fact(owner, "User moved to Porto.")
    html = viewer.get(url("console-user-facts", owner, maria)).content.decode()
    assert "Porto" in html and "Edit</button>" not in html and "Forget</button>" not in html
    for name in ("console-user-fact-edit", "console-user-fact-goal", "console-user-fact-forget"):
        assert viewer.post(url(name, owner, maria, porto.pk), {"done": "yes"}).status_code == 403
    stranger = operator_client("sam", project=outsider.project)
    assert stranger.get(url("console-user-facts", owner, maria)).status_code == 404
    editor = operator_client("erin", project=owner.project)
    bob = EndUser.objects.get(project=owner.project, external_id="bob")
    edit_of_bob = url("console-user-fact-edit", owner, bob, porto.pk)
    assert editor.post(edit_of_bob, {"confidence": "0.1"}).status_code == 404
    porto.refresh_from_db()
    assert porto.confidence != 0.1


def test_the_tab_reads_a_page_in_the_same_few_queries_for_many_facts(owner, editor, maria):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    tab = url("console-user-facts", owner, maria)
    with CaptureQueriesContext(connection) as few:
        editor.get(tab)
    turns = write(
        owner,
        *({"user": "maria", "room": "chat", "role": "user", "content": f"t{i}"} for i in range(30)),
    )
    write(
        owner,
        *(
            {
                "user": "maria",
                "kind": "fact",
                "content": f"Maria fact {i}",
                "metadata": {"extracted_from": turn},
            }
            for i, turn in enumerate(turns)
        ),
    )
    with CaptureQueriesContext(connection) as many:
        html = editor.get(tab).content.decode()
    assert html.count("the turn of") == 31  # every fact's source, and Porto's
    assert len(many.captured_queries) == len(few.captured_queries)
