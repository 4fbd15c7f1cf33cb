"""The review inbox (facts.review): with it on, what the extractor finds waits as a
proposal that no context, synopsis or default search shows; accepting runs the
consolidation (activate, reinforce the fact it repeats, supersede the old value);
a rejection is never proposed again; with it off nothing changes."""

from __future__ import annotations

import json

import pytest

from memories.models import EndUser, Memory, MemoryRevision
from memories.services.configuration import project_settings_update
from memories.services.revisions import Actor
from memories.services.trash import memories_untrash
from synopsis.services.fact_review import (
    BULK_MAX,
    proposal_accept,
    proposals_accept,
    proposals_pending,
    proposals_reject,
)
from synopsis.services.facts import messages_facts_extract
from synopsis.services.synopsis_material import identity_facts
from tests.synopsis.services.test_facts import facts_of, say, user_says

ERIN = Actor.operator("erin")
JAZZ = "User loves jazz."


def review(tenant, on=True):
    project_settings_update(
        project=tenant.project, changes={"facts": {"review": on}}, actor=Actor.system("test")
    )


def mined(tenant, *turns):
    ids = [say(tenant, turn) for turn in turns]
    messages_facts_extract(memory_ids=ids)
    return ids


def context_text(tenant):
    response = tenant.client.post(
        "/api/v1/context/", {"user": "maria", "query": "what music do I love? jazz"}, format="json"
    )
    assert response.status_code == 200, response.json()
    return json.dumps(response.json())


def searched(tenant, **body):
    response = tenant.client.post(
        "/api/v1/search/",
        {"query": "loves jazz", "user": "maria", "mode": "keyword", **body},
        format="json",
    )
    assert response.status_code == 200, response.json()
    return [hit["memory"]["content"] for hit in response.json()["results"]]


def listed(tenant, **params):
    response = tenant.client.get("/api/v1/memories/", {"user": "maria", **params})
    return [memory["content"] for memory in response.json()["results"]]


def maria(tenant):
    return EndUser.objects.get(project=tenant.project, external_id="maria")


def review_revisions(memory):
    return list(MemoryRevision.objects.filter(memory_id=memory.pk, intent="review").order_by("pk"))


def test_a_proposal_reaches_nothing_until_accepted(owner):
    review(owner)
    [message] = mined(owner, 4)  # "I love jazz."
    proposal = facts_of(owner)[JAZZ]
    assert proposal.status == "proposed"
    assert proposal.source_ids == [message]
    assert JAZZ not in context_text(owner)
    assert JAZZ not in searched(owner)
    assert JAZZ not in listed(owner)  # the API's list shows active ones by default
    assert listed(owner, status="proposed") == [JAZZ]  # and proposals when asked
    assert identity_facts(maria(owner)) == []  # nor the synopsis

    accepted = proposal_accept(project=owner.project, memory_id=proposal.pk, actor=ERIN)
    assert accepted is not None and accepted.pk == proposal.pk
    assert Memory.objects.get(pk=proposal.pk).status == "active"
    assert JAZZ in context_text(owner)
    assert JAZZ in searched(owner)
    assert [item.content for item in identity_facts(maria(owner))] == [JAZZ]
    [step] = review_revisions(proposal)
    assert (step.actor_type, step.actor) == ("operator", "erin")
    assert (step.before["status"], step.after["status"]) == ("proposed", "active")
    # accepted once: a second accept finds no proposal
    assert proposal_accept(project=owner.project, memory_id=proposal.pk, actor=ERIN) is None


def test_a_repeated_proposal_is_reinforced_not_doubled(owner):
    review(owner)
    ids = mined(owner, 4, 7)  # "I love jazz." twice
    [proposal] = proposals_pending(project=owner.project)
    assert proposal.content == JAZZ
    assert proposal.source_ids == ids
    assert facts_of(owner, status="active") == {}


def test_a_repeat_of_a_held_fact_changes_it_only_when_accepted(owner):
    [first] = mined(owner, 4)  # review off: active at once
    held = facts_of(owner, status="active")[JAZZ]
    review(owner)
    [second] = mined(owner, 7)
    [proposal] = proposals_pending(project=owner.project)
    untouched = Memory.objects.get(pk=held.pk)
    assert (untouched.source_ids, untouched.confidence) == ([first], held.confidence)

    fact = proposal_accept(project=owner.project, memory_id=proposal.pk, actor=ERIN)
    assert fact is not None and fact.pk == held.pk  # the held fact, reinforced
    assert fact.source_ids == [first, second]
    assert fact.confidence > held.confidence
    merged = Memory.objects.get(pk=proposal.pk)
    assert merged.status == "superseded"
    assert merged.metadata["superseded_by"] == str(held.public_id)
    assert list(facts_of(owner, status="active")) == [JAZZ]
    assert [r.actor for r in review_revisions(held)] == ["erin"]


def test_a_new_value_supersedes_the_old_one_only_when_accepted(owner):
    mined(owner, 2)  # "I live in Lisbon and I work at Acme Corp."
    lisbon = facts_of(owner, status="active")["User lives in Lisbon."]
    review(owner)
    mined(owner, 6)  # "Big news: I moved to Porto last month."
    porto = facts_of(owner, status="proposed")["User moved to Porto."]
    assert Memory.objects.get(pk=lisbon.pk).status == "active"
    assert "Porto" not in context_text(owner)

    proposal_accept(project=owner.project, memory_id=porto.pk, actor=ERIN)
    old = Memory.objects.get(pk=lisbon.pk)
    assert old.status == "superseded"
    assert old.metadata["superseded_by"] == str(porto.public_id)
    assert Memory.objects.get(pk=porto.pk).content_json["supersedes"] == str(lisbon.public_id)
    assert [(r.actor, r.after["status"]) for r in review_revisions(old)] == [("erin", "superseded")]
    # the accept's supersede is no retraction: the user may move back
    review(owner, on=False)
    user_says_and_mine(owner, "I live in Lisbon.")
    assert "User lives in Lisbon." in facts_of(owner, status="active")


def user_says_and_mine(tenant, text):
    messages_facts_extract(memory_ids=[user_says(tenant, text)])


def test_an_edit_then_accept_records_both_steps(owner):
    review(owner)
    mined(owner, 4)
    proposal = facts_of(owner)[JAZZ]
    changes = {"content": "User loves cool jazz.", "confidence": 0.95}
    fact = proposal_accept(
        project=owner.project, memory_id=proposal.pk, actor=ERIN, changes=changes
    )
    assert fact is not None
    assert (fact.content, fact.confidence, fact.status) == ("User loves cool jazz.", 0.95, "active")
    edit, accept = review_revisions(proposal)
    assert (edit.before["content"], edit.after["content"]) == (JAZZ, "User loves cool jazz.")
    assert edit.after["status"] == "proposed"
    assert accept.after["status"] == "active"
    with pytest.raises(ValueError):
        proposal_accept(
            project=owner.project, memory_id=proposal.pk, actor=ERIN, changes={"pinned": True}
        )


def test_a_rejected_proposal_is_not_proposed_again(owner):
    review(owner)
    mined(owner, 4)
    proposal = facts_of(owner)[JAZZ]
    assert proposals_reject(project=owner.project, ids=[proposal.pk], actor=ERIN) == 1
    rejected = Memory.objects.get(pk=proposal.pk)
    assert rejected.status == "trashed"
    [step] = review_revisions(proposal)
    assert (step.action, step.actor, step.after["status"]) == ("trash", "erin", "trashed")

    mined(owner, 7)  # "I love jazz, by the way."
    user_says_and_mine(owner, "I love jazz.")
    assert not proposals_pending(project=owner.project).exists()
    review(owner, on=False)  # nor brought back as an active fact
    user_says_and_mine(owner, "I really love jazz.")
    assert JAZZ not in facts_of(owner, status="active")

    # undone from the trash: back in the inbox, and no longer a retraction
    memories_untrash(project=owner.project, ids=[proposal.pk], actor=ERIN)
    assert Memory.objects.get(pk=proposal.pk).status == "proposed"
    user_says_and_mine(owner, "Jazz: I love jazz.")
    assert JAZZ in facts_of(owner, status="active")


def test_bulk_accept_and_reject(owner, outsider):
    review(owner)
    review(outsider)
    mined(owner, 2, 4)  # Lisbon, Acme, jazz
    mined(outsider, 4)
    theirs = facts_of(outsider)[JAZZ]
    mine = facts_of(owner)
    accept = [mine["User lives in Lisbon."].pk, mine["User works at Acme Corp."].pk, theirs.pk]
    assert proposals_accept(project=owner.project, ids=accept, actor=ERIN) == 2
    assert proposals_reject(project=owner.project, ids=[mine[JAZZ].pk, theirs.pk], actor=ERIN) == 1
    assert set(facts_of(owner, status="active")) == {
        "User lives in Lisbon.",
        "User works at Acme Corp.",
    }
    assert Memory.objects.get(pk=theirs.pk).status == "proposed"  # another project's
    with pytest.raises(ValueError):
        proposals_reject(project=owner.project, ids=[theirs.pk] * (BULK_MAX + 1), actor=ERIN)


def test_review_off_changes_nothing(owner):
    mined(owner, 4, 7)
    [fact] = facts_of(owner).values()
    assert (fact.status, len(fact.source_ids)) == ("active", 2)
    assert not proposals_pending(project=owner.project).exists()
    assert JAZZ in context_text(owner)
