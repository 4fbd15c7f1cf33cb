"""The search's statements, parsed and planned once per database connection.

A search of a small set runs four statements of 0.3-3 ms each, and PostgreSQL planned
each one again every time: 0.2-0.5 ms apiece, 1.4 ms of the ~6.3 ms of database time a
LoCoMo search took (EXPLAIN ANALYZE). Their text is written once per path and set of
filters, so a connection keeps each one prepared: psycopg's server-side binding,
prepared at its second use on the connection (a statement run once is not worth the
extra round trip). PostgreSQL plans a prepared statement's
first five executions for their values, then keeps one generic plan only if it is
estimated to cost no more than those (plan_cache_mode auto): a statement whose best
plan depends on its values goes on being planned for them. Rankings are the same
either way; only the time differs (BENCHMARKS.md).

Django's own queries are left as they are: they bind their values into the text on
the client, and psycopg never prepares those.

A migration that changes the type of a column a prepared statement returns makes the
server refuse that statement on connections that prepared it before (other processes'):
PreparedCursor then drops the connection's statements and runs it again.

``SEARCH_PREPARED_STATEMENTS=0`` turns it off: behind a connection pooler in
transaction mode that does not follow prepared statements (PgBouncer before 1.21, or
without ``max_prepared_statements``), a statement prepared on one server connection
is unknown on the next.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import NotSupportedError, connection
from django.db.backends.utils import CursorWrapper

# what PostgreSQL answers a prepared statement whose result's columns changed type since
# it was prepared (a migration, run by another process)
STALE = "cached plan must not change result type"


class PreparedCursor(CursorWrapper):
    """Django's cursor wrapper, which runs a statement again once when the server finds
    it prepared for columns whose type a migration has changed since: the connection's
    statements are dropped first (outside a transaction; inside one the error stands,
    the transaction being lost anyway). PostgreSQL plans a prepared statement again by
    itself after any other change of the tables it reads."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        try:
            return super().execute(sql, params)
        except NotSupportedError as error:
            if self.db.in_atomic_block or STALE not in str(error):
                raise
            self.cursor.execute("DEALLOCATE ALL")  # psycopg forgets its names too
            return super().execute(sql, params)


@contextmanager
def prepared_cursor() -> Iterator[CursorWrapper]:
    """A cursor on the default connection whose statements the server keeps prepared,
    run through Django's wrappers (``connection.execute_wrapper``). Django's ordinary
    cursor when SEARCH_PREPARED_STATEMENTS is off, and while Django logs queries (DEBUG,
    or a test capturing them): its log shows each statement with its values."""
    if not settings.SEARCH_PREPARED_STATEMENTS or connection.queries_logged:
        with connection.cursor() as cursor:
            yield cursor
        return
    import psycopg

    connection.close_if_health_check_failed()  # as connection.cursor() does
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:  # Django turns preparing off; only cursors that
        raw.prepare_threshold = 1  # bind on the server (these) prepare, at second use
    with PreparedCursor(psycopg.Cursor(raw), connection) as cursor:
        yield cursor


def local_settings(*statements: str) -> None:
    """Run ``SET LOCAL`` statements (inside the caller's transaction) through Django's
    cursor: their values are written in their text (an ef_search that varies with the
    set's size), so prepared they would only take places among the connection's
    prepared statements."""
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
