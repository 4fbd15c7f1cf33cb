"""The switch's project key cascades in the database, as the others do (0017)."""

from django.db import migrations

CASCADE = (
    "CALL memoryhub_foreign_keys_on_delete(ARRAY['memories_embeddingswitch.project_id'], '{}')"
)


class Migration(migrations.Migration):
    atomic = False  # the procedure commits between its two steps
    dependencies = [("memories", "0018_embedding_switch")]

    operations = [migrations.RunSQL(CASCADE.format("CASCADE"), CASCADE.format("NO ACTION"))]
