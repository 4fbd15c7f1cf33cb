"""Keyword search's GIN index on the text's lexemes plus the memory's owner token
(memories.models.memory.keyword_document_sql), replacing the index on the lexemes
alone: a search filtered to one user walks that user's postings, not every posting of
its words in the table.

Built CONCURRENTLY (writes go on meanwhile; on a table of 1M memories it takes a few
minutes), so this migration is not atomic; the old index is dropped once the new one
is valid.
"""

from django.db import migrations

# keyword_document_sql() of this version, written out: a migration does not follow code
CREATE = (
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS memory_keyword_gin ON memories_memory USING gin "
    "((search_vector || array_to_tsvector(ARRAY['~u' || coalesce(end_user_id::text, '')]))) "
    "WITH (fastupdate = off)"
)
OLD = (
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS memory_search_vector_gin ON memories_memory "
    "USING gin (search_vector) WITH (fastupdate = off)"
)


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("memories", "0012_gin_fastupdate_off")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="memory", name="memory_search_vector_gin"),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=[CREATE, "DROP INDEX CONCURRENTLY IF EXISTS memory_search_vector_gin"],
                    reverse_sql=[OLD, "DROP INDEX CONCURRENTLY IF EXISTS memory_keyword_gin"],
                ),
            ],
        ),
    ]
