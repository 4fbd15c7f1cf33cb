"""The ingestion app's foreign keys to projects, users and documents are ON DELETE
CASCADE in the database too (why: memories/migrations/0017_delete_cascade.py)."""

from django.db import migrations

KEYS = (
    "'ingestion_document.project_id', 'ingestion_document.end_user_id', "
    "'ingestion_documentcontent.document_id'"
)


class Migration(migrations.Migration):
    atomic = False  # the procedure commits between its two steps
    dependencies = [("ingestion", "0001_initial"), ("memories", "0017_delete_cascade")]

    operations = [
        migrations.RunSQL(
            f"CALL memoryhub_foreign_keys_on_delete(ARRAY[{KEYS}], 'CASCADE')",
            f"CALL memoryhub_foreign_keys_on_delete(ARRAY[{KEYS}], 'NO ACTION')",
        ),
    ]
