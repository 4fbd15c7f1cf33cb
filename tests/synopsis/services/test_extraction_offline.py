"""The offline fact extractor (synopsis/extraction_offline.py): what users say about
themselves in passing becomes drafts; questions, negations, hypotheticals, other
people's words and small talk yield nothing."""

from __future__ import annotations

from typing import Any

import pytest

from synopsis.extraction_offline import CATEGORIES, FactDraft, due_date, facts_draft_offline


def fact(category: str, content: str, slot: str | None = None, value: str | None = None) -> dict:
    return {"kind": "fact", "category": category, "slot": slot, "value": value, "content": content}


def relation(predicate: str, name: str, content: str) -> dict:
    return {
        "kind": "relationship",
        "category": "relationship",
        "slot": None,
        "value": None,
        "content": content,
        "subject": "User",
        "predicate": predicate,
        "object": name,
    }


def goal(content: str, due: str | None = None) -> dict:
    return {
        "kind": "goal",
        "category": "goal",
        "slot": None,
        "value": None,
        "content": content,
        "goal_status": "open",
        "due": due,
    }


CASES: list[tuple[str, list[dict[str, Any]]]] = [
    # identity
    ("Call me Sam.", [fact("identity", "User's name is Sam.", "identity.name", "sam")]),
    (
        "My name is Maria Silva.",
        [fact("identity", "User's name is Maria Silva.", "identity.name", "maria silva")],
    ),  # noqa: E501
    ("my name is sam", [fact("identity", "User's name is Sam.", "identity.name", "sam")]),
    ("Hi, I'm Sam!", [fact("identity", "User's name is Sam.", "identity.name", "sam")]),
    (
        "People call me Bobby.",
        [fact("identity", "User's name is Bobby.", "identity.name", "bobby")],
    ),  # noqa: E501
    ("I'm 34 years old.", [fact("identity", "User is 34 years old.", "identity.age", "34")]),
    (
        "My birthday is March 3rd.",
        [fact("identity", "User's birthday is March 3.", "identity.birthday", "03-03")],
    ),  # noqa: E501
    (
        "My birthday is 3 March.",
        [fact("identity", "User's birthday is March 3.", "identity.birthday", "03-03")],
    ),  # noqa: E501
    ("I speak Portuguese and English.", [fact("identity", "User speaks Portuguese and English.")]),
    # location
    (
        "I moved to Lisbon last spring.",
        [fact("location", "User moved to Lisbon.", "location.home", "lisbon")],
    ),  # noqa: E501
    (
        "We relocated to Berlin in 2021.",
        [fact("location", "User moved to Berlin in 2021.", "location.home", "berlin")],
    ),  # noqa: E501
    (
        "I live in New York.",
        [fact("location", "User lives in New York.", "location.home", "new york")],
    ),  # noqa: E501
    (
        "I'm living in São Paulo these days.",
        [fact("location", "User lives in São Paulo.", "location.home", "são paulo")],
    ),  # noqa: E501
    (
        "I'm from Porto, Portugal.",
        [fact("location", "User is from Porto, Portugal.", "location.origin", "porto, portugal")],
    ),  # noqa: E501
    (
        "My sister and I live in Leeds.",
        [fact("location", "User lives in Leeds.", "location.home", "leeds")],
    ),  # noqa: E501
    # work
    ("I work at Google.", [fact("work", "User works at Google.", "work.employer", "google")]),
    (
        "I work for the United Nations.",
        [fact("work", "User works at the United Nations.", "work.employer", "united nations")],
    ),  # noqa: E501
    ("I'm an architect.", [fact("work", "User is an architect.", "work.job_title", "architect")]),
    (
        "Oh, and I'm a software engineer at Google.",
        [
            fact("work", "User is a software engineer.", "work.job_title", "software engineer"),
            fact("work", "User works at Google.", "work.employer", "google"),
        ],
    ),
    (
        "I'm a nurse at Santa Maria hospital.",
        [
            fact("work", "User is a nurse.", "work.job_title", "nurse"),
            fact(
                "work",
                "User works at Santa Maria hospital.",
                "work.employer",
                "santa maria hospital",
            ),  # noqa: E501
        ],
    ),
    (
        "I just started at Spotify.",
        [fact("work", "User works at Spotify.", "work.employer", "spotify")],
    ),  # noqa: E501
    (
        "I got a job at a bakery.",
        [fact("work", "User works at a bakery.", "work.employer", "bakery")],
    ),  # noqa: E501
    # likes and dislikes
    ("I love jazz.", [fact("preference", "User loves jazz.")]),
    (
        "I really enjoy hiking in the mountains.",
        [fact("preference", "User enjoys hiking in the mountains.")],
    ),  # noqa: E501
    ("I love the beach.", [fact("preference", "User loves the beach.")]),
    ("I hate cilantro.", [fact("preference", "User hates cilantro.")]),
    (
        "I love pizza, pasta and gelato.",
        [fact("preference", "User loves pizza, pasta and gelato.")],
    ),  # noqa: E501
    ("I love jazz, it relaxes me.", [fact("preference", "User loves jazz.")]),
    ("I can't stand horror movies.", [fact("preference", "User can't stand horror movies.")]),
    ("I'm a big fan of Radiohead.", [fact("preference", "User likes Radiohead.")]),
    (
        "My favorite color is blue.",
        [fact("preference", "User's favorite color is blue.", "preference.favorite_color", "blue")],
    ),  # noqa: E501
    # family and pets
    ("My sister Ana lives in Porto.", [relation("sister", "Ana", "User's sister is Ana.")]),
    ("My husband is called Tom.", [relation("husband", "Tom", "User's husband is Tom.")]),
    (
        "I visited my mom, Linda, yesterday.",
        [relation("mother", "Linda", "User's mother is Linda.")],
    ),  # noqa: E501
    ("I'm married to Tom.", [relation("spouse", "Tom", "User is married to Tom.")]),
    ("I have a brother.", [fact("relationship", "User has a brother.")]),
    ("I have two kids.", [fact("relationship", "User has two kids.")]),
    ("I have a dog named Rex.", [relation("has_pet", "Rex", "User has a dog named Rex.")]),
    ("My cat's name is Luna.", [relation("has_pet", "Luna", "User has a cat named Luna.")]),
    ("I have two cats.", [fact("relationship", "User has two cats.")]),
    # health
    (
        "I'm allergic to peanuts and shellfish.",
        [
            fact("health", "User is allergic to peanuts."),
            fact("health", "User is allergic to shellfish."),
        ],
    ),
    (
        "I'm allergic to cats, dogs, and pollen.",
        [
            fact("health", "User is allergic to cats."),
            fact("health", "User is allergic to dogs."),
            fact("health", "User is allergic to pollen."),
        ],
    ),
    ("I have asthma.", [fact("health", "User has asthma.")]),
    ("I'm diabetic.", [fact("health", "User has diabetes.")]),
    ("I'm lactose intolerant.", [fact("health", "User is lactose intolerant.")]),
    (
        "I'm vegetarian.",
        [fact("preference", "User is vegetarian.", "preference.diet", "vegetarian")],
    ),  # noqa: E501
    # plans and goals
    ("I want to run a marathon.", [goal("User wants to run a marathon.")]),
    (
        "I plan to learn Portuguese by June 2027.",
        [goal("User plans to learn Portuguese by June 2027.", "2027-06-01")],
    ),  # noqa: E501
    (
        "My goal is to save $10,000 by the end of 2026.",
        [goal("User's goal is to save $10,000 by the end of 2026.", "2026-12-31")],
    ),  # noqa: E501
    (
        "I'm going to finish my thesis before March 15, 2027.",
        [goal("User is going to finish their thesis before March 15, 2027.", "2027-03-15")],
    ),  # noqa: E501
    # not facts: negations, questions, hypotheticals, other people, small talk
    ("I don't live in Paris.", []),
    ("I no longer work at Google.", []),
    ("I'm not allergic to anything.", []),
    ("Do you like jazz?", []),
    ("Where do you live?", []),
    ("Can you call me Sam?", []),
    ("If I moved to Rome, I would learn Italian.", []),
    ("When I lived in Paris I was happy.", []),
    ("My mom says I'm lazy.", []),
    ("My friend told me she moved to Rome.", []),
    ('Ana said: "I live in Lisbon."', []),
    ("He lives in London.", []),
    ("My sister lives in Paris.", []),
    ("I'm tired.", []),
    ("I'm Italian.", []),
    ("I'm a big fan.", []),
    ("I'm Sam's mom.", []),
    ("I love it!", []),
    ("I like that idea.", []),
    ("I'd like a coffee, please.", []),
    ("I want to know what time it is.", []),
    ("I'm going to grab a coffee.", []),
    ("I'm going to Paris next week.", []),
    ("Please call me back tomorrow.", []),
    ("My name is not important.", []),
]


def observed(draft: FactDraft, expected: dict[str, Any]) -> dict[str, Any]:
    return {key: getattr(draft, key) for key in expected}


@pytest.mark.parametrize(("sentence", "expected"), CASES, ids=[case[0] for case in CASES])
def test_a_sentence_yields_these_drafts(sentence: str, expected: list[dict[str, Any]]) -> None:
    drafts = facts_draft_offline(sentence)

    assert [observed(d, e) for d, e in zip(drafts, expected, strict=False)] == expected
    assert len(drafts) == len(expected), drafts
    for draft in drafts:
        assert draft.category in CATEGORIES
        assert draft.content.startswith("User") and draft.content.endswith(".")
        assert draft.evidence == sentence
        assert 0.6 <= draft.confidence <= 0.8


def test_the_table_has_enough_sentences() -> None:
    assert len(CASES) >= 40
    assert sum(1 for _, expected in CASES if not expected) >= 20  # negatives


def test_confidence_is_conservative_and_lower_when_hedged() -> None:
    [explicit] = facts_draft_offline("My name is Sam.")
    [clear] = facts_draft_offline("I live in Lisbon.")
    [hedged] = facts_draft_offline("I think I'm allergic to cats.")
    [probably] = facts_draft_offline("I'm probably moving... well, I probably live in Porto now.")

    assert (explicit.confidence, clear.confidence) == (0.8, 0.7)
    assert (hedged.content, hedged.confidence) == ("User is allergic to cats.", 0.6)
    assert (probably.value, probably.confidence) == ("porto", 0.6)


def test_a_message_is_mined_sentence_by_sentence_with_each_fact_once() -> None:
    text = (
        "Hi! I'm Sam, I'm a nurse and I love jazz. Do you like jazz? "
        "I moved to Lisbon last spring. Call me Sam.\nI'm allergic to peanuts, by the way."
    )

    drafts = facts_draft_offline(text)

    assert [(d.content, d.evidence) for d in drafts] == [
        ("User's name is Sam.", "I'm Sam, I'm a nurse and I love jazz."),
        ("User is a nurse.", "I'm Sam, I'm a nurse and I love jazz."),
        ("User loves jazz.", "I'm Sam, I'm a nurse and I love jazz."),
        ("User moved to Lisbon.", "I moved to Lisbon last spring."),
        ("User is allergic to peanuts.", "I'm allergic to peanuts, by the way."),
    ]


def test_a_move_and_a_later_home_share_the_slot() -> None:
    """The consolidation supersedes by slot: both must name the same one."""
    [moved] = facts_draft_offline("I moved to Lisbon last spring.")
    [lives] = facts_draft_offline("I live in Lisbon.")

    assert (moved.slot, moved.value) == (lives.slot, lives.value) == ("location.home", "lisbon")


def test_the_extractor_is_pure() -> None:
    text = "I'm Sam. I have a dog named Rex and I want to learn Spanish by May 2027."
    assert facts_draft_offline(text) == facts_draft_offline(text)
    assert facts_draft_offline("") == [] == facts_draft_offline("   \n ")


@pytest.mark.parametrize(
    ("text", "due"),
    [
        ("run a marathon by June 2027", "2027-06-01"),
        ("learn Spanish by 2027-06-30", "2027-06-30"),
        ("finish it by 12 June 2027", "2027-06-12"),
        ("move by the end of May 2027", "2027-05-31"),
        ("save money by the end of 2026", "2026-12-31"),
        ("run a marathon by June", None),  # no year: not a clear date
        ("run a marathon in 2027", None),
        ("finish by 2027-02-30", None),
        ("learn Spanish someday", None),
    ],
)
def test_a_goal_due_date_is_read_when_clear(text: str, due: str | None) -> None:
    assert due_date(text) == due


@pytest.mark.parametrize(
    "text",
    ["I love to.", "Yeah, I love to do that too!", "I love to go there.", "I like to try it."],
)
def test_an_infinitive_that_names_nothing_is_not_a_preference(text):
    assert facts_draft_offline(text) == []
