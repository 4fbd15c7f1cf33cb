"""POST /api/v1/context/: what the facts carry beyond their own line: a changed value
marked with its day and the value it replaced, and the turn a fact was mined from."""

from __future__ import annotations

from memories.models import EndUser, Memory, content_hash
from memories.services.context.derived import fact_sources
from memories.services.context.sources import Candidate
from memories.services.memories import memory_supersede
from memories.services.revisions import Actor
from tests.conftest import embed_pending
from tests.memories.api.context_calls import context, section, turns, write


def _fact(tenant, text: str, **fields) -> Memory:
    user = EndUser.objects.get(project=tenant.project, external_id="maria")
    return Memory.objects.create(
        project=tenant.project, end_user=user, kind="fact", content=text,
        content_hash=content_hash(text), confidence=0.9, **fields,
    )  # fmt: skip


def test_a_fact_that_replaced_another_says_since_when_and_what_it_replaced(owner):
    [turn] = turns(owner, ["I moved to Berlin last week"])
    old = _fact(owner, "User lives in Lisbon.")
    new = _fact(
        owner,
        "User lives in Berlin.",
        source_ids=[turn],
        content_json={"slot": "home", "last_confirmed_at": "2023-05-07T10:00:00+00:00"},
    )
    memory_supersede(memory=old, successor=new, actor=Actor.system("test"))
    new.content_json = {**new.content_json, "supersedes": str(old.public_id)}
    new.save(update_fields=["content_json"])
    embed_pending()
    lines = [
        item["text"] for item in section(context(owner, query="Where do I live?"), "facts")["items"]
    ]
    assert "- User lives in Berlin. (as of 2023-05-07; replaces: User lives in Lisbon.)" in lines
    # the old value is not a fact of its own any more
    assert not any(line.startswith("- User lives in Lisbon") for line in lines)


def test_a_fact_brings_its_source_turn_which_the_search_left_out(owner):
    source_text = (
        "By the way, my sister Ana finally moved to Lisbon, she works there as an architect"
        " on the old tram depot and she loves the tiled houses and the river at dusk"
    )
    ids = turns(owner, [f"My sister phoned me again today, call number {i}" for i in range(40)])
    [source] = turns(owner, [source_text], start=50)
    _fact(owner, "User's sister is Ana.", source_ids=[ids[0], source])
    embed_pending()
    body = context(owner, query="Who is my sister?", max_tokens=300, explain=True)
    retrieved = section(body, "retrieved")["items"]
    brought = [item for item in retrieved if source_text in item["text"]]
    assert len(brought) == 1 and brought[0]["why"].startswith("the source of the fact")
    assert any(
        item["text"].startswith("- User's sister is Ana.")
        for item in section(body, "facts")["items"]
    )


def test_a_source_already_retrieved_is_not_brought_again_and_takes_the_last_place(owner):
    def candidate(key: str, score: float, sources: tuple[str, ...] = ()) -> Candidate:
        return Candidate("retrieved", key, "message", f"line {key}", score, sources=sources)

    retrieved = [candidate("a", 0.9), candidate("b", 0.5), candidate("c", 0.1)]
    [turn] = turns(owner, ["the source turn"])
    user = EndUser.objects.get(project=owner.project, external_id="maria")
    fact = Candidate("facts", "f", "fact", "- a fact", 0.8, sources=("a", turn))
    [brought] = fact_sources(
        end_user=user, facts=[fact], retrieved=retrieved, budget=8, encoding="cl100k_base"
    )
    # the newest source (the last id) not retrieved yet, just above the last that fits
    assert brought.key == turn and 0.5 < brought.score < 0.9
    already = Candidate("facts", "g", "fact", "- another", 0.8, sources=("b",))
    assert fact_sources(
        end_user=user, facts=[already], retrieved=[*retrieved, candidate("b", 0.5)], budget=8,
        encoding="cl100k_base",
    ) == []  # fmt: skip


def test_a_speaker_the_text_already_names_is_rendered_once(owner):
    write(
        owner,
        {"room": "chat", "role": "user", "content": "maria: my cat is called Miso"},
        {"room": "chat", "role": "user", "content": "Our cat Miso likes the sofa"},
    )
    embed_pending()
    texts = [
        item["text"] for item in section(context(owner, query="cat Miso"), "retrieved")["items"]
    ]
    assert sorted(texts) == ["maria: Our cat Miso likes the sofa", "maria: my cat is called Miso"]
