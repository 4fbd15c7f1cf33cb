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
