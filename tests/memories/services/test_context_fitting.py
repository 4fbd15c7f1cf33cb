"""The context's budget, property-tested: whatever the budget, the section shares and
the items, the rendered text re-counted is within the budget, and every section
stays within its share plus what earlier sections left."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memories.providers.tokens import token_count
from memories.services.context.fitting import (
    SECTIONS,
    budgets_split,
    deduplicate,
    fit,
    sections_fill,
)
from memories.services.context.sources import Candidate

WORDS = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FFF), min_size=1, max_size=40
)
TEXTS = st.lists(WORDS, min_size=1, max_size=60).map(" ".join)


@st.composite
def candidates(draw):
    items = draw(
        st.lists(
            st.tuples(st.sampled_from(SECTIONS), TEXTS, st.floats(0, 2)), min_size=0, max_size=40
        )
    )
    return [
        Candidate(section=s, key=f"k{i}", kind="message", text=f"- {t}", score=score)
        for i, (s, t, score) in enumerate(items)
    ]


@st.composite
def shares(draw):
    raw = draw(st.lists(st.floats(0, 1), min_size=len(SECTIONS), max_size=len(SECTIONS)))
    total = sum(raw) or 1.0
    scale = draw(st.floats(0.1, 1.0))
    return {name: value / total * scale for name, value in zip(SECTIONS, raw, strict=True)}


@settings(max_examples=150, deadline=None)
@given(items=candidates(), max_tokens=st.integers(100, 3000), split=shares())
def test_the_rendered_context_is_never_over_its_budget(items, max_tokens, split):
    kept, _ = deduplicate(items)
    budgets = budgets_split(max_tokens, history=0.5, retrieved=0.3, shares=split)
    assert sum(budgets.values()) <= max_tokens
    sections = sections_fill(kept, budgets, "cl100k_base")
    carry = 0
    for section in sections:
        assert section.budget == budgets[section.name] + carry
        assert section.tokens <= section.budget
        carry = section.budget - section.tokens
    text, total = fit(sections, max_tokens, "cl100k_base")
    assert total == token_count(text, "cl100k_base") <= max_tokens


def test_unused_budget_flows_to_the_next_section():
    long = [
        Candidate("history", f"h{i}", "message", f"- turn {i} " + "word " * 30, 1 - i / 100)
        for i in range(20)
    ]  # noqa: E501
    budgets = budgets_split(1000, history=0.2, retrieved=0.0)
    # no synopsis, facts or working items: their 800 tokens flow to history
    [synopsis, facts, working, history, retrieved] = sections_fill(long, budgets, "cl100k_base")
    assert (synopsis.budget, facts.tokens, working.budget) == (266, 0, 266 * 3)
    assert history.budget == 200 + 266 * 3
    assert history.tokens > 200  # it used what the empty sections left
    assert retrieved.budget == history.budget - history.tokens


def test_a_memory_or_its_text_appears_once_in_its_most_valuable_section():
    items = [
        Candidate("retrieved", "m1", "message", "[2026-05-01] maria (user): I love jazz.", 0.9),
        Candidate("history", "m1", "message", "[2026-05-01 10:00] maria (user): I love jazz.", 0.5),
        Candidate("retrieved", "m2", "message", "[2026-05-02] maria (user): User loves jazz", 0.8),
        Candidate("facts", "f1", "fact", "- User loves jazz.", 0.7),
    ]
    kept, duplicates = deduplicate(items)
    assert [(c.section, c.key) for c in kept] == [("facts", "f1"), ("history", "m1")]
    assert {(c.section, c.key) for c in duplicates} == {("retrieved", "m1"), ("retrieved", "m2")}
