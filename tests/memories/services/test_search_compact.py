"""The compact scan of one user's memories (memories.services.search.compact): the
triggers keep each vector's owner and bits, the scan returns k distinct memories equal
to the float exact scan's when its shortlist covers the user, falls back to the exact
scan when the filters drop too much of the shortlist, and each side of the thresholds
takes its path."""

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.models import EmbeddingSpace, EndUser, Memory, Project
from memories.services.search import SearchFilters
from memories.services.search.compact import shortlist_size
from memories.services.search.count import collection_size_get
from memories.services.search.signal import VectorRequest
from memories.services.search.vector import vector_signal_get

DIMENSION = 32
USER_ROWS = 150  # memories of the user searched
OTHER_ROWS = 150  # of another user
LONG_EVERY = 10  # every tenth memory has three windows


def _insert(project, space, user, count, kind="message", rng=None):
    """``count`` memories of ``user`` (None: shared) with random vectors, every
    LONG_EVERY-th in three windows; their ids in order."""
    rng = rng or np.random.default_rng(3)
    ids = []
    with connection.cursor() as cursor:
        for number in range(count):
            memory = Memory.objects.create(
                project=project,
                end_user=user,
                kind=kind,
                content=f"memory {number}",
                embedding_status=Memory.EmbeddingStatus.DONE,
            )
            windows = 3 if number % LONG_EVERY == 0 else 1
            for window in range(windows):
                vector = rng.normal(size=DIMENSION)
                cursor.execute(
                    'INSERT INTO memories_embedding (memory_id, space_id, "window", vector, '
                    "created_at) VALUES (%s, %s, %s, %s::vector, now())",
                    [memory.pk, space.pk, window, "[" + ",".join(map(str, vector)) + "]"],
                )
            ids.append(memory.pk)
    return ids


@pytest.fixture
def corpus(db):
    project = Project.objects.create(name="compact")
    space = EmbeddingSpace.objects.create(provider="hashing", model="compact", dimension=DIMENSION)
    ines = EndUser.objects.create(project=project, external_id="ines")
    other = EndUser.objects.create(project=project, external_id="other")
    rng = np.random.default_rng(7)
    mine = _insert(project, space, ines, USER_ROWS, rng=rng)
    _insert(project, space, other, OTHER_ROWS, rng=rng)
    shared = _insert(project, space, None, 40, rng=rng)
    return project, space, ines, mine, shared


def _query(seed=1):
    return np.random.default_rng(seed).normal(size=DIMENSION).astype(np.float32)


def _search(project, space, filters, limit, *, aggregate="mean", distance_ids=(), seed=1):
    size = collection_size_get(project=project, filters=filters)
    with CaptureQueriesContext(connection) as captured:
        request = VectorRequest(
            project=project,
            space=space,
            query=_query(seed),
            filters=filters,
            limit=limit,
            size=size,
            linked=set(),
            distance_ids=list(distance_ids),
            aggregate=aggregate,
        )
        signal = vector_signal_get(request)
    compact = any("bits <~>" in query["sql"] for query in captured.captured_queries)
    return signal, compact


def _retrieval(settings, **values):
    settings.RETRIEVAL = {**settings.RETRIEVAL, **values}


def test_each_vector_carries_its_owner_and_bits_and_follows_a_move(corpus):
    project, space, ines, mine, _ = corpus

    def bits_rows():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT b.project_id, b.end_user_id, b.bits = binary_quantize(e.vector)::varbit "
                "FROM memories_embedding_bits b JOIN memories_embedding e ON "
                "(e.memory_id, e.space_id, e.window) = (b.memory_id, b.space_id, b.window) "
                "WHERE b.memory_id = %s",
                [mine[0]],
            )
            return cursor.fetchall()

    assert bits_rows() == [(project.pk, ines.pk, True)] * 3  # a long memory: three windows
    moved = EndUser.objects.create(project=project, external_id="moved")
    Memory.objects.filter(pk=mine[0]).update(end_user=moved)
    assert bits_rows() == [(project.pk, moved.pk, True)] * 3
    with connection.cursor() as cursor:  # a vector replaced in place: new bits
        cursor.execute(
            "UPDATE memories_embedding SET vector = ('[' || repeat('1,', %s) || '1]')::vector "
            "WHERE memory_id = %s",
            [DIMENSION - 1, mine[0]],
        )
    assert bits_rows() == [(project.pk, moved.pk, True)] * 3
    Memory.objects.filter(pk=mine[0]).delete()  # its vectors go, and their bits
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memories_embedding_bits WHERE memory_id = %s", [mine[0]]
        )
        assert cursor.fetchone() == (0,)
        cursor.execute(
            "SELECT (SELECT count(*) FROM memories_embedding_bits), "
            "(SELECT count(*) FROM memories_embedding)"
        )
        bits, vectors = cursor.fetchone()
        assert bits == vectors > 0


@pytest.mark.parametrize("aggregate", ["mean", "max"])
@pytest.mark.parametrize("shared", [False, True])
def test_a_shortlist_covering_the_user_equals_the_exact_scan(corpus, settings, aggregate, shared):
    project, space, ines, mine, shared_ids = corpus
    filters = SearchFilters(shared=True) if shared else SearchFilters(end_user_id=ines.pk)
    wanted = [*mine[:3], *shared_ids[:3]]  # keyword candidates' distances, say
    _retrieval(settings, COMPACT_SCAN_MIN_ROWS=1_000_000, EXACT_SCAN_MAX_ROWS=1_000_000)
    exact, used = _search(project, space, filters, 10, aggregate=aggregate, distance_ids=wanted)
    assert not used
    _retrieval(settings, COMPACT_SCAN_MIN_ROWS=0, BITS_SHORTLIST_MIN=1_000)
    compact, used = _search(project, space, filters, 10, aggregate=aggregate, distance_ids=wanted)
    assert used
    assert [m for m, _ in compact.nearest] == [m for m, _ in exact.nearest]
    assert [d for _, d in compact.nearest] == pytest.approx([d for _, d in exact.nearest])
    allowed = set(shared_ids if shared else mine)
    assert {m for m, _ in compact.nearest} <= allowed
    # the exact scan scores only the filtered set; the compact one every id asked for
    assert set(exact.distances) == allowed & set(wanted)
    for memory_id, distance in exact.distances.items():
        assert compact.distances[memory_id] == pytest.approx(distance)


def test_a_short_shortlist_still_gives_k_distinct_memories_nearest_first(corpus, settings):
    project, space, ines, mine, _ = corpus
    _retrieval(
        settings, COMPACT_SCAN_MIN_ROWS=0, BITS_SHORTLIST_MIN=0, BITS_SHORTLIST_PER_RESULT=3
    )  # 60 windows for 20 results
    signal, used = _search(project, space, SearchFilters(end_user_id=ines.pk), 20)
    assert used
    ids = [m for m, _ in signal.nearest]
    assert len(ids) == len(set(ids)) == 20
    assert set(ids) <= set(mine)
    distances = [d for _, d in signal.nearest]
    assert distances == sorted(distances)


def test_filters_that_empty_the_shortlist_fall_back_to_the_exact_scan(corpus, settings):
    project, space, ines, mine, _ = corpus
    facts = _insert(project, space, ines, 12, kind="fact", rng=np.random.default_rng(11))
    filters = SearchFilters(end_user_id=ines.pk, kinds=["fact"])
    _retrieval(settings, COMPACT_SCAN_MIN_ROWS=1_000_000, EXACT_SCAN_MAX_ROWS=1_000_000)
    exact, _ = _search(project, space, filters, 10)
    # the user's 150 messages' windows crowd the 12 facts out of a 20-window shortlist
    _retrieval(settings, COMPACT_SCAN_MIN_ROWS=0, BITS_SHORTLIST_MIN=0, BITS_SHORTLIST_PER_RESULT=2)
    signal, used = _search(project, space, filters, 10)
    assert used  # tried first
    assert [m for m, _ in signal.nearest] == [m for m, _ in exact.nearest]
    assert len(signal.nearest) == 10 and {m for m, _ in signal.nearest} <= set(facts)


def test_the_thresholds_choose_the_path(corpus, settings):
    project, space, ines, _, _ = corpus
    filters = SearchFilters(end_user_id=ines.pk)
    size = collection_size_get(project=project, filters=filters)
    assert size == USER_ROWS
    _retrieval(settings, COMPACT_SCAN_MIN_ROWS=size, COMPACT_SCAN_MAX_ROWS=10 * size)
    assert not _search(project, space, filters, 10)[1]  # at the compact floor: exact
    _retrieval(settings, COMPACT_SCAN_MIN_ROWS=size - 1)
    signal, used = _search(project, space, filters, 10)
    assert used and len(signal.nearest) == 10  # one past it: compact
    _retrieval(settings, COMPACT_SCAN_MAX_ROWS=size - 1, EXACT_SCAN_MAX_ROWS=0)
    signal, used = _search(project, space, filters, 10)
    assert not used and len(signal.nearest) == 10  # past the compact limit: the index
    # without a user the compact scan never applies
    _retrieval(settings, COMPACT_SCAN_MIN_ROWS=0, COMPACT_SCAN_MAX_ROWS=10**9)
    assert not _search(project, space, SearchFilters(), 10)[1]


def test_the_shortlist_grows_with_the_results_asked_within_its_bounds(settings):
    _retrieval(settings, BITS_SHORTLIST_PER_RESULT=20, BITS_SHORTLIST_MIN=400)
    _retrieval(settings, BITS_SHORTLIST_MAX=2_000)
    assert shortlist_size(10) == 400  # the floor
    assert shortlist_size(40) == 800  # an auto search's candidates, 20 windows each
    assert shortlist_size(800) == 2_000  # a context's deep search: capped
    # from a web process's codes, ranked by the asymmetric score: its own bounds
    _retrieval(settings, CODES_SHORTLIST_PER_RESULT=8, CODES_SHORTLIST_MIN=200)
    _retrieval(settings, CODES_SHORTLIST_MAX=600)
    assert shortlist_size(10, cached=True) == 200
    assert shortlist_size(40, cached=True) == 320
    assert shortlist_size(800, cached=True) == 600
