"""A compact copy of every vector beside its owner, for exact scans of one user's memories.

``memories_embedding_bits`` is a table Django does not model (database state only, like
the per-space HNSW indexes): one row per window vector with its memory's project and
end user and the vector's binary quantization (pgvector ``binary_quantize``, one bit
per dimension: 48 bytes for 384 dimensions). Triggers keep it in step: statement
triggers with transition tables on inserts, deletes, updates and TRUNCATE of
memories_embedding, a row trigger when a memory moves to another user or project. The
covering index ``embedding_owner_bits`` holds (space, project, user) -> (memory, bits),
so one user's windows are contiguous index pages (an index-only scan) rather than rows
spread over memories_embedding; memories.services.search.compact ranks them by Hamming
distance and re-ranks a shortlist by the float vectors.

A side table, not columns of memories_embedding: filling columns there would write a
new version of every row, and every new version goes into the HNSW index too (an
UPDATE of 1,000,000 vectors re-inserts 1,000,000 graph entries); a user's memories
moving would do the same. Filling this table at 1,000,000 vectors took ~10 s.
"""

from django.db import migrations

FORWARD = """
CREATE TABLE memories_embedding_bits (
    memory_id uuid NOT NULL,
    space_id bigint NOT NULL,
    "window" smallint NOT NULL,
    project_id bigint,
    end_user_id bigint,
    bits varbit NOT NULL
);

CREATE FUNCTION memories_embedding_bits_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memories_embedding_bits
        (memory_id, space_id, "window", project_id, end_user_id, bits)
    SELECT a.memory_id, a.space_id, a."window", m.project_id, m.end_user_id,
           binary_quantize(a.vector)::varbit
    FROM added a JOIN memories_memory m ON m.id = a.memory_id;
    RETURN NULL;
END $$;

CREATE FUNCTION memories_embedding_bits_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memories_embedding_bits b USING removed r
    WHERE b.memory_id = r.memory_id AND b.space_id = r.space_id AND b."window" = r."window";
    RETURN NULL;
END $$;

CREATE FUNCTION memories_embedding_bits_replace() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memories_embedding_bits b USING removed r
    WHERE b.memory_id = r.memory_id AND b.space_id = r.space_id AND b."window" = r."window";
    INSERT INTO memories_embedding_bits
        (memory_id, space_id, "window", project_id, end_user_id, bits)
    SELECT a.memory_id, a.space_id, a."window", m.project_id, m.end_user_id,
           binary_quantize(a.vector)::varbit
    FROM added a JOIN memories_memory m ON m.id = a.memory_id;
    RETURN NULL;
END $$;

CREATE FUNCTION memories_embedding_bits_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE memories_embedding_bits;
    RETURN NULL;
END $$;

CREATE FUNCTION memories_embedding_bits_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memories_embedding_bits
    SET project_id = NEW.project_id, end_user_id = NEW.end_user_id
    WHERE memory_id = NEW.id;
    RETURN NULL;
END $$;

CREATE TRIGGER embedding_bits_add AFTER INSERT ON memories_embedding
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION memories_embedding_bits_add();
CREATE TRIGGER embedding_bits_remove AFTER DELETE ON memories_embedding
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION memories_embedding_bits_remove();
CREATE TRIGGER embedding_bits_replace AFTER UPDATE ON memories_embedding
    REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION memories_embedding_bits_replace();
CREATE TRIGGER embedding_bits_truncate AFTER TRUNCATE ON memories_embedding
    FOR EACH STATEMENT EXECUTE FUNCTION memories_embedding_bits_truncate();
CREATE TRIGGER memory_bits_owner AFTER UPDATE OF project_id, end_user_id ON memories_memory
    FOR EACH ROW
    WHEN (OLD.project_id IS DISTINCT FROM NEW.project_id
          OR OLD.end_user_id IS DISTINCT FROM NEW.end_user_id)
    EXECUTE FUNCTION memories_embedding_bits_owner();

INSERT INTO memories_embedding_bits (memory_id, space_id, "window", project_id, end_user_id, bits)
SELECT e.memory_id, e.space_id, e."window", m.project_id, m.end_user_id,
       binary_quantize(e.vector)::varbit
FROM memories_embedding e JOIN memories_memory m ON m.id = e.memory_id;

CREATE UNIQUE INDEX embedding_bits_window ON memories_embedding_bits
    (memory_id, space_id, "window");
CREATE INDEX embedding_owner_bits ON memories_embedding_bits
    (space_id, project_id, end_user_id) INCLUDE (memory_id, bits);
"""

BACKWARD = """
DROP TRIGGER IF EXISTS memory_bits_owner ON memories_memory;
DROP TRIGGER IF EXISTS embedding_bits_add ON memories_embedding;
DROP TRIGGER IF EXISTS embedding_bits_remove ON memories_embedding;
DROP TRIGGER IF EXISTS embedding_bits_replace ON memories_embedding;
DROP TRIGGER IF EXISTS embedding_bits_truncate ON memories_embedding;
DROP FUNCTION IF EXISTS memories_embedding_bits_add();
DROP FUNCTION IF EXISTS memories_embedding_bits_remove();
DROP FUNCTION IF EXISTS memories_embedding_bits_replace();
DROP FUNCTION IF EXISTS memories_embedding_bits_truncate();
DROP FUNCTION IF EXISTS memories_embedding_bits_owner();
DROP TABLE IF EXISTS memories_embedding_bits;
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0010_memory_public_id")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
