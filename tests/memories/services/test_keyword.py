"""Keyword candidates: BM25 with each memory's length in bytes against the mean over the
filtered set, the ranking a plain BM25 gives long texts."""

import math
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.config import SearchSettings
from memories.models import EndUser, Memory, content_hash, keyword_document_sql, keyword_owner_token
from memories.services.search import SearchFilters, memory_search
from memories.services.search.count import collection_size_get
from memories.services.search.keyword import keyword_candidates, query_words


def remember(project, user, *texts):
    end_user, _ = EndUser.objects.get_or_create(project=project, external_id=user)
    Memory.objects.bulk_create(
        Memory(project=project, end_user=end_user, content=text, content_hash=content_hash(text))
        for text in texts
    )
    return end_user


def keyword_top(project, user, query):
    result = memory_search(
        project=project, query=query, mode="keyword", filters=SearchFilters(end_user_id=user.pk)
    )
    return [hit.memory.content for hit in result.hits]


def test_a_long_text_repeating_few_words_does_not_pass_for_a_short_one(owner):
    # in distinct lexemes the long reply is the shorter of the two
    concise = "I adopted Whiskers, a grey tabby, from the animal shelter near my office in spring"
    rambling = "Whiskers. " + "Cats need fresh water and regular meals. " * 40
    alice = remember(owner.project, "alice", rambling, concise, "We went skiing in the Alps")
    assert keyword_top(owner.project, alice, "Whiskers") == [concise, rambling]


def test_scores_are_bm25_over_the_filtered_set(owner):
    texts = [
        "Piano lessons on Monday, piano practice on Tuesday",
        "My daughter started piano",
        "The lessons were cancelled because of the snow storm that hit the region last week",
        "We bought a new car",
        "Dinner with friends at the Italian place downtown",
    ]
    alice = remember(owner.project, "alice", *texts)
    # another user's memories change neither the lengths nor the frequencies
    remember(owner.project, "bob", "piano piano lessons", "piano " * 500)
    policy = SearchSettings(bm25_k1=1.2, bm25_b=0.75)
    filters = SearchFilters(end_user_id=alice.pk)
    found = keyword_candidates(
        project=owner.project,
        text="piano lessons",
        filters=filters,
        limit=10,
        collection_size=collection_size_get(project=owner.project, filters=filters),
        policy=policy,
    )
    contents = dict(Memory.objects.filter(end_user=alice).values_list("pk", "content"))
    scores = {contents[memory_id]: score for memory_id, score in found}

    words = [re.findall(r"piano|lesson", text.lower()) for text in texts]
    average = sum(len(text.encode()) for text in texts) / len(texts)

    def bm25(text):
        score = 0.0
        for word in ("piano", "lesson"):
            tf = words[texts.index(text)].count(word)
            df = sum(word in found_words for found_words in words)
            if tf:
                idf = math.log(1 + (len(texts) - df + 0.5) / (df + 0.5))
                norm = 1 - policy.bm25_b + policy.bm25_b * len(text.encode()) / average
                score += idf * tf * (policy.bm25_k1 + 1) / (tf + policy.bm25_k1 * norm)
        return score

    assert scores == {text: pytest.approx(bm25(text)) for text in texts[:3]}


def test_a_set_larger_than_the_budget_still_ranks_the_rare_word_first(owner, settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, "KEYWORD_MAX_MATCHES": 5}
    common = [f"Today the weather was fine, note {n}" for n in range(20)]
    alice = remember(owner.project, "alice", *common, "The weather turned and the ferry stopped")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")  # the statistics that pick the rare word
    top = keyword_top(owner.project, alice, "weather ferry")
    assert top[0] == "The weather turned and the ferry stopped"


def test_a_write_goes_into_the_gin_indexes_not_a_pending_list(owner):
    # with fastupdate (PostgreSQL's default) a write's entries wait in a pending list
    # that every keyword search and metadata filter reads through (migration 0012)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, reloptions FROM pg_class WHERE relname = ANY(%s) ORDER BY relname",
            [["memory_keyword_gin", "memory_metadata_gin", "memory_search_vector_gin"]],
        )
        options = cursor.fetchall()
    assert options == [
        ("memory_keyword_gin", ["fastupdate=off"]),
        ("memory_metadata_gin", ["fastupdate=off"]),
    ]
    remember(owner.project, "alice", "Whiskers the tabby sleeps on the piano")
    alice = EndUser.objects.get(project=owner.project, external_id="alice")
    assert keyword_top(owner.project, alice, "piano") == ["Whiskers the tabby sleeps on the piano"]


def test_a_users_keyword_search_reads_the_owner_token_through_the_index(owner):
    # the rows' owner token is in the index's expression only, never in a text's words
    alice = remember(owner.project, "alice", "Whiskers sleeps on the piano", "I play piano")
    bob = remember(owner.project, "bob", "Bob tunes pianos")
    remember(owner.project, "carol", f"u{alice.pk} and ~u{alice.pk} are only words here")
    shared = Memory(project=owner.project, content="The piano manual", content_hash="m")
    shared.save()
    for user, expected in [(alice, 2), (bob, 1)]:
        assert len(keyword_top(owner.project, user, "piano")) == expected
    everyone = memory_search(project=owner.project, query="piano", mode="keyword")
    assert len(everyone.hits) == 4
    only_shared = memory_search(
        project=owner.project, query="piano", mode="keyword", filters=SearchFilters(shared=True)
    )
    assert [hit.memory.content for hit in only_shared.hits] == ["The piano manual"]
    # "u<id>" typed as a word finds carol's text only, not alice's memories
    typed = memory_search(project=owner.project, query=f"u{alice.pk}", mode="keyword")
    assert [hit.memory.end_user.external_id for hit in typed.hits] == ["carol"]
    # the query's expression is the index's: with sequential scans off the plan uses it
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        document = keyword_document_sql("m")
        cursor.execute(
            f"EXPLAIN SELECT m.id FROM memories_memory m WHERE {document} @@ %s::tsquery",
            [f"'{keyword_owner_token(alice.pk)}' & 'piano'"],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "memory_keyword_gin" in plan


def test_the_common_words_rows_are_read_only_when_the_rare_words_rows_fall_short(owner, settings):
    # a set larger than the budget: "weather" is common (ANALYZE's statistics), "ferry"
    # and "harbour" rare. The first rows holding the common word are a fallback, read
    # in a second statement only when the rare words' rows are fewer than asked for or
    # overflow the budget (the estimate was wrong)
    settings.RETRIEVAL = {**settings.RETRIEVAL, "KEYWORD_MAX_MATCHES": 8}
    common = [f"Today the weather was fine, note {n}" for n in range(30)]
    ferries = [f"The weather turned and ferry {n} stopped" for n in range(3)]
    alice = remember(owner.project, "alice", *common, *ferries)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    # written after ANALYZE: "harbour" has no statistics, so it passes for rare
    remember(owner.project, "alice", *[f"A walk by the harbour, number {n}" for n in range(10)])
    filters = SearchFilters(end_user_id=alice.pk)
    size = collection_size_get(project=owner.project, filters=filters)
    contents = dict(Memory.objects.filter(end_user=alice).values_list("pk", "content"))

    def search(text, limit):
        with CaptureQueriesContext(connection) as queries:
            found = keyword_candidates(
                project=owner.project,
                text=text,
                filters=filters,
                limit=limit,
                collection_size=size,
                policy=SearchSettings(),
            )
        statements = [q["sql"] for q in queries.captured_queries if "WITH docs AS" in q["sql"]]
        branches = statements[-1].count("::tsquery") if statements else 0
        return [contents[memory_id] for memory_id, _ in found], len(statements), branches

    # enough rare rows: one BM25 statement, rare rows only
    found, statements, branches = search("weather ferry", limit=2)
    assert statements == 1 and all("ferry" in text for text in found) and len(found) == 2
    assert branches == 1
    # too few: the fallback adds the rows holding both words and the common word's
    found, statements, branches = search("weather ferry", limit=10)
    assert statements == 2 and len(found) == 10 and branches == 3
    assert sorted(found[:3]) == sorted(ferries) and all("note" in text for text in found[3:])
    # the rare word's 10 rows overflow the budget of 8: the rows holding both words
    # too, not the first rows of the common word alone (they cannot outscore the rest)
    found, statements, branches = search("weather harbour", limit=2)
    assert statements == 2 and all("harbour" in text for text in found) and branches == 2


def test_a_large_sets_size_is_estimated_once_a_small_sets_counted_each_time(owner, settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, "KEYWORD_MAX_MATCHES": 5}
    alice = remember(owner.project, "alice", *[f"note {n}" for n in range(12)])
    bob = remember(owner.project, "bob", "one note", "another note")

    def size_and_statements(user):
        with CaptureQueriesContext(connection) as queries:
            size = collection_size_get(
                project=owner.project, filters=SearchFilters(end_user_id=user.pk)
            )
        return size, len(queries)

    first, statements = size_and_statements(alice)
    assert first > 5 and statements == 2  # the capped count, then the planner's estimate
    assert size_and_statements(alice) == (first, 0)  # kept
    assert size_and_statements(bob) == (2, 1)  # BM25's exact collection size, each time
    remember(owner.project, "bob", "a third note")
    assert size_and_statements(bob) == (3, 1)


def test_a_large_sets_mean_length_is_read_once_then_kept(owner, settings):
    settings.RETRIEVAL = {**settings.RETRIEVAL, "KEYWORD_MAX_MATCHES": 5}
    alice = remember(owner.project, "alice", *[f"the weather on day {n}" for n in range(12)])
    bob = remember(owner.project, "bob", "weather at sea", "calm weather today")

    def scores_and_mean_read(user):
        filters = SearchFilters(end_user_id=user.pk)
        size = collection_size_get(project=owner.project, filters=filters)
        with CaptureQueriesContext(connection) as queries:
            found = keyword_candidates(
                project=owner.project,
                text="weather",
                filters=filters,
                limit=20,
                collection_size=size,
                policy=SearchSettings(),
            )
        return found, any(") filtered" in query["sql"] for query in queries.captured_queries)

    first, read = scores_and_mean_read(alice)
    assert read and len(first) > 5
    assert scores_and_mean_read(alice) == (first, False)  # the same scores, the mean kept
    assert scores_and_mean_read(bob)[1] and scores_and_mean_read(bob)[1]  # small: exact


@pytest.mark.django_db(transaction=True)  # as a search runs: not inside a transaction
def test_the_lexeme_statistics_are_read_once_per_analyze(owner):
    # (a transaction sees the table's statistics counters as at its first read of them)
    remember(owner.project, "alice", *[f"The weather was fine, note {n}" for n in range(20)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    assert dict(query_words("weather ferry"))["weather"] > 0.5
    with CaptureQueriesContext(connection) as queries:
        words = dict(query_words("weather ferry"))
    assert len(queries) == 1 and words["ferri"] is None  # the statistics kept ("ferri": the stem)
    remember(owner.project, "alice", *[f"The ferry left, note {n}" for n in range(40)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    with CaptureQueriesContext(connection) as queries:
        words = dict(query_words("weather ferry"))
    assert len(queries) == 2 and words["ferri"] > 0.5  # read again after the ANALYZE
