"""Client-chosen memory ids scoped to the project (issue 14).

Memory.public_id is the id clients see, unique within the project; the pk stays the
hub's internal key. Every existing memory keeps its id as its public id (one UPDATE),
and every revision the public id of its memory (its memory_id, the same value).
"""

from django.db import migrations, models

FILL = """
UPDATE memories_memory SET public_id = id WHERE public_id IS NULL;
UPDATE memories_memoryrevision SET memory_public_id = memory_id WHERE memory_public_id IS NULL;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0009_memory_created_api_key_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="public_id",
            field=models.UUIDField(editable=False, null=True),
        ),
        migrations.AddField(
            model_name="memoryrevision",
            name="memory_public_id",
            field=models.UUIDField(null=True),
        ),
        # existing rows keep working: their id is their public id
        migrations.RunSQL(FILL, reverse_sql=migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="memory",
            name="public_id",
            field=models.UUIDField(editable=False),
        ),
        migrations.AlterField(
            model_name="memoryrevision",
            name="memory_public_id",
            field=models.UUIDField(),
        ),
        migrations.AddConstraint(
            model_name="memory",
            constraint=models.UniqueConstraint(
                fields=("project", "public_id"), name="memory_public_id"
            ),
        ),
        migrations.RemoveIndex(
            model_name="memoryrevision",
            name="revision_memory",
        ),
        migrations.AddIndex(
            model_name="memoryrevision",
            index=models.Index(
                fields=["project", "memory_public_id", "-created_at"],
                name="revision_memory_public",
            ),
        ),
    ]
