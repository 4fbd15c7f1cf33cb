"""The search's statements are prepared on their connection and planned once; equal
scores come back in one order whatever the plan."""

from django.db import connection
from django.test import override_settings

from memories.models import Memory
from memories.services.search import SearchFilters, memory_search
from tests.conftest import embed_pending
from tests.memories.services.test_keyword import remember

TEXTS = [
    "Piano lessons on Monday, piano practice on Tuesday",
    "My daughter started piano",
    "We bought a new car",
    "Dinner with friends at the Italian place downtown",
]
# a part of each of the search's four statements
STATEMENTS = {
    "count": "SELECT (SELECT count(*)",
    "keyword": "WITH docs AS MATERIALIZED",
    "vector": "window_distances",
    "winners": "LEFT JOIN memories_enduser",
}


def prepared_runs():
    """Each of the search's statements prepared on this connection: its executions."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements")
        rows = cursor.fetchall()
    return {
        name: [runs for statement, runs in rows if part in statement]
        for name, part in STATEMENTS.items()
    }


def search_three_times(project, user):
    for query in ("piano lessons", "a new car", "dinner downtown"):
        result = memory_search(
            project=project, query=query, mode="auto", filters=SearchFilters(end_user_id=user.pk)
        )
        assert result.hits
    return result


def test_a_search_prepares_its_statements_at_their_second_use(owner):
    alice = remember(owner.project, "alice", *TEXTS)
    embed_pending()
    search_three_times(owner.project, alice)
    # the first search ran them as they came; the next two ran each prepared statement
    assert prepared_runs() == {name: [2] for name in STATEMENTS}


def test_prepared_statements_can_be_turned_off(owner):
    alice = remember(owner.project, "alice", *TEXTS)
    embed_pending()
    with override_settings(SEARCH_PREPARED_STATEMENTS=False):
        prepared = search_three_times(owner.project, alice)
    assert prepared_runs() == {name: [] for name in STATEMENTS}
    again = search_three_times(owner.project, alice)
    assert [hit.memory.pk for hit in again.hits] == [hit.memory.pk for hit in prepared.hits]
    assert [hit.score for hit in again.hits] == [hit.score for hit in prepared.hits]


def test_equal_scores_come_back_in_the_order_of_their_ids(owner):
    alice = remember(owner.project, "alice", *(["Piano lessons on Monday"] * 14), *TEXTS[2:])
    embed_pending()
    for mode in ("keyword", "vector", "auto"):
        result = memory_search(
            project=owner.project,
            query="piano lessons",
            mode=mode,
            k=10,
            filters=SearchFilters(end_user_id=alice.pk),
        )
        ids = [hit.memory.pk for hit in result.hits]
        twins = sorted(
            Memory.objects.filter(content="Piano lessons on Monday").values_list("pk", flat=True)
        )
        assert ids == twins[:10], mode


def test_a_statement_prepared_before_a_migration_changed_its_columns_runs_again(
    transactional_db, owner
):
    alice = remember(owner.project, "alice", *TEXTS)
    embed_pending()
    search_three_times(owner.project, alice)  # on a search thread's connection, prepared
    with connection.cursor() as cursor:  # another connection: as another process would
        cursor.execute("ALTER TABLE memories_memory ALTER COLUMN role TYPE varchar(17)")
        try:
            # the winners' statement returns the role: its result's type changed
            result = search_three_times(owner.project, alice)
        finally:
            cursor.execute("ALTER TABLE memories_memory ALTER COLUMN role TYPE varchar(16)")
    assert result.hits[0].memory.content == TEXTS[3]
