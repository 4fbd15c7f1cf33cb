"""The GIN indexes of keyword search and metadata filters without a pending list.

With ``fastupdate`` (PostgreSQL's default) a write appends its index entries to a
pending list, up to ``gin_pending_list_limit`` (4 MB), that VACUUM or an unlucky write
merges into the index, and every search reads the whole list linearly. In the 1M-memory
bench the keyword index carried 433 pages (3.4 MB) of pending entries: a search of a user
of 100,000 memories spent 45-50 ms on its keyword step with them, 35 ms without. A write
pays ~0.15 ms more for entering its lexemes directly (0.31 -> 0.46 ms per row measured),
and none pays for merging the whole list. BENCHMARKS.md "GIN pending list".

The indexes are altered in place, not rebuilt (a rebuild of a large table's GIN index
takes minutes), and their pending lists merged now.
"""

import django.contrib.postgres.indexes
from django.db import migrations

INDEXES = ["memory_search_vector_gin", "memory_metadata_gin"]


class Migration(migrations.Migration):
    dependencies = [("memories", "0011_embedding_owner_bits")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="memory", name="memory_metadata_gin"),
                migrations.AddIndex(
                    model_name="memory",
                    index=django.contrib.postgres.indexes.GinIndex(
                        fastupdate=False, fields=["metadata"], name="memory_metadata_gin"
                    ),
                ),
                migrations.RemoveIndex(model_name="memory", name="memory_search_vector_gin"),
                migrations.AddIndex(
                    model_name="memory",
                    index=django.contrib.postgres.indexes.GinIndex(
                        fastupdate=False, fields=["search_vector"], name="memory_search_vector_gin"
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=[f"ALTER INDEX {name} SET (fastupdate = off)" for name in INDEXES]
                    + [f"SELECT gin_clean_pending_list('{name}'::regclass)" for name in INDEXES],
                    reverse_sql=[f"ALTER INDEX {name} RESET (fastupdate)" for name in INDEXES],
                ),
            ],
        ),
    ]
