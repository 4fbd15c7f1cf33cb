"""The summarizers (synopsis/summarizers.py): the LLM's summary when one is configured,
the extractive one offline or when the LLM fails for good, always within budget."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memories.providers.tokens import token_count
from synopsis.llm import LlmError
from synopsis.models import LlmCall
from synopsis.summarizers import SummaryDraft, Turn, summary_draft


def turn(number: int, day: int, speaker: str, content: str) -> Turn:
    role = "assistant" if speaker == "assistant" else "user"
    moment = datetime(2026, 5, day, 9, number, tzinfo=UTC)
    return Turn(id=f"t{number}", role=role, content=content, created_at=moment, speaker=speaker)


MARIA = "Maria (user)"
TURNS = [
    turn(1, 1, MARIA, "Hi! I moved to Lisbon last week. The flat is near the river."),
    turn(2, 1, "assistant", "Welcome to Lisbon! How do you like the new flat so far?"),
    turn(3, 2, MARIA, "I love it. My sister Ana visits on June 12 with her two kids."),
    turn(
        4,
        2,
        "assistant",
        "That sounds lovely. Shall I remind you on June 11 to get the guest room ready?",
    ),  # noqa: E501
    turn(5, 3, MARIA, "Yes please. Also, I'm allergic to peanuts, so no peanut recipes."),
    turn(6, 3, "assistant", "Noted: no peanuts. I will suggest other recipes."),
]
PREVIOUS = "\n".join(
    [
        "Conversation from 2026-04-20 to 2026-04-21: Maria (user), assistant",
        "[2026-04-20] Maria (user): I work as a nurse at Santa Maria hospital.",
        "[2026-04-21] assistant: Your night shifts end at 7 am on weekdays.",
    ]
)


def draft(**options) -> SummaryDraft:
    arguments = {"turns": TURNS, "previous": None, "max_tokens": 200, **options}
    return summary_draft(**arguments)


# --- with an LLM ------------------------------------------------------------------------


def test_the_llm_writes_the_summary(owner, llm_server, llm_settings):
    text = "Maria moved to Lisbon; her sister Ana visits on June 12. She is allergic to peanuts."
    llm_server.ok(text, prompt_tokens=310, completion_tokens=22)

    result = draft(previous=PREVIOUS, project_id=owner.project.pk)

    assert result == SummaryDraft(
        text=text,
        summarizer="llm:stub-model",
        token_count=token_count(text),
        fallback_reason=None,
        usage={"prompt_tokens": 310, "completion_tokens": 22},
    )
    [request] = llm_server.requests
    prompt = request.prompt
    assert "third person" in prompt and "previous summary" in prompt.lower()
    assert "I work as a nurse at Santa Maria hospital." in prompt  # the chain is folded in
    assert "[2026-05-02 09:03] Maria (user): I love it. My sister Ana visits on June 12" in prompt
    assert "[2026-05-03 09:06] assistant: Noted: no peanuts." in prompt
    assert request.body["max_tokens"] >= 200
    call = LlmCall.objects.get()
    assert (call.project, call.purpose, call.status, call.prompt_tokens) == (
        owner.project,
        "summary",
        "ok",
        310,
    )


def test_a_summary_over_budget_is_cut_at_a_sentence(db, llm_server, llm_settings):
    sentences = [f"Maria said thing number {n} about her life in Lisbon." for n in range(40)]
    llm_server.ok(" ".join(sentences))
    result = draft(max_tokens=60)
    assert result.token_count == token_count(result.text) <= 60
    assert result.text.endswith("Lisbon.")
    assert result.text.startswith(sentences[0])
    assert result.summarizer == "llm:stub-model"


@pytest.mark.parametrize(
    ("script", "kind"),
    [
        (lambda server: server.refusal("I won't summarize this."), "refusal"),
        (lambda server: server.malformed(), "malformed"),
        (lambda server: server.status(400), "bad_request"),
    ],
)
def test_a_permanent_llm_failure_falls_back_to_extractive(
    owner, llm_server, llm_settings, provider, script, kind
):
    script(llm_server)
    result = draft(project_id=owner.project.pk)
    assert result.summarizer == "extractive"
    assert result.fallback_reason is not None and result.fallback_reason.startswith(f"{kind}: ")
    assert result.usage is None
    assert result.text.startswith("Conversation from 2026-05-01 to 2026-05-03: ")
    assert len(llm_server.requests) == 1  # not retried
    call = LlmCall.objects.get()
    assert (call.status, call.error_kind) == ("failed", "permanent")


def test_a_retryable_llm_failure_propagates(owner, llm_server, llm_settings, provider):
    for _ in range(3):  # the first attempt and its two retries
        llm_server.status(503)
    with pytest.raises(LlmError) as raised:
        draft(project_id=owner.project.pk)
    assert raised.value.retryable
    assert provider.calls == []  # no extractive summary was made in its place
    assert LlmCall.objects.get().error_kind == "retryable"


# --- extractive ---------------------------------------------------------------------------


def lines_of(result: SummaryDraft) -> list[str]:
    return result.text.split("\n")


def test_without_an_llm_the_summary_is_extractive(no_llm, provider):
    result = draft(max_tokens=1_000)
    assert (result.summarizer, result.fallback_reason, result.usage) == ("extractive", None, None)
    header, *lines = lines_of(result)
    assert header == "Conversation from 2026-05-01 to 2026-05-03: Maria (user), assistant"
    # with room for everything, every sentence, in order, with its date and speaker
    assert lines == [
        "[2026-05-01] Maria (user): Hi!",
        "[2026-05-01] Maria (user): I moved to Lisbon last week.",
        "[2026-05-01] Maria (user): The flat is near the river.",
        "[2026-05-01] assistant: Welcome to Lisbon!",
        "[2026-05-01] assistant: How do you like the new flat so far?",
        "[2026-05-02] Maria (user): I love it.",
        "[2026-05-02] Maria (user): My sister Ana visits on June 12 with her two kids.",
        "[2026-05-02] assistant: That sounds lovely.",
        "[2026-05-02] assistant: Shall I remind you on June 11 to get the guest room ready?",
        "[2026-05-03] Maria (user): Yes please.",
        "[2026-05-03] Maria (user): Also, I'm allergic to peanuts, so no peanut recipes.",
        "[2026-05-03] assistant: Noted: no peanuts.",
        "[2026-05-03] assistant: I will suggest other recipes.",
    ]
    assert len(provider.calls) == 1  # every candidate embedded in one batch
    assert result.token_count == token_count(result.text)


@pytest.mark.parametrize("budget", [5, 20, 35, 50, 80, 120])
def test_the_extractive_summary_stays_within_budget(no_llm, provider, budget):
    result = draft(max_tokens=budget)
    assert result.token_count == token_count(result.text) <= budget
    header, *lines = lines_of(result)
    assert "Conversation from 2026-05-01".startswith(header[:28])
    everything = lines_of(draft(max_tokens=1_000))[1:]
    assert all(line in everything for line in lines)
    assert lines == [line for line in everything if line in lines]  # chronological


def test_a_larger_budget_keeps_more(no_llm, provider):
    kept = [len(lines_of(draft(max_tokens=budget))) for budget in (45, 70, 100, 160)]
    assert kept == sorted(kept) and kept[0] < kept[-1]
    assert kept[0] >= 2  # the header and at least one sentence


def test_the_previous_summary_is_folded_in(no_llm, provider):
    result = draft(
        turns=TURNS[:2] + [turn(7, 3, "Tom (user)", "Hello, I am Tom.")],
        previous=PREVIOUS,
        max_tokens=1_000,
    )
    header, *lines = lines_of(result)
    # the range starts where the chain started; new speakers join the participants
    assert header == (
        "Conversation from 2026-04-20 to 2026-05-03: Maria (user), assistant, Tom (user)"
    )
    # the previous lines survive verbatim (their prefixes too), before the new ones
    assert lines[:2] == PREVIOUS.split("\n")[1:]
    assert lines[-1] == "[2026-05-03] Tom (user): Hello, I am Tom."
    assert provider.texts[:2] == [
        "I work as a nurse at Santa Maria hospital.",
        "Your night shifts end at 7 am on weekdays.",
    ]  # embedded as the sentences they are, without the prefix


def test_previous_lines_compete_for_the_budget(no_llm, provider):
    result = draft(previous=PREVIOUS, max_tokens=90)
    assert result.token_count <= 90
    assert lines_of(result)[0].startswith("Conversation from 2026-04-20 to 2026-05-03: ")
    carried = [line for line in lines_of(result) if line.startswith("[2026-04")]
    assert all(line in PREVIOUS.split("\n") for line in carried)


def test_a_previous_summary_in_prose_is_split_into_sentences(no_llm, provider):
    prose = "Maria is a nurse in Lisbon. She works night shifts."
    result = draft(turns=TURNS[:1], previous=prose, max_tokens=1_000)
    header, *lines = lines_of(result)
    assert header == "Conversation from 2026-05-01 to 2026-05-01: Maria (user)"
    assert lines[:2] == ["Maria is a nurse in Lisbon.", "She works night shifts."]


def test_the_extractive_summary_is_deterministic(no_llm, provider):
    for budget in (40, 90):
        first = draft(previous=PREVIOUS, max_tokens=budget)
        assert draft(previous=PREVIOUS, max_tokens=budget) == first


def test_a_long_sentence_is_cut_rather_than_lost(no_llm, provider):
    rambling = "I " + " and then ".join(f"went to place {n}" for n in range(60))
    result = draft(turns=[turn(1, 1, MARIA, rambling)], max_tokens=200)
    [_, line] = lines_of(result)
    assert line.startswith("[2026-05-01] Maria (user): I went to place 0 and then")
    assert line.endswith("…")
    assert result.token_count <= 200


def test_repeated_lines_are_kept_once(no_llm, provider):
    turns = [turn(1, 1, MARIA, "I live in Lisbon."), turn(2, 1, MARIA, "I live in Lisbon.")]
    assert lines_of(draft(turns=turns))[1:] == ["[2026-05-01] Maria (user): I live in Lisbon."]


def test_nothing_to_summarize_is_an_error(no_llm, provider):
    with pytest.raises(ValueError):
        draft(turns=[])
    with pytest.raises(ValueError):
        draft(max_tokens=0)


def test_facts_outweigh_small_talk(no_llm, provider):
    turns = [
        turn(1, 1, MARIA, "Hi there!"),
        turn(2, 1, "assistant", "Sounds good."),
        turn(3, 1, MARIA, "My sister Ana visits on June 12 with her two kids."),
        turn(4, 1, "assistant", "Okay, thanks."),
    ]
    fact = "[2026-05-01] Maria (user): My sister Ana visits on June 12 with her two kids."
    header = "Conversation from 2026-05-01 to 2026-05-01: Maria (user), assistant"
    budget = token_count(f"{header}\n{fact}")  # room for one line: the fact or small talk
    assert lines_of(draft(turns=turns, max_tokens=budget)) == [header, fact]
