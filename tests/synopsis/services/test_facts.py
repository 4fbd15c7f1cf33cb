"""Facts from a scripted conversation: mined from the user's turns only, consolidated
(reinforced, superseded, never duplicated), with provenance; offline through a real
worker, and the same script through the LLM path."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from memories.models import Memory, MemoryRevision
from synopsis.models import FactExtraction
from synopsis.services.facts import messages_facts_extract
from tests.conftest import wait_until

START = timezone.now() - timedelta(days=3)
SCRIPT = [
    ("user", "Hi! My name is Maria."),
    ("assistant", "Nice to meet you! I love helping people and I live in Mountain View."),
    ("user", "I live in Lisbon and I work at Acme Corp."),
    ("tool", "weather lookup result: I live in Berlin, sunny and 24C"),
    ("user", "I love jazz."),
    ("assistant", "Got it: you love jazz and you live in Lisbon. I love jazz too!"),
    ("user", "Big news: I moved to Porto last month."),
    ("user", "I love jazz, by the way."),
    ("system", "My name is Bob and I work at Initech."),
]
USER_TURNS = [i for i, (role, _) in enumerate(SCRIPT) if role == "user"]


def say(tenant, i):
    role, text = SCRIPT[i]
    body = {
        "user": "maria",
        "room": "chat",
        "role": role,
        "content": text,
        "created_at": (START + timedelta(minutes=i)).isoformat(),
    }
    response = tenant.client.post("/api/v1/memories/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["memory"]["id"]


def user_says(tenant, content, **fields):
    """A message of Maria's outside the script; its id."""
    body = {"user": "maria", "role": "user", "content": content, **fields}
    return tenant.client.post("/api/v1/memories/", body, format="json").json()["memory"]["id"]


def facts_of(tenant, **filters):
    return {
        m.content: m
        for m in Memory.objects.filter(
            project=tenant.project, kind__in=["fact", "relationship", "goal"], **filters
        )
    }


def check_the_facts(tenant, ids, *, porto, jazz="User loves jazz.", lisbon="User lives in Lisbon."):
    """What the script must leave, exactly."""
    active = facts_of(tenant, status="active")
    assert set(active) == {"User's name is Maria.", "User works at Acme Corp.", jazz, porto}
    assert active["User's name is Maria."].source_ids == [ids[0]]
    assert active["User works at Acme Corp."].source_ids == [ids[2]]
    assert active[jazz].source_ids == [ids[4], ids[7]]  # repeated: reinforced, not duplicated
    [raised] = MemoryRevision.objects.filter(memory_id=active[jazz].pk, action="update")
    assert raised.after["confidence"] > raised.before["confidence"]
    assert raised.actor == "fact_extract"
    assert active[porto].source_ids == [ids[6]]
    [old] = facts_of(tenant, status="superseded").values()
    assert (old.content, old.source_ids) == (lisbon, [ids[2]])
    assert old.metadata["superseded_by"] == str(active[porto].pk)
    assert active[porto].content_json["supersedes"] == str(old.pk)
    assert MemoryRevision.objects.filter(memory_id=old.pk, action="supersede").count() == 1
    # only the user's turns were mined, each once
    mined = FactExtraction.objects.filter(project=tenant.project)
    assert sorted(str(e.message_id) for e in mined) == sorted(ids[i] for i in USER_TURNS)
    assert {e.status for e in mined} == {"done"}
    everything = " ".join(m.content for m in facts_of(tenant).values())
    for banned in ("Mountain View", "Berlin", "Bob", "Initech", "helping"):
        assert banned not in everything


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_mines_the_users_turns_into_exact_facts(owner, celery_worker_process):
    ids = []
    for i in range(len(SCRIPT)):
        ids.append(say(owner, i))
        if SCRIPT[i][0] == "user":  # the next turn comes once this one is mined
            wait_until(lambda i=i: FactExtraction.objects.filter(message_id=ids[i]).exists())
    check_the_facts(owner, ids, porto="User moved to Porto.")
    wait_until(lambda: not Memory.objects.filter(embedding_status="pending").exists())


def fact(content, category, confidence=0.9, **more):
    return {"content": content, "category": category, "confidence": confidence, **more}


LLM_ANSWERS = {
    0: [fact("User's name is Maria.", "identity", slot="identity.name", value="Maria")],
    2: [
        fact("User lives in Lisbon.", "location", slot="location.home", value="Lisbon"),
        fact("User works at Acme Corp.", "work", slot="work.employer", value="Acme Corp"),
    ],
    4: [fact("User loves jazz.", "preference", 0.8)],
    6: [fact("User lives in Porto.", "location", slot="location.home", value="Porto")],
    7: [fact("User loves jazz.", "preference", 0.8)],
}


def test_the_same_script_through_the_llm(owner, llm_server, llm_settings):
    ids = [say(owner, i) for i in range(len(SCRIPT))]
    for i in USER_TURNS:
        llm_server.ok(json.dumps({"facts": LLM_ANSWERS[i]}))
    messages_facts_extract(memory_ids=ids)
    check_the_facts(owner, ids, porto="User lives in Porto.")
    assert len(llm_server.requests) == len(USER_TURNS)  # never asked about other turns
    assert all(e.extractor == "llm:stub-model" for e in FactExtraction.objects.all())


def test_an_invalid_llm_answer_stores_nothing_and_is_recorded(owner, llm_server, llm_settings):
    ids = [say(owner, 0)]
    llm_server.ok(json.dumps({"facts": [fact("User's name is Maria.", "nickname")]}))
    assert messages_facts_extract(memory_ids=ids) == 0
    assert facts_of(owner) == {}
    extraction = FactExtraction.objects.get()
    assert extraction.status == "failed" and "category" in extraction.error


def test_a_fact_echoed_back_from_the_hub_is_not_mined_again(owner):
    ids = [say(owner, 2)]
    messages_facts_extract(memory_ids=ids)
    Memory.objects.create(
        project=owner.project,
        end_user=Memory.objects.get(pk=ids[0]).end_user,
        kind="summary",
        content="[2026-05-01] Maria (user): I moved to Madrid in May.",
        content_hash="s",
    )
    echo = user_says(
        owner, "Earlier you wrote: [2026-05-01] Maria (user): I moved to Madrid in May."
    )
    messages_facts_extract(memory_ids=[echo])
    assert "User moved to Madrid." not in facts_of(owner)
    assert facts_of(owner, status="active")["User lives in Lisbon."]


def test_an_operators_retraction_and_correction_are_not_undone(owner):
    ids = [say(owner, 2), say(owner, 4)]
    messages_facts_extract(memory_ids=ids)
    facts = facts_of(owner)
    # the operator retracts the jazz fact and corrects the employer
    owner.client.delete(f"/api/v1/memories/{facts['User loves jazz.'].pk}/")
    employer = {"category": "work", "slot": "work.employer", "value": "acme corporation"}
    owner.client.patch(
        f"/api/v1/memories/{facts['User works at Acme Corp.'].pk}/",
        {"content": "User works at Acme Corporation.", "content_json": employer},
        format="json",
    )
    # an older message saying otherwise, mined late, and the user repeating the retracted fact
    old = user_says(owner, "I work at Globex.", created_at=(START - timedelta(days=1)).isoformat())
    again = say(owner, 7)
    messages_facts_extract(memory_ids=[old, again])
    active = facts_of(owner, status="active")
    assert "User loves jazz." not in active
    assert "User works at Acme Corporation." in active
    assert "User works at Globex." not in facts_of(owner)


def test_the_command_mines_what_was_not_mined(owner, outsider):
    ids = [say(owner, i) for i in range(len(SCRIPT))]
    say(outsider, 0)
    out = StringIO()
    call_command("extract_facts", "--project", "owner", stdout=out)
    assert "Mined 5 messages" in out.getvalue()
    check_the_facts(owner, ids, porto="User moved to Porto.")
    assert not FactExtraction.objects.filter(project=outsider.project).exists()
