"""Read-only steps on the database the request's reads go to.

A project deployed with read replicas routes the read path's queries with a database
router (memoryhub/db_router.py): ``router.db_for_read`` names a replica or the primary.
The ORM follows it by itself; raw SQL on ``django.db.connection`` (the search's
statements, their ``transaction.atomic`` and ``SET LOCAL``) does not. ``on_database``
runs a read-only block with the thread's default connection being the chosen
database's, and the step threads (threads.py) run a step on the database its caller
was on. Without replicas the router names the primary and nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections, router
from django.db.models import Model


def read_database(model: type[Model]) -> str:
    """The database the current request's reads of ``model`` go to now."""
    return router.db_for_read(model)


def current_database() -> str:
    """The database this thread's default connection is on (a replica inside
    ``on_database``): step threads run their steps there too."""
    return str(connection.alias)


@contextmanager
def on_database(alias: str) -> Iterator[None]:
    """Run the block (read-only!) with this thread's default connection being
    ``alias``'s. A replica whose connection fails leaves the block on the primary."""
    if alias == DEFAULT_DB_ALIAS or connection.alias == alias:
        yield
        return
    replica = connections[alias]
    try:
        replica.close_if_health_check_failed()  # once per request, as a query would
        replica.ensure_connection()
    except DatabaseError:
        replica.close()
        yield
        return
    local = connections._connections  # type: ignore[attr-defined]  # asgiref Local: this thread's
    primary = getattr(local, DEFAULT_DB_ALIAS, None)
    setattr(local, DEFAULT_DB_ALIAS, replica)
    try:
        yield
    finally:
        if primary is None:
            delattr(local, DEFAULT_DB_ALIAS)
        else:
            setattr(local, DEFAULT_DB_ALIAS, primary)
