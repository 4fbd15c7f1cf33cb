"""The vector search reaches the space's HNSW index on a table large enough for the
planner to want it, and the exact-scan path (small filtered sets) does not."""

import numpy as np
import pytest
from django.db import connection

from memories.models import EmbeddingSpace, EndUser, Project
from memories.services.embedding import embedding_space_index_ensure
from memories.services.search import SearchFilters
from memories.services.search.vector import vector_candidates
from memories.services.vector_index import hnsw_ef_search
from tests.conftest import vector_search_plans

ROWS = 20_000
FEW = 20
DIMENSION = 32

# ROWS memories of the project, the first FEW of one user, the rest of another
INSERT_MEMORIES = """
    INSERT INTO memories_memory
        (id, public_id, project_id, end_user_id, kind, role, content,
         content_json, metadata, content_hash, is_unique, importance,
         confidence, access_count, status, embedding_status, source_ids,
         created_at, updated_at)
    SELECT u, u, %s, CASE WHEN g <= %s THEN %s ELSE %s END,
           'message', '', 'memory ' || g, '{}', '{}', md5(g::text), false,
           0.5, 1.0, 0, 'active', 'done', '[]', now(), now()
    FROM (SELECT gen_random_uuid() AS u, g FROM generate_series(1, %s) g) AS rows
"""
# a random vector of the space for each memory of the project
INSERT_VECTORS = f"""
    INSERT INTO memories_embedding (memory_id, space_id, vector, created_at)
    SELECT m.id, %s, (
        SELECT array_agg(random() - 0.5)::vector
        FROM generate_series(1, {DIMENSION}) WHERE m.id IS NOT NULL  -- per row
    ), now()
    FROM memories_memory m WHERE m.project_id = %s
"""


@pytest.fixture(scope="module")
def big_space(django_db_setup, django_db_blocker):
    """20,000 embedded memories with random vectors in a 32-d space, one user owning 20.

    Built once for the module and committed (the planner needs real statistics), then
    removed again so no other test sees it.
    """
    with django_db_blocker.unblock():
        project = Project.objects.create(name="hnsw")
        space = EmbeddingSpace.objects.create(
            provider="hashing", model="hnsw-test", dimension=DIMENSION
        )
        crowd = EndUser.objects.create(project=project, external_id="crowd")
        few = EndUser.objects.create(project=project, external_id="few")
        try:
            with connection.cursor() as cursor:
                cursor.execute(INSERT_MEMORIES, [project.pk, FEW, few.pk, crowd.pk, ROWS])
                cursor.execute(INSERT_VECTORS, [space.pk, project.pk])
            embedding_space_index_ensure(space=space)  # one build: faster than row by row
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE memories_memory")
                cursor.execute("ANALYZE memories_embedding")
            yield project, space
        finally:
            with connection.cursor() as cursor:
                cursor.execute("DELETE FROM memories_embedding WHERE space_id = %s", [space.pk])
                cursor.execute("DELETE FROM memories_memory WHERE project_id = %s", [project.pk])
                cursor.execute(f"DROP INDEX IF EXISTS {space.index_name}")
            EndUser.objects.filter(project=project).delete()
            space.delete()
            project.delete()


def _search(project, space, filters, limit=10):
    query = np.random.default_rng(1).normal(size=DIMENSION).astype(np.float32)
    return vector_search_plans(
        lambda: vector_candidates(
            project=project, space=space, query=query, filters=filters, limit=limit
        )
    )


def test_large_filtered_set_uses_the_spaces_hnsw_index(db, big_space):
    project, space = big_space
    rows, [plan] = _search(project, space, SearchFilters())
    assert f"Index Scan using {space.index_name}" in plan, plan
    assert len(rows) == 10
    distances = [distance for _, distance in rows]
    assert distances == sorted(distances)


def test_small_filtered_set_is_scanned_exactly(db, big_space):
    project, space = big_space
    few = EndUser.objects.get(project=project, external_id="few")
    rows, [plan] = _search(project, space, SearchFilters(end_user_id=few.pk), limit=FEW + 5)
    assert space.index_name not in plan, plan
    assert len(rows) == FEW  # every one of the user's memories, and no one else's


def test_the_index_is_a_partial_cosine_index_of_the_space(db, big_space):
    _, space = big_space
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [space.index_name])
        [(definition,)] = cursor.fetchall()
    assert "USING hnsw" in definition
    assert f"vector({DIMENSION})" in definition
    assert "vector_cosine_ops" in definition
    assert f"space_id = {space.pk}" in definition


def test_the_hnsw_candidate_list_grows_with_the_square_root_of_the_rows(settings):
    settings.RETRIEVAL = {
        **settings.RETRIEVAL,
        "HNSW_EF_SEARCH": 100,
        "HNSW_EF_SEARCH_ROWS": 100_000,
    }
    assert hnsw_ef_search(5_000, 80) == 100
    assert hnsw_ef_search(100_000, 80) == 100
    assert hnsw_ef_search(400_000, 80) == 200
    assert hnsw_ef_search(1_000_000, 80) == 316
    assert hnsw_ef_search(1_000_000, 500) == 500  # never fewer than the windows asked for
    assert hnsw_ef_search(1_000_000_000, 80) == 1000  # pgvector's ceiling
    settings.RETRIEVAL = {**settings.RETRIEVAL, "HNSW_EF_SEARCH_ROWS": 0}
    assert hnsw_ef_search(1_000_000, 80) == 100
