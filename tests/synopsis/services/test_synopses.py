"""The user synopsis generated (synopsis/services/synopses.py): by template and by the
LLM (and its fallback) from seeded facts, goals, summaries and messages; refresh after
new facts; a real worker regenerating a stale synopsis."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import Synopsis
from memories.services.synopsis import synopsis_get
from synopsis.llm import LlmError
from synopsis.services.synopses import synopsis_facts_refresh, synopsis_generate
from tests.conftest import wait_until
from tests.synopsis.synopsis_seeds import (
    CONTEXT,
    IDENTITY,
    configure,
    fact,
    maria,
    queued_tasks,
    seed_context,
    seed_facts,
    write,
)

# every write puts the synopsis in the cache after its commit: tests commit for real
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_redis")]


def test_the_template_identity_from_facts(owner, no_llm):
    facts = seed_facts(owner)
    user = maria(owner)
    assert synopsis_generate(end_user_id=user.pk) == ["identity", "context"]
    row = Synopsis.objects.get(end_user=user)
    assert row.identity_text == IDENTITY
    assert row.identity_generator == "template"
    assert row.identity_token_count > 0 and not row.identity_locked
    used = set(facts) - {"User lives in Lisbon.", "User lives in Berlin."}
    assert set(row.identity_source_ids) == {str(facts[c].pk) for c in used}
    assert row.context_text == "" and row.context_source_ids == []  # nothing to say yet


def test_the_template_context_from_goals_summaries_and_messages(owner, no_llm):
    seed_facts(owner)
    memories = seed_context(owner)
    user = maria(owner)
    synopsis_generate(end_user_id=user.pk, parts=["context"])
    row = Synopsis.objects.get(end_user=user)
    assert row.context_text == CONTEXT
    assert row.identity_generated_at is None  # not asked for
    expected = {
        "User wants to learn Portuguese.",
        "User wants to run a marathon.",
        "Maria planned a trip to Lisbon with the assistant.",
        "Can you find me a hotel in Lisbon?",
        "I prefer somewhere near the river.",
    }
    assert set(row.context_source_ids) == {str(memories[c].pk) for c in expected}


def test_each_part_keeps_what_fits_in_max_tokens_by_priority(owner, no_llm):
    seed_facts(owner)
    seed_context(owner)
    configure(owner, max_tokens=20)
    user = maria(owner)
    synopsis_generate(end_user_id=user.pk)
    row = Synopsis.objects.get(end_user=user)
    assert 0 < row.identity_token_count <= 20 and 0 < row.context_token_count <= 20
    assert row.identity_text.startswith("Maria is 34 years old, lives in Porto")
    assert "Rex" not in row.identity_text  # the lowest priority went first
    assert row.context_text.startswith("Open goals: Maria wants to run a marathon")


def test_enough_new_facts_queue_the_identity_part(owner, no_llm, redis_client):
    seed_facts(owner)
    user = maria(owner)
    synopsis_generate(end_user_id=user.pk)
    later = timezone.now() + timedelta(seconds=1)
    new = write(owner, *(fact(f"User likes sport {i}.", "preference", at=later) for i in range(4)))
    assert synopsis_facts_refresh(project_id=owner.project.pk, memory_ids=[m.pk for m in new]) == 0
    assert synopsis_generate(end_user_id=user.pk) == []  # 4 < refresh_after_facts (5)
    [fifth] = write(owner, fact("User likes chess.", "preference", at=later))
    assert synopsis_facts_refresh(project_id=owner.project.pk, memory_ids=[fifth.pk]) == 1
    assert queued_tasks(redis_client) == [
        ("synopsis.tasks.synopsis_generate_task", f"[{user.pk}, ['identity']]")
    ]
    assert synopsis_generate(end_user_id=user.pk) == ["identity"]
    assert "likes chess" in Synopsis.objects.get(end_user=user).identity_text
    # another project's ids are not this project's users
    assert synopsis_facts_refresh(project_id=owner.project.pk + 1, memory_ids=[fifth.pk]) == 0


def test_with_an_llm_each_part_is_its_answer(owner, llm_server, llm_settings):
    facts = seed_facts(owner)
    seed_context(owner)
    user = maria(owner)
    llm_server.ok("Maria, 34, lives in Porto and loves jazz.")
    llm_server.ok("Maria is planning a trip to Lisbon.")
    assert synopsis_generate(end_user_id=user.pk) == ["identity", "context"]
    row = Synopsis.objects.get(end_user=user)
    assert row.identity_text == "Maria, 34, lives in Porto and loves jazz."
    assert row.context_text == "Maria is planning a trip to Lisbon."
    assert row.identity_generator == row.context_generator == "llm:stub-model"
    identity_prompt, context_prompt = (r.prompt for r in llm_server.requests)
    assert "The user's name: Maria" in identity_prompt
    assert "- User is allergic to peanuts. (confidence 0.80)" in identity_prompt
    assert "User lives in Lisbon." not in identity_prompt  # superseded
    assert "(due 2027-06-30)" in context_prompt and "hotel in Lisbon" in context_prompt
    assert str(facts["User likes jazz."].pk) in row.identity_source_ids


def test_an_llm_answer_over_max_tokens_is_cut(owner, llm_server, llm_settings):
    seed_facts(owner)
    configure(owner, max_tokens=20)
    llm_server.ok("Maria lives in Porto. " * 30)
    synopsis_generate(end_user_id=maria(owner).pk, parts=["identity"])
    row = Synopsis.objects.get(end_user=maria(owner))
    assert 0 < row.identity_token_count <= 20 and row.identity_text.endswith("Porto.")


def test_an_llm_refusal_falls_back_to_the_template(owner, llm_server, llm_settings):
    seed_facts(owner)
    llm_server.refusal()
    user = maria(owner)
    synopsis_generate(end_user_id=user.pk, parts=["identity"])
    row = Synopsis.objects.get(end_user=user)
    assert row.identity_text == IDENTITY
    assert row.identity_generator == "template; llm:stub-model failed: refusal"


def test_an_llm_that_stays_down_leaves_the_synopsis_as_it_was(owner, llm_server, llm_settings):
    seed_facts(owner)
    user = maria(owner)
    llm_server.status(503).status(503).status(503)
    with pytest.raises(LlmError) as raised:
        synopsis_generate(end_user_id=user.pk, parts=["identity"])
    assert raised.value.retryable
    assert not Synopsis.objects.filter(end_user=user, identity_generated_at__isnull=False).exists()


def test_no_material_means_no_llm_call(owner, llm_server, llm_settings):
    seed_facts(owner)
    synopsis_generate(end_user_id=maria(owner).pk, parts=["context"])
    assert llm_server.requests == []
    assert Synopsis.objects.get(end_user=maria(owner)).context_generator == "template"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_regenerates_what_a_read_found_stale(owner, celery_worker_process):
    seed_facts(owner)
    user = maria(owner)
    assert synopsis_get(end_user=user).refresh_scheduled  # the context part, at least
    fresh = wait_until(
        lambda: (v := synopsis_get(end_user=user)).identity.freshness == "fresh" and v, timeout=60
    )
    assert fresh.identity.text == IDENTITY and not fresh.refresh_scheduled

    # five new facts through the API: the write's receiver asks for the identity part
    for i in range(5):
        body = {
            "user": "maria",
            "kind": "fact",
            "content": f"User plays sport {i}.",
            "content_json": {"category": "preference"},
        }
        assert owner.client.post("/api/v1/memories/", body, format="json").status_code == 201
    wait_until(lambda: "sport 4" in Synopsis.objects.get(end_user=user).identity_text, timeout=60)
