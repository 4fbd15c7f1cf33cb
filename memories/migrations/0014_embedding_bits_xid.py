"""Each row of ``memories_embedding_bits`` records the transaction that wrote it.

``xid`` (xid8) is the writing transaction's id: set by default on insert (the add and
replace triggers) and by the owner trigger when a memory moves to another user or
project. Rows older than this migration hold 0. A web process that keeps a large
user's binary codes in memory (memories.services.search.codes) loads them in one
snapshot and notes that snapshot's xmin: every transaction below it had finished, so
its rows were in the load; the rows of transactions at or past it (the only ones the
load may have missed) are read again from the database with each search, through
the index below, until the next load.

``embedding_owner_bits`` becomes (space, project, user, xid) INCLUDE (memory, bits):
one user's windows are still contiguous (the compact scan reads the same pages), and
the rows a process has not loaded yet are a range at the end of them. Built
CONCURRENTLY (writes go on meanwhile), so this migration is not atomic.
"""

from django.db import migrations

ADD = """
ALTER TABLE memories_embedding_bits ADD COLUMN IF NOT EXISTS xid xid8 NOT NULL DEFAULT '0';
ALTER TABLE memories_embedding_bits ALTER COLUMN xid SET DEFAULT pg_current_xact_id();

CREATE OR REPLACE FUNCTION memories_embedding_bits_owner() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memories_embedding_bits
    SET project_id = NEW.project_id, end_user_id = NEW.end_user_id, xid = pg_current_xact_id()
    WHERE memory_id = NEW.id;
    RETURN NULL;
END $$;
"""
DROP = """
CREATE OR REPLACE FUNCTION memories_embedding_bits_owner() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memories_embedding_bits
    SET project_id = NEW.project_id, end_user_id = NEW.end_user_id
    WHERE memory_id = NEW.id;
    RETURN NULL;
END $$;
ALTER TABLE memories_embedding_bits DROP COLUMN IF EXISTS xid;
"""
INDEX = (
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS embedding_owner_bits_xid ON memories_embedding_bits "
    "(space_id, project_id, end_user_id, xid) INCLUDE (memory_id, bits)"
)
OLD_INDEX = (
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS embedding_owner_bits ON memories_embedding_bits "
    "(space_id, project_id, end_user_id) INCLUDE (memory_id, bits)"
)


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("memories", "0013_keyword_owner_gin")]

    operations = [
        migrations.RunSQL(sql=ADD, reverse_sql=DROP),
        migrations.RunSQL(
            sql=[
                INDEX,
                "DROP INDEX CONCURRENTLY IF EXISTS embedding_owner_bits",
                "ALTER INDEX embedding_owner_bits_xid RENAME TO embedding_owner_bits",
            ],
            reverse_sql=[
                "ALTER INDEX embedding_owner_bits RENAME TO embedding_owner_bits_xid",
                OLD_INDEX,
                "DROP INDEX CONCURRENTLY IF EXISTS embedding_owner_bits_xid",
            ],
        ),
    ]
