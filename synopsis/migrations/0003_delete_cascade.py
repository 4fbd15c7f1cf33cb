"""The synopsis app's foreign keys to memories and projects are ON DELETE CASCADE in the
database too (why: memories/migrations/0017_delete_cascade.py): a message deleted while
a worker mines it takes its FactExtraction with it, never failing the delete."""

from django.db import migrations

KEYS = (
    "'synopsis_factextraction.message_id', 'synopsis_factextraction.project_id', "
    "'synopsis_llmcall.project_id'"
)


class Migration(migrations.Migration):
    atomic = False  # the procedure commits between its two steps
    dependencies = [("synopsis", "0002_fact_extraction"), ("memories", "0017_delete_cascade")]

    operations = [
        migrations.RunSQL(
            f"CALL memoryhub_foreign_keys_on_delete(ARRAY[{KEYS}], 'CASCADE')",
            f"CALL memoryhub_foreign_keys_on_delete(ARRAY[{KEYS}], 'NO ACTION')",
        ),
    ]
