"""Fact extraction (synopsis/extraction.py): with an LLM, its JSON answer is validated
strictly and an invalid one yields nothing but an error; without one, the offline
extractor answers. Nothing is stored but the LlmCall the client records."""

from __future__ import annotations

import json
from typing import Any

import pytest

from synopsis.extraction import (
    CATEGORIES,
    ExtractionResult,
    FactDraft,
    facts_draft,
    facts_draft_offline,
)
from synopsis.llm import LlmError
from synopsis.models import LlmCall

MESSAGE = (
    "Hi! I moved to Lisbon last spring, call me Sam. My sister Ana visits in June. "
    "I'm allergic to peanuts and I want to run a marathon by June 2027."
)


def entry(**fields: Any) -> dict[str, Any]:
    base = {
        "content": "User lives in Lisbon.",
        "category": "location",
        "confidence": 0.9,
        "slot": "location.home",
        "value": "Lisbon",
        "subject": None,
        "predicate": None,
        "object": None,
        "goal_status": None,
        "due": None,
    }
    return {**base, **fields}


FACTS = [
    entry(),
    entry(
        content="User's sister is Ana.",
        category="relationship",
        slot=None,
        value=None,
        subject="User",
        predicate="sister",
        object="Ana",
        confidence=0.85,
    ),
    entry(
        content="User is allergic to peanuts.",
        category="health",
        slot=None,
        value=None,
        confidence=1,
    ),
    entry(
        content="User wants to run a marathon by June 2027.",
        category="goal",
        slot=None,
        value=None,
        goal_status="open",
        due="2027-06-01",
        confidence=0.7,
    ),
]


def answer(facts: list[dict[str, Any]]) -> str:
    return json.dumps({"facts": facts})


def test_the_llm_s_facts_become_drafts(owner, llm_server, llm_settings):
    llm_server.ok(answer(FACTS), prompt_tokens=420, completion_tokens=160)

    result = facts_draft(text=MESSAGE, project_id=owner.project.pk, speaker="Sam")

    assert result.extractor == "llm:stub-model" and result.error is None
    home, sister, allergy, marathon = result.drafts
    assert home == FactDraft(
        kind="fact",
        content="User lives in Lisbon.",
        category="location",
        confidence=0.9,
        slot="location.home",
        value="lisbon",
        evidence="I moved to Lisbon last spring, call me Sam.",
    )
    assert (sister.kind, sister.subject, sister.predicate, sister.object, sister.slot) == (
        "relationship",
        "User",
        "sister",
        "Ana",
        None,
    )
    assert sister.evidence == "My sister Ana visits in June."
    assert (allergy.kind, allergy.category, allergy.confidence) == ("fact", "health", 1.0)
    assert (marathon.kind, marathon.goal_status, marathon.due) == ("goal", "open", "2027-06-01")
    call = LlmCall.objects.get()
    assert (call.project, call.purpose, call.status, call.prompt_tokens) == (
        owner.project,
        "facts",
        "ok",
        420,
    )


def test_the_prompt_holds_the_user_s_words_and_asks_for_json(db, llm_server, llm_settings):
    llm_server.ok(answer([]))

    result = facts_draft(text=MESSAGE, speaker="Sam")

    assert result == ExtractionResult(drafts=[], extractor="llm:stub-model")
    [request] = llm_server.requests
    system, user = request.messages
    assert system["role"] == "system" and user["role"] == "user"
    assert MESSAGE in user["content"] and "(Sam)" in user["content"]
    assert "JSON" in system["content"] and '{"facts": [' in system["content"]
    for category in CATEGORIES:
        assert category in system["content"]
    assert "third person" in system["content"] and "questions" in system["content"]
    assert request.body["temperature"] == 0.0


def test_a_goal_s_status_defaults_to_open_and_a_fenced_answer_is_read(db, llm_server, llm_settings):  # noqa: E501
    fact = entry(content="User wants to learn Spanish.", category="goal", slot=None, value=None)
    llm_server.ok(f"```json\n{answer([fact])}\n```")

    [draft] = facts_draft(text="I want to learn Spanish.").drafts

    assert (draft.kind, draft.goal_status, draft.due) == ("goal", "open", None)


def test_an_answer_that_is_not_json_gives_no_drafts_and_an_error(db, llm_server, llm_settings):
    llm_server.ok("Sure! Here are the facts: User lives in Lisbon.")

    result = facts_draft(text=MESSAGE)

    assert result.drafts == [] and result.extractor == "llm:stub-model"
    assert result.error is not None and result.error.startswith("malformed: not JSON")
    assert LlmCall.objects.get().status == "ok"  # the endpoint answered; the answer is bad


@pytest.mark.parametrize(
    ("facts", "error"),
    [
        (
            [FACTS[0], entry(category="hobby")],
            "invalid: facts[1].category 'hobby' is not one of identity, preference",
        ),
        ([entry(confidence=1.5)], "invalid: facts[0].confidence 1.5 is not between 0 and 1"),
        ([entry(confidence="high")], "invalid: facts[0].confidence must be a number"),
        ([entry(confidence=True)], "invalid: facts[0].confidence must be a number"),
        ([entry(content="")], "invalid: facts[0].content must be a non-empty string"),
        ([entry(content="x" * 501)], "invalid: facts[0].content is over 500 characters"),
        ([entry(slot=7)], "invalid: facts[0].slot must be a string or null"),
        ([entry(value=None)], "invalid: facts[0].slot 'location.home' has no value"),
        (
            [entry(subject="User", predicate="sister")],
            "invalid: facts[0]: subject, predicate and object go together",
        ),
        (
            [entry(category="goal", goal_status="someday")],
            "invalid: facts[0].goal_status 'someday' is not one of open, done, abandoned",
        ),
        ([entry(category="goal", due="next June")], "invalid: facts[0].due 'next June'"),
        ([entry()] * 21, "invalid: 21 facts, at most 20"),
        (["User lives in Lisbon."], "invalid: facts[0] is not an object"),
    ],
)
def test_an_answer_breaking_a_rule_gives_no_drafts_at_all(
    db, llm_server, llm_settings, facts: list[Any], error: str
):
    llm_server.ok(answer(facts))

    result = facts_draft(text=MESSAGE)

    assert result.drafts == []
    assert result.error is not None and result.error.startswith(error), result.error


@pytest.mark.parametrize("body", ['[{"content": "User lives in Lisbon."}]', '{"fact": []}'])
def test_an_answer_without_a_facts_list_is_invalid(db, llm_server, llm_settings, body: str):
    llm_server.ok(body)

    result = facts_draft(text=MESSAGE)

    assert (result.drafts, result.error) == ([], 'invalid: expected an object with a "facts" list')


def test_a_refusal_gives_no_drafts_and_an_error(db, llm_server, llm_settings):
    llm_server.refusal("I can't help with that.")

    result = facts_draft(text=MESSAGE)

    assert result == ExtractionResult(
        drafts=[], extractor="llm:stub-model", error="refusal: refused: I can't help with that."
    )
    assert LlmCall.objects.get().status == "failed"


def test_an_unavailable_llm_raises_a_retryable_error(db, llm_server, llm_settings):
    for _ in range(3):  # the first attempt and both retries
        llm_server.status(503)

    with pytest.raises(LlmError) as raised:
        facts_draft(text=MESSAGE)

    assert raised.value.retryable and raised.value.kind == "server_error"
    assert len(llm_server.requests) == 3
    assert LlmCall.objects.get().error_kind == "retryable"


def test_blank_text_asks_the_llm_nothing(db, llm_server, llm_settings):
    assert facts_draft(text="  \n") == ExtractionResult(drafts=[], extractor="llm:stub-model")
    assert llm_server.requests == []


def test_without_an_llm_the_offline_extractor_answers(db, no_llm):
    result = facts_draft(text=MESSAGE, project_id=None, speaker="Sam")

    assert result.extractor == "offline" and result.error is None
    assert result.drafts == facts_draft_offline(MESSAGE)
    assert [d.content for d in result.drafts] == [
        "User moved to Lisbon.",
        "User's name is Sam.",
        "User's sister is Ana.",
        "User is allergic to peanuts.",
        "User wants to run a marathon by June 2027.",
    ]
    assert LlmCall.objects.count() == 0
