"""Every foreign key into the tenant tree is ON DELETE CASCADE in the database too.

Django deletes with a collector: it reads a row's children, deletes them, then the row,
and checks the foreign keys at COMMIT (they are DEFERRABLE INITIALLY DEFERRED). A
worker that committed a child in between (a memory's vectors, a summary of a room, a
fact about a user, a document's chunk) made the delete fail at COMMIT with an
IntegrityError, leaving everything in place (issue 45: Project.delete() of a project
whose memories the worker was embedding). With ON DELETE CASCADE the database deletes
such a child with its parent, whatever path deletes it (the services, the admin, a
plain Model.delete()); Django's on_delete=CASCADE stays, so the ORM still deletes what
it knows first (and records it where the services do). The lock order that keeps
revisions exact is in memories/services/concurrency.py.

Django cannot declare a database-level action (5.2): the constraints are recreated
with the same names, NOT VALID first (a short lock) and validated after (writes go
on). The procedure ``memoryhub_foreign_keys_on_delete`` is kept in the schema for the
synopsis and ingestion apps' migrations of their own tables; a test checks that every
such key cascades (a later AlterField would recreate one without).
"""

from django.db import migrations

PROCEDURE = """
CREATE OR REPLACE PROCEDURE memoryhub_foreign_keys_on_delete(keys text[], action text)
LANGUAGE plpgsql AS $$
DECLARE
    key text;
    child regclass;
    child_column text;
    name text;
    parent regclass;
    parent_column text;
    validations text[] := '{}';
    validation text;
BEGIN
    FOREACH key IN ARRAY keys LOOP
        child := split_part(key, '.', 1)::regclass;
        child_column := split_part(key, '.', 2);
        SELECT c.conname, c.confrelid::regclass, pa.attname
        INTO name, parent, parent_column
        FROM pg_constraint c
        JOIN pg_attribute ca ON ca.attrelid = c.conrelid AND ca.attnum = c.conkey[1]
        JOIN pg_attribute pa ON pa.attrelid = c.confrelid AND pa.attnum = c.confkey[1]
        WHERE c.contype = 'f' AND c.conrelid = child AND ca.attname = child_column;
        IF name IS NULL THEN
            RAISE EXCEPTION 'no foreign key on %', key;
        END IF;
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', child, name);
        EXECUTE format(
            'ALTER TABLE %s ADD CONSTRAINT %I FOREIGN KEY (%I) REFERENCES %s (%I) '
            'ON DELETE %s DEFERRABLE INITIALLY DEFERRED NOT VALID',
            child, name, child_column, parent, parent_column, action
        );
        validations := validations || format(
            'ALTER TABLE %s VALIDATE CONSTRAINT %I', child, name
        );
    END LOOP;
    COMMIT;  -- the keys swapped under a short lock; validated while writes go on
    FOREACH validation IN ARRAY validations LOOP
        EXECUTE validation;
    END LOOP;
END $$;
"""
DROP_PROCEDURE = "DROP PROCEDURE IF EXISTS memoryhub_foreign_keys_on_delete(text[], text)"

# every foreign key of this app's tables to a project, user, room or memory (all
# on_delete=CASCADE in Django), as table.column
KEYS = ", ".join(
    f"'{key}'"
    for key in [
        "memories_agent.project_id",
        "memories_apikey.project_id",
        "memories_enduser.project_id",
        "memories_idempotencykey.project_id",
        "memories_maintenancerun.project_id",
        "memories_membership.project_id",
        "memories_memory.project_id",
        "memories_memory.end_user_id",
        "memories_memory.room_id",
        "memories_memoryrevision.project_id",
        "memories_parkedtask.project_id",
        "memories_room.project_id",
        "memories_settingsrevision.project_id",
        "memories_settingsrevision.room_id",
        "memories_synopsis.project_id",
        "memories_synopsis.end_user_id",
        "memories_synopsisrevision.project_id",
        "memories_synopsisrevision.end_user_id",
        "memories_embedding.memory_id",
    ]
)


class Migration(migrations.Migration):
    atomic = False  # the procedure commits between its two steps
    dependencies = [("memories", "0016_parked_task")]

    operations = [
        migrations.RunSQL(PROCEDURE, DROP_PROCEDURE),
        migrations.RunSQL(
            f"CALL memoryhub_foreign_keys_on_delete(ARRAY[{KEYS}], 'CASCADE')",
            f"CALL memoryhub_foreign_keys_on_delete(ARRAY[{KEYS}], 'NO ACTION')",
        ),
    ]
