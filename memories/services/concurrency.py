"""How writes and deletes that race each other stay correct: one lock order, conflicts
retried until the concurrent writer's row is seen, deadlocks retried, late writes of
the workers dropped.

Lock order. Whoever deletes a tenant's rows, and whoever writes rows beneath an owner
while holding memory rows locked (a summary, a document's chunks), takes its locks
top-down: the project, then the room, then the user (FOR UPDATE to delete the row,
FOR KEY SHARE to write beneath it, ``owners_share_lock``), then the memories in
primary-key order (``memories_lock``). A write beneath an owner checks its foreign
keys when it commits (Django's keys are DEFERRABLE INITIALLY DEFERRED), taking FOR KEY
SHARE on the owner's row then: taken late, after memory rows, it closed a cycle with a
delete that locked the owner first and waited for those memory rows. The embedding
workers claim with SKIP LOCKED and wait for no one.

The database backs it: every foreign key into the tenant tree (project, user, room,
memory, document) is ON DELETE CASCADE in the database as it is in Django (migrations
memories 0017, synopsis 0003, ingestion 0002). A row that a worker committed after a
delete had collected the children (Django's collector reads them before it deletes
the parent) is removed with its parent instead of failing the delete at COMMIT.

What is left: a write beneath a row deleted before it commits fails at COMMIT with a
foreign key violation (``references_gone``): a worker drops its late write and logs
it; a client's write is tried again (``conflict_retried``: the owner is created anew,
as for a write that came a moment later). A writer outside this order can still
deadlock with a delete; PostgreSQL aborts one of the two, and a delete is tried again
(``deadlock_retried``).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import QuerySet

from memories.models import EndUser, Memory, Project, Room

logger = logging.getLogger(__name__)
T = TypeVar("T")

# PostgreSQL's SQLSTATEs of the errors a race ends in
UNIQUE_VIOLATION = "23505"
FOREIGN_KEY_VIOLATION = "23503"
DEADLOCK_DETECTED = "40P01"
SERIALIZATION_FAILURE = "40001"
RACES = {UNIQUE_VIOLATION, FOREIGN_KEY_VIOLATION, DEADLOCK_DETECTED, SERIALIZATION_FAILURE}
# a delete that deadlocked with a writer outside the lock order: tried this often
DEADLOCK_ATTEMPTS = 5


def sqlstate(error: BaseException) -> str | None:
    """PostgreSQL's SQLSTATE of a database error (Django's wraps psycopg's), else None."""
    cause = error.__cause__ if error.__cause__ is not None else error
    return getattr(cause, "sqlstate", None)


def references_gone(error: IntegrityError) -> bool:
    """Whether ``error`` is a foreign key violation: a row the write referenced (its
    memory, user, room, project) was deleted before the write committed."""
    return sqlstate(error) == FOREIGN_KEY_VIOLATION


def conflict_retried(write: Callable[[], T], *, keys: int) -> T:
    """``write()`` in a transaction (a savepoint inside one), again after a unique or
    foreign key violation or a deadlock with a concurrent writer.

    A unique violation is raised only once the writer holding the key has committed
    (PostgreSQL waits for it), so the next attempt finds its row (the idempotent
    answer, or a conflict the write reports itself); each failed attempt learns at
    least one of the write's ``keys`` unique keys, so ``keys`` + 2 attempts always end
    it. A foreign key violation (an owner deleted as the write committed) and a
    deadlock (two writes taking the same keys in another order) end with the
    competitor too. Other integrity errors are the write's own: raised at once."""
    attempts = keys + 2
    for attempt in range(1, attempts + 1):
        try:
            with transaction.atomic():
                return write()
        except DatabaseError as error:
            if sqlstate(error) not in RACES or attempt == attempts:
                raise
            logger.info("write met a concurrent one (%s); trying again", sqlstate(error))
    raise AssertionError("unreachable")  # the loop returns or raises


def deadlock_retried(delete: Callable[[], T]) -> T:
    """``delete()`` in a transaction (a savepoint inside one), again, after a short
    random pause, when PostgreSQL chose it to end a deadlock (with a writer that
    does not keep the lock order, e.g. one taking memory rows in another order)."""
    for attempt in range(1, DEADLOCK_ATTEMPTS + 1):
        try:
            with transaction.atomic():
                return delete()
        except DatabaseError as error:
            if sqlstate(error) not in (DEADLOCK_DETECTED, SERIALIZATION_FAILURE):
                raise
            if attempt == DEADLOCK_ATTEMPTS:
                raise
            logger.warning("a delete deadlocked with a concurrent write; trying again")
            time.sleep(random.uniform(0.01, 0.05) * attempt)
    raise AssertionError("unreachable")  # the loop returns or raises


_KEY_SHARE_SQL = "SELECT 1 FROM {table} WHERE id = %s FOR KEY SHARE"


def owners_share_lock(
    *, project_id: int, room_id: int | None = None, end_user_id: int | None = None
) -> bool:
    """Hold FOR KEY SHARE on the project, then the room, then the user (those given)
    until the transaction ends: none of them can be deleted meanwhile, and a delete
    that locked one first is waited for. False if one is gone (deleted): the caller's
    write beneath it is dropped."""
    owners = ((Project, project_id), (Room, room_id), (EndUser, end_user_id))
    with connection.cursor() as cursor:
        for model, row_id in owners:
            if row_id is None:
                continue
            cursor.execute(_KEY_SHARE_SQL.format(table=model._meta.db_table), [row_id])
            if cursor.fetchone() is None:
                return False
    return True


def memories_lock(memories: QuerySet[Memory]) -> list[Any]:
    """Lock these memories FOR UPDATE in primary-key order until the transaction ends,
    after any worker holding one of them has committed (an embedding batch, a summary
    archiving them); returns their ids. A worker's claim (SKIP LOCKED) passes them by
    from now on."""
    locked = memories.order_by("pk").select_for_update(of=("self",))
    return list(locked.values_list("pk", flat=True))
