"""manage.py vector_index: each space's HNSW index, the options it was built with, and
a rebuild with the configured ones beside the old index (CREATE INDEX CONCURRENTLY:
outside a transaction, hence transactional_db)."""

import io

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection, transaction

from memories.models import EmbeddingSpace, EndUser, Project
from memories.services.embedding import embedding_space_index_ensure
from memories.services.vector_index import index_create_sql, index_state

ROWS = 300
DIMENSION = 8


@pytest.fixture
def space(transactional_db):
    project = Project.objects.create(name="index")
    user = EndUser.objects.create(project=project, external_id="u")
    space = EmbeddingSpace.objects.create(
        provider="hashing", model="index-test", dimension=DIMENSION
    )
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memories_memory
                (id, public_id, project_id, end_user_id, kind, role, content, content_json,
                 metadata, content_hash, is_unique, importance, confidence, access_count,
                 status, embedding_status, source_ids, created_at, updated_at)
            SELECT u, u, %s, %s, 'message', '', 'memory ' || g, '{}', '{}', md5(g::text),
                   false, 0.5, 1.0, 0, 'active', 'done', '[]', now(), now()
            FROM (SELECT gen_random_uuid() AS u, g FROM generate_series(1, %s) g) AS rows
            """,
            [project.pk, user.pk, ROWS],
        )
        cursor.execute(
            f"""
            INSERT INTO memories_embedding (memory_id, space_id, vector, created_at)
            SELECT m.id, %s, (
                SELECT array_agg(random() - 0.5)::vector
                FROM generate_series(1, {DIMENSION}) WHERE m.id IS NOT NULL
            ), now()
            FROM memories_memory m WHERE m.project_id = %s
            """,
            [space.pk, project.pk],
        )
        cursor.execute("ANALYZE memories_embedding")  # or the planner expects one row
    embedding_space_index_ensure(space=space)
    yield space
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {space.index_name}")
        cursor.execute(f"DROP INDEX IF EXISTS {space.index_name}_new")


def _run(*args):
    out = io.StringIO()
    call_command("vector_index", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _options(settings, m, ef_construction):
    settings.RETRIEVAL = {
        **settings.RETRIEVAL,
        "HNSW_M": m,
        "HNSW_EF_CONSTRUCTION": ef_construction,
    }


def _nearest_through_index(space, query):
    """The 10 nearest by the index (other plans off), and by an exact sort."""
    literal = "[" + ",".join(repr(float(x)) for x in query) + "]"
    with transaction.atomic(), connection.cursor() as cursor:
        for plan_kind in ("seqscan", "bitmapscan", "sort"):  # 300 rows: the planner would sort
            cursor.execute(f"SET LOCAL enable_{plan_kind} = off")
        cursor.execute("SET LOCAL hnsw.ef_search = 400")
        sql = (
            f"SELECT memory_id FROM memories_embedding WHERE space_id = {space.pk} "
            f"ORDER BY (vector::vector({DIMENSION})) <=> %s::vector({DIMENSION}) LIMIT 10"
        )
        cursor.execute(f"EXPLAIN {sql}", [literal])
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(sql, [literal])
        indexed = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            f"SELECT memory_id FROM memories_embedding WHERE space_id = {space.pk} "
            "ORDER BY vector <=> %s::vector LIMIT 10",
            [literal],
        )
        exact = [row[0] for row in cursor.fetchall()]
    return plan, indexed, exact


def test_a_new_space_index_is_built_with_the_configured_options(settings, space):
    state = index_state(name=space.index_name)
    assert state is not None and state.valid
    assert state.options == {
        "m": settings.RETRIEVAL["HNSW_M"],
        "ef_construction": settings.RETRIEVAL["HNSW_EF_CONSTRUCTION"],
    }
    assert state.current
    output = _run()
    assert f"{space.index_name}: m {settings.RETRIEVAL['HNSW_M']}, ef_construction" in output
    assert "Rebuilt" not in output


def test_rebuild_applies_changed_options_under_the_same_name(settings, space):
    _options(settings, 8, 24)
    assert not index_state(name=space.index_name).current
    output = _run("--rebuild")
    assert f"Rebuilt {space.index_name}: m 8, ef_construction 24" in output
    state = index_state(name=space.index_name)
    assert state.valid and state.options == {"m": 8, "ef_construction": 24}
    assert index_state(name=f"{space.index_name}_new") is None
    plan, indexed, exact = _nearest_through_index(
        space, np.random.default_rng(3).normal(size=DIMENSION)
    )
    assert space.index_name in plan
    assert indexed == exact  # 300 rows at ef_search 400: the graph finds the exact top 10

    assert "Rebuilt" not in _run("--rebuild")  # built as configured: nothing to do
    assert "Rebuilt" in _run("--rebuild", "--force")


def test_rebuild_replaces_a_leftover_built_with_other_options(settings, space):
    """An interrupted rebuild's ``_new`` index with stale options is dropped and built
    again, not swapped in."""
    _options(settings, 6, 20)
    with connection.cursor() as cursor:
        cursor.execute(
            index_create_sql(space=space, name=f"{space.index_name}_new", concurrently=False)
        )
    _options(settings, 10, 30)
    _run("--rebuild")
    assert index_state(name=space.index_name).options == {"m": 10, "ef_construction": 30}
    assert index_state(name=f"{space.index_name}_new") is None


def test_rebuild_swaps_in_a_finished_leftover_without_building_again(settings, space):
    """A rebuild killed after its build but before the swap left a valid ``_new`` index
    with the configured options: the next rebuild puts that very index in place."""
    _options(settings, 6, 20)
    new_name = f"{space.index_name}_new"
    with connection.cursor() as cursor:
        cursor.execute(index_create_sql(space=space, name=new_name, concurrently=False))
        cursor.execute("SELECT %s::regclass::oid", [new_name])
        leftover_oid = cursor.fetchone()[0]
    assert "Rebuilt" in _run("--rebuild")
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::regclass::oid", [space.index_name])
        assert cursor.fetchone()[0] == leftover_oid
    assert index_state(name=space.index_name).options == {"m": 6, "ef_construction": 20}
    assert index_state(name=new_name) is None
