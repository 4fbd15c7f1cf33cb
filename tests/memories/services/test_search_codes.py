"""A large user's binary codes kept in the process (memories.services.search.codes): the
same Hamming distances as pgvector's, the same ranking as the scan in the database, and
never stale: rows written, deleted or moved after the load are searched as they are now."""

import numpy as np
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memories.models import EmbeddingSpace, EndUser, Memory, content_hash
from memories.services.search import SearchFilters, memory_search
from memories.services.search import compact as compact_module
from memories.services.search.codes import (
    ADMIT_SEARCHES,
    HAMMING_PREFILTER,
    _owners,
    codes_apply,
    codes_loads_wait,
    owner_codes_get,
    query_words,
)
from tests.conftest import embed_pending

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def searches_on_this_thread(settings):
    """Searches stay on the test's thread, whose queries _search captures (outside a
    transaction they would run on a search thread: providers/threads.py)."""
    settings.SEARCH_NICE = 0


# every user set goes through the compact scan, with its codes in the process
CACHED = {"COMPACT_SCAN_MIN_ROWS": 0, "EXACT_SCAN_MAX_ROWS": 0, "CODES_MIN_ROWS": 0}

TOPICS = [
    "adopted a grey tabby from the shelter",
    "took the ferry to the island",
    "my sister plays the cello in a quartet",
    "started piano lessons on Mondays",
    "the vet put the cat on a diet",
    "dinner at the Italian place downtown",
    "the storm knocked down the old oak",
    "baking bread every Sunday morning",
    "training for the city half marathon",
    "repainting the kitchen cabinets",
]


def _users(project, count=40):
    alice = EndUser.objects.create(project=project, external_id="alice")
    bob = EndUser.objects.create(project=project, external_id="bob")
    texts = [f"Week {n}: {TOPICS[n % len(TOPICS)]} ({n * 7} minutes)" for n in range(count)]
    Memory.objects.bulk_create(
        Memory(
            project=project,
            end_user=alice if n % 4 else bob,
            content=text,
            content_hash=content_hash(text),
            room=None,
        )
        for n, text in enumerate(texts)
    )
    embed_pending()
    return alice, bob


def _write(project, user, text):
    memory = Memory.objects.create(
        project=project, end_user=user, content=text, content_hash=content_hash(text), room=None
    )
    embed_pending()
    return memory


def _key(project, user):
    return (EmbeddingSpace.objects.get().pk, project.pk, user.pk)


def _get(project, user, searches=1):
    """The user's codes the process keeps after ``searches`` more searches of them,
    once the loads they started have ended."""
    size = Memory.objects.filter(end_user=user).count()
    for _ in range(searches):
        owner_codes_get(_key(project, user), size)
    codes_loads_wait()
    return _owners.get(_key(project, user))


def _loaded(project, user):
    """The user's codes, loaded now."""
    codes = _get(project, user, ADMIT_SEARCHES)
    assert codes is not None
    return codes


def _search(project, user, query, **kwargs):
    with CaptureQueriesContext(connection) as captured:
        result = memory_search(
            project=project, query=query, filters=SearchFilters(end_user_id=user.pk), **kwargs
        )
    cached = any("WITH delta AS" in query["sql"] for query in captured.captured_queries)
    return [hit.memory.content for hit in result.hits], cached


def test_the_codes_give_each_window_pgvector_s_hamming_distance(owner, settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, **CACHED}
    alice, _ = _users(owner.project)
    codes = _loaded(owner.project, alice)
    query = np.random.default_rng(7).standard_normal(384).astype(np.float32)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT memory_id, bits <~> binary_quantize(%s::vector) FROM memories_embedding_bits "
            "WHERE end_user_id = %s",
            ["[" + ",".join(map(str, query.tolist())) + "]", alice.pk],
        )
        expected = {memory_id.bytes: int(distance) for memory_id, distance in cursor.fetchall()}
    got = dict(zip(codes.ids.tolist(), codes.distances(query_words(query)).tolist(), strict=True))
    assert len(got) == 30
    assert got == expected
    # the shortlist: the windows with the highest sum of the query's values where their
    # bit is 1, among the HAMMING_PREFILTER x its length nearest by Hamming distance
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT memory_id, bits::text FROM memories_embedding_bits WHERE end_user_id = %s",
            [alice.pk],
        )
        score = {
            memory_id.bytes: sum(float(v) for v, bit in zip(query, bits, strict=True) if bit == "1")
            for memory_id, bits in cursor.fetchall()
        }
    best = sorted(score, key=score.__getitem__, reverse=True)
    assert set(codes.nearest(query, 8)) == set(best[:8])  # 64 >= 30: every window scored
    prefiltered = sorted(expected.values())[2 * HAMMING_PREFILTER - 1]
    two = codes.nearest(query, 2)
    assert all(expected[memory_id] <= prefiltered for memory_id in two)
    assert all(
        score[memory_id] >= score[other]
        for memory_id in two
        for other in expected
        if expected[other] < prefiltered and other not in two
    )


def test_a_search_ranks_the_same_from_the_codes_as_from_the_database(owner, settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, **CACHED, "CODES_MAX_WINDOWS": 0}
    alice, _ = _users(owner.project)
    queries = ["what does the cat eat", "music lessons", "weather damage in the garden"]
    for mode in ("vector", "auto"):
        settings.RETRIEVAL = {**settings.RETRIEVAL, "CODES_MAX_WINDOWS": 0}
        from_database = [_search(owner.project, alice, q, k=5, mode=mode) for q in queries]
        settings.RETRIEVAL = {**settings.RETRIEVAL, "CODES_MAX_WINDOWS": 1000}
        _loaded(owner.project, alice)
        from_codes = [_search(owner.project, alice, q, k=5, mode=mode) for q in queries]
        assert [hits for hits, _ in from_codes] == [hits for hits, _ in from_database]
        assert all(cached for _, cached in from_codes)
        assert not any(cached for _, cached in from_database)


def test_rows_written_deleted_or_moved_after_the_load_are_searched_as_they_are(owner, settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, **CACHED}
    alice, bob = _users(owner.project)
    codes = _loaded(owner.project, alice)
    # written after the load: read again from the database, beside the codes
    written = _write(owner.project, alice, "The lighthouse keeper painted the spiral stairs red")
    question = "lighthouse keeper painting stairs"
    hits, cached = _search(owner.project, alice, question, k=1, mode="vector")
    assert cached and hits == [written.content]
    # deleted after the load: its codes remain in the process, its vectors are gone
    written.delete()
    hits, cached = _search(owner.project, alice, question, k=3, mode="vector")
    assert cached and written.content not in hits and len(hits) == 3
    # moved to alice after the load: found for her, and no longer for bob
    moved = Memory.objects.filter(end_user=bob).order_by("content").first()
    Memory.objects.filter(pk=moved.pk).update(end_user=alice)
    hits, cached = _search(owner.project, alice, moved.content, k=1, mode="vector")
    assert cached and hits == [moved.content]
    hits, _ = _search(owner.project, bob, moved.content, k=3, mode="vector")
    assert moved.content not in hits
    assert _owners.get(_key(owner.project, alice)) is codes  # not reloaded meanwhile


def test_the_codes_are_loaded_again_when_too_many_rows_are_read_again(owner, settings, monkeypatch):
    settings.RETRIEVAL = {**settings.RETRIEVAL, **CACHED}
    monkeypatch.setattr(compact_module, "DELTA_RELOAD_ROWS", 2)
    alice, _ = _users(owner.project)
    before = _loaded(owner.project, alice)
    _write(owner.project, alice, "The lighthouse keeper painted the spiral stairs red")
    _search(owner.project, alice, "lighthouse", k=1, mode="vector")  # one row read again
    codes_loads_wait()
    assert _owners.get(_key(owner.project, alice)) is before
    _write(owner.project, alice, "The lighthouse keeper oiled the lamp")
    _search(owner.project, alice, "lighthouse", k=1, mode="vector")  # two: load again
    codes_loads_wait()
    after = _owners.get(_key(owner.project, alice))
    assert after is not before
    assert (len(before.ids), len(after.ids)) == (30, 32) and after.xmin > before.xmin


def test_a_user_is_loaded_from_the_second_search_into_the_room_there_is(owner, settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, **CACHED, "CODES_MAX_WINDOWS": 35}
    alice, bob = _users(owner.project)  # 30 and 10 windows
    assert _get(owner.project, alice, searches=1) is None  # one search loads nothing
    assert _get(owner.project, alice, searches=1) is not None  # the second did
    # alice has been searched 2 times: bob, searched as often, does not push her out
    assert _get(owner.project, bob, searches=2) is None
    assert set(_owners) == {_key(owner.project, alice)}
    # searched more often than her, he does
    assert _get(owner.project, bob, searches=2) is not None
    assert set(_owners) == {_key(owner.project, bob)}
    # a user of more windows than a process keeps is scanned in the database
    settings.RETRIEVAL = {**settings.RETRIEVAL, "CODES_MAX_WINDOWS": 29}
    assert _get(owner.project, alice, searches=10) is None


def test_the_codes_serve_no_search_inside_a_transaction(owner, settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, **CACHED}
    assert codes_apply(10)
    with transaction.atomic():
        assert not codes_apply(10)
    settings.RETRIEVAL = {**settings.RETRIEVAL, "CODES_MIN_ROWS": 11}
    assert not codes_apply(10)
