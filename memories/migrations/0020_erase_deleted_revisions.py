"""Erasure for what was deleted before it existed (issue 42): the revisions of memories
that no longer exist kept their full snapshots (a delete recorded the last state, words
and all). Each is redacted as memories.services.erasure redacts: kind, role, status,
user, room, pinned and the SHA-256 of the text (and of its words), never the text. The
SQL is frozen here: the erasure module may change, this migration must not."""

from django.db import migrations


def _redacted(column: str) -> str:
    content = f"coalesce({column} ->> 'content', '')"
    words = f"btrim(regexp_replace(lower({content}), '[^a-z0-9]+', ' ', 'g'))"
    kept = ", ".join(
        f"'{name}', {column} -> '{name}'"
        for name in ("kind", "role", "status", "end_user_id", "room_id", "pinned")
    )
    return (
        f"CASE WHEN {column} IS NULL OR {column} ? 'redacted' THEN {column} ELSE "
        f"jsonb_strip_nulls(jsonb_build_object('redacted', true, {kept}, "
        f"'content_sha256', encode(sha256(convert_to({content}, 'UTF8')), 'hex'), "
        f"'words_sha256', encode(sha256(convert_to({words}, 'UTF8')), 'hex'))) END"
    )


ERASE_SQL = f"""
UPDATE memories_memoryrevision AS r
SET before = {_redacted("r.before")}, after = {_redacted("r.after")}
WHERE NOT EXISTS (SELECT 1 FROM memories_memory AS m WHERE m.id = r.memory_id)
  AND NOT (coalesce(r.before ? 'redacted', true) AND coalesce(r.after ? 'redacted', true))
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0019_embedding_switch_cascade")]

    operations = [migrations.RunSQL(ERASE_SQL, reverse_sql=migrations.RunSQL.noop)]
