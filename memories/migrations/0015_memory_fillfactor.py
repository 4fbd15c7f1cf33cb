"""memories_memory's pages keep 15% free (fillfactor 85), so that rewriting a row in place
is possible.

Reads are counted, and the access flush (a beat task, every ACCESS_FLUSH_INTERVAL seconds)
writes access_count and accessed_at to every memory read since the last one; the
importance recompute and pruning rewrite rows too. None of these columns is indexed, so
PostgreSQL can write the new version of the row on its own page without touching the
table's 16 indexes (a HOT update), but only if the page has room for it. With the default
fillfactor of 100 the pages are full and nearly every such update moves the row to
another page and adds an entry to every index (the two GIN indexes word by word).

Measured on the 1M-memory bench database (rows of 950 bytes on average), a flush of 9,000
memories read at random from a user of 112,000: fillfactor 100, 12% / 34% / 49% HOT in
three flushes in a row, 1.32 / 1.10 / 0.81 s; 90, 71-77%, 0.67-0.50 s; 85, 87-89%, 0.39-0.30
s. The table takes 19% more pages. BENCHMARKS.md, "The access flush rewrites rows in
place".

Pages written from now on keep the room; the pages of an existing table get it when the
table is rewritten (VACUUM FULL memories_memory, which locks it while it runs).
"""

from django.db import migrations

FILLFACTOR = 85


class Migration(migrations.Migration):
    dependencies = [("memories", "0014_embedding_bits_xid")]

    operations = [
        migrations.RunSQL(
            sql=f"ALTER TABLE memories_memory SET (fillfactor = {FILLFACTOR})",
            reverse_sql="ALTER TABLE memories_memory RESET (fillfactor)",
        ),
    ]
