"""A derived memory (a fact, a summary) is placed after those of its sources found with
it: the source holds what was derived and the detail around it."""

from __future__ import annotations

import uuid

from memories.models import Memory
from memories.services.search.loading import SearchHit, sources_first


def hit(
    content: str, kind: str = "message", sources: tuple[Memory, ...] = (), explain: bool = True
) -> SearchHit:
    memory_id = uuid.uuid4()
    memory = Memory(
        id=memory_id,
        public_id=memory_id,
        kind=kind,
        content=content,
        source_ids=[str(source.public_id) for source in sources],
    )
    return SearchHit(memory, 0.5, 0.5, {"base": 0.5} if explain else {})


def contents(hits: list[SearchHit]) -> list[str]:
    return [h.memory.content for h in hits]


def test_a_fact_found_above_its_source_turn_follows_it() -> None:
    turn = hit("My sister Ana lives in Lisbon and works as an architect")
    other = hit("I adopted a golden retriever")
    fact = hit("User's sister is Ana.", kind="fact", sources=(turn.memory,))
    ordered = sources_first([fact, other, turn])
    assert contents(ordered) == [turn.memory.content, fact.memory.content, other.memory.content]
    assert turn.explain["placed_above"] == str(fact.memory.public_id)


def test_sources_not_found_and_sources_already_above_change_nothing() -> None:
    absent = hit("a turn the search did not find")
    turn = hit("My sister Ana lives in Lisbon")
    fact = hit("User's sister is Ana.", kind="fact", sources=(turn.memory, absent.memory))
    other = hit("I run marathons")
    assert contents(sources_first([turn, fact, other])) == contents([turn, fact, other])
    assert "placed_above" not in turn.explain
    lone = hit("User likes tea.", kind="fact", sources=(absent.memory,))
    assert contents(sources_first([lone, other])) == contents([lone, other])


def test_a_summary_brings_its_sources_up_best_ranked_first_and_each_once() -> None:
    first, second = hit("turn one about the harbour"), hit("turn two about the tide")
    summary = hit(
        "They talked about the harbour and the tide.", "summary", (first.memory, second.memory)
    )
    fact = hit("User works at the harbour.", "fact", (second.memory,))
    ordered = sources_first([summary, fact, second, first])
    assert contents(ordered) == contents([second, first, summary, fact])
    assert len(ordered) == 4


def test_without_explain_nothing_is_added_to_the_hits() -> None:
    turn = hit("My sister Ana lives in Lisbon", explain=False)
    fact = hit("User's sister is Ana.", kind="fact", sources=(turn.memory,), explain=False)
    assert contents(sources_first([fact, turn])) == contents([turn, fact])
    assert turn.explain == {}


def test_a_fact_brings_its_source_turn_from_below_the_winners(owner) -> None:
    from memories.models import EndUser, content_hash
    from memories.services.search import SearchFilters, memory_search

    alice = EndUser.objects.create(project=owner.project, external_id="alice")

    def remember(text: str, **fields: object) -> Memory:
        return Memory.objects.create(
            project=owner.project,
            end_user=alice,
            content=text,
            content_hash=content_hash(text),
            **fields,
        )

    # six short turns outrank the long one the fact was derived from
    for note in range(6):
        remember(f"Ana, my sister, called (note {note})")
    source = remember(
        "My sister Ana lives in Lisbon and works as an architect, and she loves the old"
        " yellow trams, the steep streets, the tiled houses and the river at dusk"
    )
    fact = remember("User's sister is Ana.", kind="fact", source_ids=[str(source.public_id)])
    remember("Ana is a common name", kind="fact", source_ids=["not-an-id"])

    def search(k: int, **filters: object):
        return memory_search(
            project=owner.project,
            query="sister Ana",
            mode="keyword",
            k=k,
            explain=True,
            filters=SearchFilters(end_user_id=alice.pk, **filters),
        )

    ranked = [item.memory_id for item in search(10).ranked]
    assert ranked.index(source.pk) >= 3 > ranked.index(fact.pk)  # by their own scores
    result = search(3)
    assert source.pk not in [item.memory_id for item in result.ranked]  # not a candidate
    hits = result.hits
    found = [h.memory.pk for h in hits]
    assert len(hits) == 3 and fact.pk in found
    assert found.index(source.pk) == found.index(fact.pk) - 1
    brought = hits[found.index(source.pk)]
    assert brought.explain["brought_by"] == str(fact.public_id)
    assert brought.explain["placed_above"] == str(fact.public_id)
    assert brought.score == hits[found.index(fact.pk)].score and brought.similarity is None
    # only what the search allows is brought: not a message to a search for facts
    facts_only = [h.memory.pk for h in search(3, kinds=["fact"]).hits]
    assert fact.pk in facts_only and source.pk not in facts_only


def test_a_source_ranked_below_the_winners_comes_with_its_own_score(owner) -> None:
    from memories.models import EndUser, content_hash
    from memories.services.search.loading import winners_load
    from memories.services.search.ranking import Ranked

    alice = EndUser.objects.create(project=owner.project, external_id="alice")
    texts = ["a turn", "another turn", "My sister Ana lives in Lisbon", "a later turn"]
    turns = [
        Memory.objects.create(
            project=owner.project, end_user=alice, content=text, content_hash=content_hash(text)
        )
        for text in texts
    ]
    fact = Memory.objects.create(
        project=owner.project,
        end_user=alice,
        kind="fact",
        content="User's sister is Ana.",
        content_hash=content_hash("User's sister is Ana."),
        source_ids=[str(turns[2].public_id)],
    )
    order = [fact, turns[0], turns[1], turns[3], turns[2]]
    ranked = [Ranked(1.0 - i / 10, m.pk, None, {"base": 1.0 - i / 10}) for i, m in enumerate(order)]
    hits = winners_load(ranked, 3)
    assert [h.memory.pk for h in hits] == [turns[2].pk, fact.pk, turns[0].pk]
    assert hits[0].score == 0.6 and hits[0].explain["brought_by"] == str(fact.public_id)
