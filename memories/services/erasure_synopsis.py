"""What an erasure clears of the user synopsis (memories.services.erasure): the parts
built from an erased memory, the words of the user's synopsis revisions, the cached
synopsis in Redis."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import redis
from django.db import connection

from memories.models import Synopsis
from memories.models.synopsis import PARTS, SynopsisRevision
from memories.providers.redis_client import redis_client
from memories.services.synopsis_cache import CACHE_KEY, synopsis_cache_put_on_commit

logger = logging.getLogger(__name__)


def synopses_clear(*, project_id: int, users: set[int], erased: set[str]) -> tuple[int, int]:
    """Clear each part of these ``users``' synopses built from one of the ``erased``
    memories (public ids) and redact those users' synopsis revisions, whichever part
    they are of (an operator's edit may have kept the words without the sources);
    returns (parts cleared, revisions redacted). A cleared part is missing: the next
    read or the beat's refresh generates it anew."""
    parts = revisions = 0
    rows = Synopsis.objects.filter(project_id=project_id, end_user_id__in=users)
    for row in rows.order_by("pk").select_for_update():
        revisions += _synopsis_revisions_redact(row)
        cleared = [p for p in PARTS if erased & set(row.part(p).source_ids)]
        if not cleared:
            continue
        columns: list[str] = []
        for part in cleared:
            columns += row.part_set(
                part, text="", token_count=0, source_ids=[], generated_at=None, locked=False
            )
        row.version += 1
        row.save(update_fields=[*columns, "version", "updated_at"])
        # the new version, not a dropped key: the cache keeps the newer of two puts, so a
        # reader that read the old row before this commit cannot cache its words again
        synopsis_cache_put_on_commit(row=row)
        parts += len(cleared)
    return parts, revisions


def _synopsis_revisions_redact(row: Synopsis) -> int:
    """Each of the user's synopsis revisions keeps its part, action, who and when, and
    the SHA-256 of the text before and after."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {SynopsisRevision._meta.db_table}
            SET before = {_synopsis_redacted_sql("before")},
                after = {_synopsis_redacted_sql("after")}
            WHERE end_user_id = %s AND NOT (before ? 'redacted' AND after ? 'redacted')
            """,
            [row.end_user_id],
        )
        return cursor.rowcount


def _synopsis_redacted_sql(column: str) -> str:
    digest = f"encode(sha256(convert_to(coalesce({column} ->> 'text', ''), 'UTF8')), 'hex')"
    return (
        f"jsonb_build_object('redacted', true, 'locked', {column} -> 'locked', "
        f"'text_sha256', {digest})"
    )


def synopsis_caches_drop(end_user_ids: Iterable[int]) -> None:
    """Drop these users' cached synopses from Redis (a Redis error is logged: the
    entries expire within the cache's hour)."""
    keys = [CACHE_KEY.format(user_id) for user_id in end_user_ids]
    if not keys:
        return
    try:
        redis_client().delete(*keys)
    except redis.RedisError as error:
        logger.warning("could not drop %d cached synopses: %s", len(keys), error)
