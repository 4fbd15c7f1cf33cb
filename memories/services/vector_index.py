"""Each embedding space's HNSW index: its build parameters, the candidate list a
search of it uses (``hnsw_ef_search``), its state, its rebuild.

A space's vectors are indexed by a partial HNSW index on the untyped vector column,
cast to the space's dimension (memories.services.embedding.embedding_space_index_ensure
makes it with the space). Its graph is built with ``m`` links per node and a candidate
list of ``ef_construction`` (settings.RETRIEVAL HNSW_M, HNSW_EF_CONSTRUCTION): a larger
list makes a better-connected graph, so a search at the same ``hnsw.ef_search`` finds
more of the true nearest, at the price of a slower build and insert (BENCHMARKS.md,
"The HNSW graph's build parameters"). pgvector fixes both when the index is built, so
changing the settings applies to existing data only after ``index_rebuild`` (``manage.py
vector_index --rebuild``): it builds a new index beside the old one with CREATE INDEX
CONCURRENTLY (writes and searches go on, on the old one), then swaps the two in one
short transaction.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from memories.models import EmbeddingSpace

# pgvector's own defaults: an index built without options has these
PGVECTOR_DEFAULTS = {"m": 16, "ef_construction": 64}
# how long the swap waits for the table's lock (running searches and writes hold it)
SWAP_LOCK_TIMEOUT = "10s"
PROGRESS_SECONDS = 0.5


def hnsw_options() -> dict[str, int]:
    """The graph's build parameters from the settings."""
    return {
        "m": int(settings.RETRIEVAL["HNSW_M"]),
        "ef_construction": int(settings.RETRIEVAL["HNSW_EF_CONSTRUCTION"]),
    }


def hnsw_ef_search(size: int, limit: int) -> int:
    """``hnsw.ef_search`` for a search of ``limit`` windows among ``size`` rows.

    The graph holds more rows than the list can cover as it grows: at a million rows
    without a filter a list of 100 found 0.930 of the exact top 10, 300 found 0.974,
    where 100 found 0.99 at 100,000 (BENCHMARKS.md, "The HNSW graph's build
    parameters"). So the list is RETRIEVAL_HNSW_EF_SEARCH up to HNSW_EF_SEARCH_ROWS
    rows and grows with the square root of the rows past them (316 at a million); at
    least ``limit``, at most pgvector's 1,000.
    """
    ef_search = float(settings.RETRIEVAL["HNSW_EF_SEARCH"])
    reference = int(settings.RETRIEVAL["HNSW_EF_SEARCH_ROWS"])
    if reference and size > reference:
        ef_search *= math.sqrt(size / reference)
    return int(min(max(ef_search, limit), 1000))


def index_create_sql(*, space: EmbeddingSpace, name: str, concurrently: bool) -> str:
    """CREATE INDEX (IF NOT EXISTS) of ``space``'s HNSW index under ``name``, with the
    configured options."""
    options = ", ".join(f"{key} = {value}" for key, value in hnsw_options().items())
    return (
        f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}IF NOT EXISTS {name} "
        f"ON memories_embedding "
        f"USING hnsw ((vector::vector({int(space.dimension)})) vector_cosine_ops) "
        f"WITH ({options}) WHERE space_id = {int(space.pk)}"
    )


@dataclass(frozen=True)
class IndexState:
    name: str
    options: dict[str, int]  # as built
    size_bytes: int
    valid: bool

    @property
    def current(self) -> bool:
        """Built with the configured options (and usable)."""
        return self.valid and self.options == hnsw_options()


def index_state(*, name: str) -> IndexState | None:
    """The index called ``name`` as PostgreSQL holds it, or None."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.reloptions, pg_relation_size(c.oid), i.indisvalid
            FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
            WHERE c.relname = %s AND c.relnamespace = current_schema()::regnamespace
            """,
            [name],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    reloptions, size, valid = row
    options = dict(PGVECTOR_DEFAULTS)
    for option in reloptions or []:
        key, _, value = option.partition("=")
        if key in options:
            options[key] = int(value)
    return IndexState(name=name, options=options, size_bytes=int(size), valid=bool(valid))


Progress = Callable[[str, int, int], Any]  # (phase, blocks done, blocks in all)


def index_rebuild(*, space: EmbeddingSpace, progress: Progress | None = None) -> IndexState:
    """Build ``space``'s index anew with the configured options beside the old one, then
    put it in the old one's place; the new index's state.

    A rebuild interrupted before the swap leaves ``<name>_new`` behind: an invalid one
    (killed mid-build) is dropped and built again, a valid one with the configured
    options is swapped in as it is.
    """
    new_name = f"{space.index_name}_new"
    leftover = index_state(name=new_name)
    if leftover is not None and not leftover.current:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {new_name}")
        leftover = None
    if leftover is None:
        _build_watched(index_create_sql(space=space, name=new_name, concurrently=True), progress)
    elif progress is not None:
        progress("built before", 1, 1)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{SWAP_LOCK_TIMEOUT}'")
        cursor.execute(f"DROP INDEX IF EXISTS {space.index_name}")
        cursor.execute(f"ALTER INDEX {new_name} RENAME TO {space.index_name}")
    state = index_state(name=space.index_name)
    assert state is not None
    return state


def _build_watched(sql: str, progress: Progress | None) -> None:
    """Run ``sql`` (an index build) on a connection of its own, reporting its progress
    from pg_stat_progress_create_index meanwhile."""
    failure: list[BaseException] = []

    def build() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)
        finally:
            connection.close()

    builder = threading.Thread(target=build, name="vector-index-build", daemon=True)
    builder.start()
    while builder.is_alive():
        builder.join(PROGRESS_SECONDS)
        if progress is not None:
            progress(*_build_progress())
    if failure:
        raise failure[0]
    if progress is not None:
        progress("done", 1, 1)


def _build_progress() -> tuple[str, int, int]:
    """The running index build on memories_embedding: (phase, blocks done, blocks)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT phase, blocks_done, blocks_total FROM pg_stat_progress_create_index
            WHERE relid = 'memories_embedding'::regclass
            """
        )
        row = cursor.fetchone()
    if row is None:
        return "waiting", 0, 0
    return str(row[0]), int(row[1] or 0), int(row[2] or 0)
