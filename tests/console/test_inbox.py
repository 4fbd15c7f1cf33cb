"""The console's review inbox: the proposals of every user, oldest first, with the
turn each came from; accept, edit then accept, reject (the row answers in place), many
at once; errors in place; viewers read only; another project's proposals are 404s."""

from __future__ import annotations

import json
import uuid

import pytest
from django.urls import reverse

from memories.models import Memory, MemoryRevision
from memories.services.configuration import project_settings_update
from memories.services.revisions import Actor
from synopsis.services.fact_review import proposals_pending
from synopsis.services.facts import messages_facts_extract
from tests.console.operators import operator_client

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def editor(owner):
    return operator_client("erin", project=owner.project)


@pytest.fixture
def viewer(owner):
    return operator_client("vic", project=owner.project, role="viewer")


def review(tenant, on=True):
    project_settings_update(
        project=tenant.project, changes={"facts": {"review": on}}, actor=Actor.system("test")
    )


def said(tenant, user, *texts):
    """The users' messages, mined (the review's proposals)."""
    ids = []
    for text in texts:
        body = {"user": user, "role": "user", "content": text}
        response = tenant.client.post("/api/v1/memories/", body, format="json")
        ids.append(response.json()["memory"]["id"])
    messages_facts_extract(memory_ids=ids)


@pytest.fixture
def proposals(owner):
    review(owner)
    said(owner, "maria", "I live in Lisbon and I work at Acme Corp.")
    said(owner, "bob", "I love jazz.")
    return {m.content: m for m in proposals_pending(project=owner.project)}


def url(name, tenant, *rest):
    return reverse(name, args=[tenant.project.pk, *rest])


def status_of(memory):
    return Memory.objects.filter(pk=memory.pk).values_list("status", flat=True).first()


def review_steps(memory):
    return list(
        MemoryRevision.objects.filter(memory_id=memory.pk, intent="review")
        .order_by("pk")
        .values_list("action", "actor")
    )


def test_the_inbox_lists_every_users_proposals_oldest_first(owner, editor, proposals):
    response = editor.get(url("console-inbox", owner))
    html = response.content.decode()
    assert response.status_code == 200
    assert "<title>owner: review (3) · MemoryHub</title>" in html
    assert "3 proposals waiting" in html
    lisbon, acme, jazz = (
        html.index(text)
        for text in ("User lives in Lisbon.", "User works at Acme Corp.", "User loves jazz.")
    )
    assert lisbon < jazz and acme < jazz  # oldest first
    maria = proposals["User lives in Lisbon."].end_user
    assert f'href="{reverse("console-user", args=[owner.project.pk, maria.pk])}"' in html
    assert "I live in Lisbon and I work at Acme Corp." in html  # the source turn
    assert "location.home" in html and '<td class="num">0.70</td>' in html  # slot, confidence
    assert "Review is off" not in html


def test_review_off_says_so_and_links_the_setting(owner, editor):
    html = editor.get(url("console-inbox", owner)).content.decode()
    assert "Review is off for this project" in html
    assert reverse("console-settings-section", args=[owner.project.pk, "facts"]) in html
    assert "Nothing waits for review." in html


def test_accept_answers_in_place_and_reaches_the_api(owner, editor, proposals):
    jazz = proposals["User loves jazz."]
    response = editor.post(url("console-inbox-accept", owner, jazz.pk), **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<tr" in html and "<html" not in html  # the row alone
    assert "Accepted: active now." in html
    assert 'id="inbox-count" hx-swap-oob="true">2<' in html
    assert json.loads(response["HX-Trigger"])["inboxCount"] == {
        "count": 2,
        "title": "owner: review (2) · MemoryHub",
    }
    assert status_of(jazz) == "active"
    assert review_steps(jazz) == [("update", "erin")]
    listed = owner.client.get("/api/v1/memories/", {"user": "bob", "kind": "fact"}).json()
    assert [m["content"] for m in listed["results"]] == ["User loves jazz."]
    # twice: the row says it was decided, nothing changes
    again = editor.post(url("console-inbox-accept", owner, jazz.pk), **HTMX).content.decode()
    assert "No longer waiting" in again
    assert review_steps(jazz) == [("update", "erin")]


def test_edit_then_accept_and_errors_in_place(owner, editor, proposals):
    lisbon = proposals["User lives in Lisbon."]
    form = editor.get(url("console-inbox-edit", owner, lisbon.pk), **HTMX).content.decode()
    assert "User lives in Lisbon.</textarea>" in form and 'value="lisbon"' in form
    bad = editor.post(
        url("console-inbox-edit", owner, lisbon.pk),
        {"content": "", "confidence": "1.5", "value": "porto"},
        **HTMX,
    )
    assert bad.status_code == 422
    assert "content: This field is required." in bad.content.decode()
    assert "confidence:" in bad.content.decode()
    assert status_of(lisbon) == "proposed" and review_steps(lisbon) == []
    good = editor.post(
        url("console-inbox-edit", owner, lisbon.pk),
        {"content": "User lives in Porto.", "confidence": "0.8", "value": "porto"},
        **HTMX,
    )
    assert "Edited and accepted: active now." in good.content.decode()
    fact = Memory.objects.get(pk=lisbon.pk)
    assert (fact.status, fact.content, fact.confidence) == ("active", "User lives in Porto.", 0.8)
    assert fact.content_json["value"] == "porto"
    assert review_steps(lisbon) == [("update", "erin"), ("update", "erin")]


def test_reject_goes_to_the_trash(owner, editor, proposals):
    jazz = proposals["User loves jazz."]
    html = editor.post(url("console-inbox-reject", owner, jazz.pk), **HTMX).content.decode()
    assert "Rejected: in the" in html and "not proposed again" in html
    assert status_of(jazz) == "trashed"
    assert review_steps(jazz) == [("trash", "erin")]
    said(owner, "bob", "I love jazz.")  # not proposed again
    assert not proposals_pending(project=owner.project).filter(content="User loves jazz.")


def test_bulk_accept_and_reject(owner, editor, proposals):
    lisbon, acme, jazz = (
        proposals[text]
        for text in ("User lives in Lisbon.", "User works at Acme Corp.", "User loves jazz.")
    )
    bulk = url("console-inbox-bulk", owner)
    html = editor.post(
        bulk, {"action": "accept", "ids": [lisbon.pk, acme.pk]}, **HTMX
    ).content.decode()
    assert "2 accepted." in html and "1 proposal waiting" in html
    html = editor.post(bulk, {"action": "reject", "ids": [jazz.pk, lisbon.pk]}, **HTMX)
    assert "1 rejected (in the trash). 1 were no longer waiting." in html.content.decode()
    assert [status_of(m) for m in (lisbon, acme, jazz)] == ["active", "active", "trashed"]
    # bad input: named, nothing changed
    for data, message in (
        ({"action": "accept"}, "ids: select at least one proposal."),
        ({"action": "accept", "ids": ["nope"]}, "ids: not a proposal id."),
        ({"action": "merge", "ids": [jazz.pk]}, "action: accept or reject."),
        ({"action": "accept", "ids": [uuid.uuid4()] * 501}, "ids: at most 500 at once."),
    ):
        assert message in editor.post(bulk, data, **HTMX).content.decode()


def test_viewers_read_but_cannot_decide(owner, viewer, proposals):
    jazz = proposals["User loves jazz."]
    html = viewer.get(url("console-inbox", owner)).content.decode()
    assert "User loves jazz." in html
    assert "Accept selected" not in html and "console-inbox-accept" not in html
    assert ">Accept<" not in html
    for name in ("console-inbox-accept", "console-inbox-reject", "console-inbox-edit"):
        assert viewer.post(url(name, owner, jazz.pk), **HTMX).status_code == 403
    bulk = {"action": "accept", "ids": [jazz.pk]}
    assert viewer.post(url("console-inbox-bulk", owner), bulk, **HTMX).status_code == 403
    assert status_of(jazz) == "proposed"


def test_another_projects_proposal_is_a_404(owner, outsider, editor, proposals):
    review(outsider)
    said(outsider, "maria", "I love jazz.")
    [theirs] = proposals_pending(project=outsider.project)
    for name in ("console-inbox-accept", "console-inbox-reject", "console-inbox-edit"):
        assert editor.post(url(name, owner, theirs.pk), **HTMX).status_code == 404
    assert editor.get(url("console-inbox-row", owner, theirs.pk), **HTMX).status_code == 404
    # a bulk action naming it leaves it alone
    editor.post(url("console-inbox-bulk", owner), {"action": "accept", "ids": [theirs.pk]}, **HTMX)
    assert status_of(theirs) == "proposed"
    # the outsider's inbox is not the owner's
    assert editor.get(url("console-inbox", outsider)).status_code == 404
