"""Races between a delete and a real worker, made to happen every time.

* The worker paused where it writes: a trigger of the test's, after the insert of the
  rows the worker writes (vectors, a summary, a FactExtraction, a document's chunks),
  waits on an advisory lock that the test holds. The worker then sits in its write
  transaction, locks held, rows inserted, while the test runs the delete.
* The delete first: it runs in a thread and holds its transaction open (its rows
  deleted, its locks held) until the test lets it commit; the worker's task runs
  meanwhile and writes late.

Tasks are sent by the test (the writes that set a scene send none: sending is paused),
and their outcome is read from the worker's log by task id.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import redis
from celery import current_app
from django.conf import settings
from django.db import connection, transaction

from memories.models import Memory, content_hash
from tests.conftest import _database_url, wait_until

# the advisory lock each pause waits on (held by the test while it pauses the worker)
PAUSES = {"vectors": 4501, "summary": 4502, "facts": 4503, "chunks": 4504}
TRIGGERS = [
    # pause, table, the kind of memory inserted ('' for any row)
    ("vectors", "memories_embedding", ""),
    ("summary", "memories_memory", "summary"),
    ("facts", "synopsis_factextraction", ""),
    ("chunks", "memories_memory", "knowledge"),
]
PAUSE_FUNCTION = """
CREATE OR REPLACE FUNCTION race_pause() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_ARGV[1] <> '' THEN
        IF NOT EXISTS (SELECT 1 FROM added WHERE kind = TG_ARGV[1]) THEN
            RETURN NULL;
        END IF;
    END IF;
    PERFORM pg_advisory_lock_shared(TG_ARGV[0]::bigint);
    PERFORM pg_advisory_unlock_shared(TG_ARGV[0]::bigint);
    RETURN NULL;
END $$
"""


def raw_connection() -> psycopg.Connection[Any]:
    """A connection of the test's own, outside Django's transactions (autocommit)."""
    return psycopg.connect(_database_url(), autocommit=True)


@contextmanager
def pause_triggers() -> Iterator[psycopg.Connection[Any]]:
    """The pause triggers installed (a pause waits only while its lock is held); yields
    the connection that holds the locks."""
    with raw_connection() as control:
        control.execute(PAUSE_FUNCTION)
        for name, table, kind in TRIGGERS:
            control.execute(
                f"CREATE TRIGGER race_pause_{name} AFTER INSERT ON {table} "
                "REFERENCING NEW TABLE AS added FOR EACH STATEMENT "
                f"EXECUTE FUNCTION race_pause('{PAUSES[name]}', '{kind}')"
            )
        try:
            yield control
        finally:
            for name, table, _ in TRIGGERS:
                control.execute(f"DROP TRIGGER IF EXISTS race_pause_{name} ON {table}")
            control.execute("DROP FUNCTION IF EXISTS race_pause()")


def paused_pid(control: psycopg.Connection[Any], pause: str) -> int | None:
    """The backend waiting in ``pause``, if one is."""
    row = control.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND NOT granted",
        [PAUSES[pause]],
    ).fetchone()
    return row[0] if row else None


def blocked_by(control: psycopg.Connection[Any], pid: int) -> list[int]:
    """The backends waiting for a lock ``pid`` holds."""
    rows = control.execute(
        "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", [pid]
    ).fetchall()
    return [row[0] for row in rows]


class Deleter(threading.Thread):
    """A delete in a thread of its own (its own connection). With ``hold`` it stays in
    its transaction after the delete until ``commit()``."""

    def __init__(self, delete: Callable[[], Any], *, hold: bool = False) -> None:
        super().__init__(daemon=True)
        self.delete, self.hold = delete, hold
        self.pid: int | None = None
        self.error: BaseException | None = None
        self.result: Any = None
        self.deleted, self._commit = threading.Event(), threading.Event()

    def run(self) -> None:
        try:
            connection.ensure_connection()
            self.pid = connection.connection.info.backend_pid
            if not self.hold:  # as the API calls it: its own transaction
                self.result = self.delete()
                return
            with transaction.atomic():
                self.result = self.delete()
                self.deleted.set()
                self._commit.wait(timeout=60)
        except BaseException as error:  # noqa: BLE001 - reported by finish()
            self.error = error
        finally:
            self.deleted.set()
            connection.close()

    def started_pid(self) -> int:
        return int(wait_until(lambda: self.pid, timeout=10))

    def commit(self) -> None:
        self._commit.set()

    def finish(self) -> Any:
        """The delete's result once it committed; its error raised here."""
        self.join(timeout=60)
        assert not self.is_alive(), "the delete never finished"
        if self.error is not None:
            raise self.error
        return self.result


# --- the worker's tasks ---------------------------------------------------------------

LOG = Path(settings.DATA_DIR) / "test-worker.log"


def task_send(name: str, *args: Any) -> str:
    """Send a task (routed as the product routes it); returns its id."""
    return str(current_app.send_task(name, args=list(args)).id)


def task_outcome(task_id: str, timeout: float = 90.0) -> str:
    """How the task ended, from the worker's log: "succeeded" or "raised: <error>"."""
    pattern = re.compile(rf"\[{task_id}\] (succeeded|raised unexpected: .*)")

    def ended() -> str | None:
        found = pattern.search(LOG.read_text(errors="replace"))
        return found.group(1) if found else None

    return str(wait_until(ended, timeout=timeout, interval=0.1))


def worker_carries_on(owner: Any) -> None:
    """The worker still takes tasks: a new memory is embedded; then nothing it was
    given is left running or queued (the tables are emptied after the test)."""
    text = f"the worker carries on {time.monotonic()}"
    memory = Memory.objects.create(
        project=owner.project, content=text, content_hash=content_hash(text)
    )
    task_send("memories.tasks.embedding_run_task")
    wait_until(lambda: Memory.objects.filter(pk=memory.pk, embedding_status="done").exists(), 90)
    broker = redis.Redis.from_url(settings.REDIS_URL)

    def left() -> dict[str, Any]:
        """What the worker still has: queued and unacknowledged tasks, busy queries."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT state, left(query, 120) FROM pg_stat_activity "
                "WHERE datname = current_database() AND backend_type = 'client backend' "
                "AND state <> 'idle' AND pid <> pg_backend_pid()"
            )
            busy = cursor.fetchall()
        return {
            "queued": {q: broker.llen(q) for q in ("default", "derived", "ingestion")},
            "unacked": broker.zcard("unacked_index"),
            "busy": busy,
        }

    def quiet() -> bool:
        now = left()
        return not any(now["queued"].values()) and not now["unacked"] and not now["busy"]

    try:
        wait_until(quiet, timeout=60, interval=0.2)
    except AssertionError as error:
        raise AssertionError(f"the worker did not go quiet within 60 s: {left()}") from error
