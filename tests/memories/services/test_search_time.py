"""The time path: a query that names a time raises the memories of that time
(memories/services/search/time_path.py), read against when the query is asked."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from memories.services.search.time_range import query_time_range

ASKED = datetime(2023, 11, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did she show on October 13, 2023?", date(2023, 10, 12), date(2023, 10, 15)),
        ("What did Gina find on 1 February, 2023?", date(2023, 1, 31), date(2023, 2, 3)),
        ("notes of 2023-05-07", date(2023, 5, 6), date(2023, 5, 9)),
        ("What setback did she face in October 2023?", date(2023, 10, 1), date(2023, 11, 1)),
        ("When did she go camping in June?", date(2023, 6, 1), date(2023, 7, 1)),
        ("and in December?", date(2022, 12, 1), date(2023, 1, 1)),  # the latest December
        ("How often did she swim in 2022?", date(2022, 1, 1), date(2023, 1, 1)),
        ("Where did we go last year?", date(2022, 1, 1), date(2023, 1, 1)),
        ("What did I do last month?", date(2023, 10, 1), date(2023, 11, 1)),
        ("What did I eat yesterday?", date(2023, 10, 30), date(2023, 11, 2)),
        ("What happened three weeks ago?", date(2023, 10, 9), date(2023, 10, 16)),
        ("Where did she move from 4 years ago?", date(2019, 1, 1), date(2020, 1, 1)),
        ("How far had I got by early June?", None, date(2023, 6, 1)),
        ("What changed since March 2022?", date(2022, 3, 1), None),
        ("What did we plan before 2023?", None, date(2023, 1, 1)),
    ],
)
def test_a_named_time_is_a_range_of_memory_times(query, start, end) -> None:
    found = query_time_range(query, ASKED)
    assert found is not None, query
    assert (found.start.date() if found.start else None) == start
    assert (found.end.date() if found.end else None) == end


@pytest.mark.parametrize(
    "query",
    [
        "this may help with the garden",
        "What do I like to paint?",
        "I ran 2023 metres",
        "Is the webinar still on March 20?",  # a day without a year: an event, mostly
        "",
        None,
    ],
)
def test_no_time_named_no_range(query) -> None:
    assert query_time_range(query, ASKED) is None


def test_an_impossible_day_names_its_month() -> None:
    found = query_time_range("on 31 February 2023", ASKED)
    assert found is not None and found.phrase == "February 2023"
    assert (found.start.date(), found.end.date()) == (date(2023, 2, 1), date(2023, 3, 1))


@pytest.fixture
def painter(owner):
    """Alice's turns: one painting in July 2023, and October's, which say "paint" more."""
    from memories.models import EndUser, Memory, content_hash
    from memories.services.embedding import embedding_run

    alice = EndUser.objects.create(project=owner.project, external_id="alice")

    def remember(text: str, when: datetime) -> Memory:
        return Memory.objects.create(
            project=owner.project, end_user=alice, content=text,
            content_hash=content_hash(text), created_at=when,
        )  # fmt: skip

    july = remember(
        "Finished the canvas: an orange sunset over the bay", datetime(2023, 7, 9, tzinfo=UTC)
    )
    for day, text in enumerate(
        [
            "I paint every evening, painting a lake is what I love to paint",
            "What I paint most is the lake, I painted it again",
            "Painting the lake in watercolour, I paint it in blue",
        ],
        start=3,
    ):
        remember(text, datetime(2023, 10, day, tzinfo=UTC))
    remember("Went hiking with my brother", datetime(2023, 7, 20, tzinfo=UTC))
    embedding_run()
    return owner.project, alice, july


def _search(project, alice, **extra):
    from memories.services.search import SearchFilters, memory_search

    filters = extra.pop("filters", SearchFilters(end_user_id=alice.pk))
    return memory_search(
        project=project, query="What did I paint in July 2023?", mode="auto", k=3,
        explain=True, filters=filters, now=ASKED, **extra,
    )  # fmt: skip


def test_the_memories_of_the_named_time_come_first(painter) -> None:
    from memories.services.configuration import project_settings_update
    from memories.services.revisions import Actor

    project, alice, july = painter
    hits = _search(project, alice).hits
    assert hits[0].memory.pk == july.pk
    assert hits[0].explain["time_range"]["phrase"] == "in July 2023"
    assert hits[0].explain["time"]["within_range"] > 0
    # without the time path the words and the meaning put October's painting first
    project_settings_update(
        project=project, changes={"search": {"time_weight": 0.0}}, actor=Actor.system("test")
    )
    project.refresh_from_db()
    without = _search(project, alice).hits
    assert without[0].memory.pk != july.pk
    assert "time_range" not in without[0].explain


def test_a_callers_own_time_filter_keeps_the_path_out(painter) -> None:
    from memories.services.search import SearchFilters

    project, alice, july = painter
    filters = SearchFilters(end_user_id=alice.pk, start=datetime(2023, 10, 1, tzinfo=UTC))
    hits = _search(project, alice, filters=filters).hits
    assert july.pk not in [hit.memory.pk for hit in hits]
    assert all("time_range" not in hit.explain for hit in hits)


def test_a_range_open_on_one_side_has_no_time_path(painter) -> None:
    from memories.services.search import memory_search

    project, alice, july = painter
    result = memory_search(
        project=project, query="What did I paint before August 2023?", mode="auto", k=3,
        explain=True, now=ASKED,
    )  # fmt: skip
    assert all("time_range" not in hit.explain for hit in result.hits)
