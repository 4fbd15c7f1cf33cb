"""The vector lane (memories.services.search.lane): a fused search whose vector step runs
on a thread and connection of its own ranks exactly as the same search in sequence,
whichever scan serves the vector step; inside a transaction it is never used."""

import threading

import pytest
from django.db import transaction

from memories.models import EndUser, Memory, content_hash
from memories.services.search import SearchFilters, memory_search
from memories.services.search.lane import vector_lane_applies
from memories.services.search.slots import _slots_for
from tests.conftest import embed_pending

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = [
    "I adopted a grey tabby called Whiskers from the shelter",
    "Whiskers sleeps on the piano all afternoon",
    "We drove to the coast and took the ferry to the island",
    "The ferry was cancelled because of the storm",
    "My sister plays the cello in a quartet",
    "I started piano lessons on Mondays",
    "The vet said the cat needs a lighter diet",
    "We had dinner at the Italian place downtown",
    "The storm knocked down the old oak in the garden",
    "My daughter wants a dog, not a cat",
    "I bake bread every Sunday morning",
    "The quartet plays at the town hall in May",
]


def _ranking(project, user, *, mode, lane_rows, settings, **retrieval):
    settings.RETRIEVAL = {
        **settings.RETRIEVAL,
        "VECTOR_LANE_MIN_ROWS": lane_rows,
        **retrieval,
    }
    result = memory_search(
        project=project,
        query="what does the cat do during the storm",
        mode=mode,
        filters=SearchFilters(end_user_id=user.pk if user else None),
        k=2,
        explain=True,
    )
    # recency is a function of the time of the search: the rest of each explanation
    explained = [
        (hit.memory.pk, hit.score, {k: v for k, v in hit.explain.items() if k != "recency"})
        for hit in result.hits
    ]
    return explained, result.timings_ms


@pytest.mark.parametrize("mode", ["auto", "hybrid"])
@pytest.mark.parametrize(
    "scan", [{}, {"COMPACT_SCAN_MIN_ROWS": 0, "EXACT_SCAN_MAX_ROWS": 0}], ids=["exact", "compact"]
)
@pytest.mark.parametrize("filtered", [True, False], ids=["user", "project"])
def test_a_search_ranks_the_same_in_the_lane_as_in_sequence(owner, settings, mode, scan, filtered):
    alice = EndUser.objects.create(project=owner.project, external_id="alice")
    bob = EndUser.objects.create(project=owner.project, external_id="bob")
    Memory.objects.bulk_create(
        Memory(
            project=owner.project,
            end_user=alice if n % 3 else bob,
            content=text,
            content_hash=content_hash(text),
            room=None,
        )
        # every row holds "storm", and there are more rows than candidates asked for:
        # BM25's (the shortest rows) are not all among the vector's nearest, and their
        # distances come after the lane
        for n, text in enumerate(f"{turn} (storm day {day})" for day in range(5) for turn in TURNS)
    )
    embed_pending()
    user = alice if filtered else None
    if not filtered and scan:
        scan = {"EXACT_SCAN_MAX_ROWS": 0}  # the project's set goes through the index
    in_sequence, _ = _ranking(
        owner.project, user, mode=mode, lane_rows=0, settings=settings, **scan
    )
    in_lane, timings = _ranking(
        owner.project, user, mode=mode, lane_rows=1, settings=settings, **scan
    )
    assert in_lane == in_sequence and len(in_lane) == 2
    assert timings["distances"] > 0
    assert any(thread.name.startswith("vector-lane") for thread in threading.enumerate())
    assert timings["vector"] > 0


def test_never_inside_a_transaction(settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, "VECTOR_LANE_MIN_ROWS": 1}
    assert vector_lane_applies(10)
    with transaction.atomic():
        assert not vector_lane_applies(10)
    settings.RETRIEVAL = {**settings.RETRIEVAL, "VECTOR_LANE_MIN_ROWS": 0}
    assert not vector_lane_applies(10**6)


def test_not_while_searches_wait_for_a_slot(settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, "VECTOR_LANE_MIN_ROWS": 1}
    slots = _slots_for(2)
    slots.waiters.append(threading.Event())  # a search waiting: the cores are busy
    try:
        assert not vector_lane_applies(10)
    finally:
        slots.waiters.clear()
    assert vector_lane_applies(10)
