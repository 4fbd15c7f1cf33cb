"""Asking for a user synopsis' regeneration: through the ``synopsis_requested`` signal
(memories never imports the synopsis app), at most one queued per user and part (a
flag in Redis), so a burst of reads queues one task."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress

import redis

from memories.models import EndUser, Synopsis
from memories.providers.redis_client import redis_client
from memories.signals import synopsis_requested

QUEUED_FLAG = "memoryhub:synopsis-queued:{}:{}"  # user id, part
QUEUED_FLAG_TTL = 300  # a lost task's part is asked for again by a read after this


class SynopsisUnavailable(Exception):
    """A regeneration could not be queued (Redis or the broker unreachable)."""


def synopsis_refresh_queue(*, end_user: EndUser, parts: list[str], force: bool) -> list[str]:
    """Flag each part queued and send the signal for the parts newly flagged; returns
    the parts that are queued now (newly or before, unless ``force``). Raises
    SynopsisUnavailable if Redis or the broker cannot be reached."""
    flags = [QUEUED_FLAG.format(end_user.pk, part) for part in parts]
    try:
        pipe = redis_client().pipeline(transaction=False)
        for flag in flags:
            pipe.set(flag, "1", nx=not force, ex=QUEUED_FLAG_TTL)
        newly = [part for part, was_set in zip(parts, pipe.execute(), strict=True) if was_set]
    except redis.RedisError as error:
        raise SynopsisUnavailable(f"Redis unreachable: {error}") from error
    if not newly:
        return parts  # all already queued
    try:
        answered = synopsis_requested.send(
            sender=Synopsis,
            project_id=end_user.project_id,
            end_user_id=end_user.pk,
            parts=newly,
            force=force,
        )
    except Exception as error:
        _flags_clear(end_user.pk, newly)
        raise SynopsisUnavailable(f"could not queue the regeneration: {error}") from error
    if not answered:  # no generator installed: nothing will clear the flags
        _flags_clear(end_user.pk, newly)
        return [part for part in parts if part not in newly]
    return parts


def _flags_clear(end_user_id: int, parts: Sequence[str]) -> None:
    with suppress(redis.RedisError):  # they expire
        redis_client().delete(*(QUEUED_FLAG.format(end_user_id, part) for part in parts))


def synopsis_refresh_dequeued(*, end_user_id: int, parts: Sequence[str]) -> None:
    """The regeneration of ``parts`` has started: a read from now on may queue the next
    (which finds them fresh and does nothing, unless they went stale again)."""
    _flags_clear(end_user_id, parts)


def synopsis_refresh_deferred(*, end_user_id: int, parts: Sequence[str], seconds: float) -> None:
    """The regeneration of ``parts`` is retried in ``seconds`` (the LLM is down): reads
    until then do not queue another."""
    with suppress(redis.RedisError):
        pipe = redis_client().pipeline(transaction=False)
        for part in parts:
            pipe.set(QUEUED_FLAG.format(end_user_id, part), "1", ex=int(seconds) + 60)
        pipe.execute()
