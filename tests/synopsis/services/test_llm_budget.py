"""The monthly token budget (synopsis/services/llm_budget.py): once a project's LLM
tokens this month reach ``llm.monthly_token_budget``, its summaries, facts and synopses
are made offline, no LLM call is made or recorded, and writes still succeed; the count
starts over on the first of the month (UTC); another project's usage is its own."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from memories.models import Memory, Synopsis
from synopsis.models import FactExtraction, LlmCall
from synopsis.services.facts import messages_facts_extract
from synopsis.services.llm_budget import (
    BUDGET_SPENT,
    llm_budget_get,
    llm_budget_spent,
    month_bounds,
)
from synopsis.services.summaries import room_summarize
from synopsis.services.synopses import synopsis_generate
from tests.synopsis.services.test_summaries import append, small_room
from tests.synopsis.synopsis_seeds import maria, seed_facts


@pytest.fixture(autouse=True)
def no_cached_sums(redis_client):
    """No month's sum cached by an earlier run (project ids repeat across test runs)."""
    for key in redis_client.scan_iter(match="memoryhub:llm-tokens:*"):
        redis_client.delete(key)


def budget_set(tenant, tokens):
    response = tenant.client.patch(
        "/api/v1/settings/", {"llm": {"monthly_token_budget": tokens}}, format="json"
    )
    assert response.status_code == 200, response.json()
    tenant.project.refresh_from_db()


def spend(tenant, prompt, completion, *, at=None):
    """A recorded call of the tenant's project (``at``: now)."""
    return LlmCall.objects.create(
        project=tenant.project,
        purpose="summary",
        model="stub-model",
        status="ok",
        prompt_tokens=prompt,
        completion_tokens=completion,
        created_at=at or datetime.now(UTC),
    )


def maria_says(tenant, text):
    body = {"user": "maria", "room": "chat", "role": "user", "content": text}
    response = tenant.client.post("/api/v1/memories/", body, format="json")
    assert response.status_code == 201, response.json()  # a write never fails
    return response.json()["memory"]["id"]


def test_a_spent_budget_summarizes_offline_and_calls_no_llm(owner, llm_server, llm_settings):
    budget_set(owner, 100)
    spend(owner, 80, 20)
    room = small_room(owner)
    append(owner, 6)
    [summary] = room_summarize(room_id=room.pk)
    assert summary.metadata["summarizer"] == "extractive"
    assert summary.metadata["fallback_reason"] == BUDGET_SPENT
    assert llm_server.requests == []
    assert LlmCall.objects.filter(project=owner.project).count() == 1  # none recorded


def test_a_spent_budget_extracts_facts_offline_and_the_write_succeeds(
    owner, llm_server, llm_settings
):
    budget_set(owner, 100)
    spend(owner, 100, 0)
    message_id = maria_says(owner, "I live in Lisbon and I work at Acme Corp.")
    messages_facts_extract(memory_ids=[message_id])
    extraction = FactExtraction.objects.get(message_id=message_id)
    assert (extraction.status, extraction.extractor) == ("done", "offline")
    facts = Memory.objects.filter(project=owner.project, kind="fact", status="active")
    assert "User lives in Lisbon." in {fact.content for fact in facts}
    assert llm_server.requests == []
    assert LlmCall.objects.filter(project=owner.project).count() == 1


def test_a_spent_budget_writes_the_synopsis_by_template(owner, llm_server, llm_settings):
    budget_set(owner, 50)
    spend(owner, 40, 10)
    seed_facts(owner)
    user = maria(owner)
    synopsis_generate(end_user_id=user.pk, parts=["identity"])
    row = Synopsis.objects.get(end_user=user)
    assert row.identity_generator == f"template; {BUDGET_SPENT}"
    assert llm_server.requests == []


def test_the_call_that_crosses_the_budget_is_the_last(owner, llm_server, llm_settings):
    budget_set(owner, 100)
    room = small_room(owner)
    append(owner, 6)
    llm_server.ok("Maria and the assistant discussed topics 0 and 1.", prompt_tokens=95)
    [first] = room_summarize(room_id=room.pk)
    assert first.metadata["summarizer"] == "llm:stub-model"
    # 95 prompt + the stub's 5 completion tokens reach the budget
    assert llm_budget_get(project=owner.project, cached=False).tokens >= 100
    append(owner, 2, start=6)
    [second] = room_summarize(room_id=room.pk)  # the cached sum counted the call at once
    assert second.metadata["summarizer"] == "extractive"
    assert len(llm_server.requests) == 1


def test_no_budget_means_no_limit(owner, llm_server, llm_settings):
    spend(owner, 10_000_000, 0)
    assert not llm_budget_spent(project_id=owner.project.pk)
    usage = llm_budget_get(project=owner.project)
    assert (usage.budget, usage.spent, usage.remaining) == (0, False, None)


def test_last_months_tokens_do_not_count(owner, llm_server, llm_settings):
    start, _ = month_bounds()
    budget_set(owner, 100)
    spend(owner, 5000, 0, at=start - timedelta(seconds=1))
    assert not llm_budget_spent(project_id=owner.project.pk)
    room = small_room(owner)
    append(owner, 6)
    llm_server.ok("Maria and the assistant discussed topics 0 and 1.", prompt_tokens=10)
    [summary] = room_summarize(room_id=room.pk)
    assert summary.metadata["summarizer"] == "llm:stub-model"


def test_the_month_boundary_resets_the_count(owner):
    budget_set(owner, 100)
    last_second = datetime(2026, 11, 30, 23, 59, 59, tzinfo=UTC)
    spend(owner, 90, 30, at=last_second)
    november = llm_budget_get(project=owner.project, now=last_second + timedelta(seconds=0.5))
    assert (november.tokens, november.spent, f"{november.month_start:%Y-%m}") == (
        120,
        True,
        "2026-11",
    )
    assert november.resets_at == datetime(2026, 12, 1, tzinfo=UTC)
    december = llm_budget_get(project=owner.project, now=datetime(2026, 12, 1, tzinfo=UTC))
    assert (december.tokens, december.spent, december.remaining) == (0, False, 100)
    assert december.resets_at == datetime(2027, 1, 1, tzinfo=UTC)


def test_another_projects_tokens_are_its_own(owner, outsider, llm_server, llm_settings):
    budget_set(owner, 100)
    budget_set(outsider, 100)
    spend(outsider, 500, 0)
    assert llm_budget_spent(project_id=outsider.project.pk)
    assert not llm_budget_spent(project_id=owner.project.pk)
    llm_server.ok(json.dumps({"facts": []}))
    message_id = maria_says(owner, "I live in Lisbon.")
    messages_facts_extract(memory_ids=[message_id])
    assert FactExtraction.objects.get(message_id=message_id).extractor == "llm:stub-model"


def test_without_redis_the_sum_is_read_from_the_database(owner, monkeypatch):
    budget_set(owner, 100)
    spend(owner, 60, 60)

    def unreachable(*args, **kwargs):
        raise __import__("redis").ConnectionError("down")

    monkeypatch.setattr("synopsis.services.llm_budget.redis_client", unreachable)
    assert llm_budget_spent(project_id=owner.project.pk)
