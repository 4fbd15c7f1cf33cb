"""Token accounting: what the room's (or user's) whole history would have cost as a
prompt, against what the context served; totals per user for the dashboard."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from typing import Any

from django.db.models import Q

from memories.models import EndUser, Memory, Room
from memories.providers.redis_client import redis_client
from memories.providers.tokens import token_count

logger = logging.getLogger(__name__)

CACHE_KEY = "memoryhub:history-tokens:{encoding}:{scope}"
TOTALS_KEY = "memoryhub:context-totals:{project}"  # hash: "<user id>:<field>" -> n
CACHE_TTL = 7 * 86400


# how often the cached total is checked against the messages' count (which finds
# deletes): counting a user of 100,000 messages on every context costs more than the
# context; in between, only the messages written since the total are read (indexed)
RECOUNT_SECONDS = 300
RECOUNT_CHUNK = 2_000  # rows per fetch of a whole recount


def history_tokens(*, end_user: EndUser, room: Room | None, encoding: str) -> int:
    """Tokens of every message of the room (or the user), each as its text, counted
    incrementally: a cached total per scope grows by the messages written since it;
    every RECOUNT_SECONDS the count is checked, and a delete (the count no longer
    matches) recounts the whole."""
    messages = Memory.objects.filter(kind=Memory.Kind.MESSAGE)
    if room is not None:
        messages, scope = messages.filter(project_id=room.project_id, room=room), f"room:{room.pk}"
    else:
        messages = messages.filter(project_id=end_user.project_id, end_user=end_user)
        scope = f"user:{end_user.pk}"
    key = CACHE_KEY.format(encoding=encoding, scope=scope)
    cached = _cached(key)
    now = time.time()
    if cached and cached["at"] is not None:
        after = Q(created_at__gt=cached["at"]) | Q(created_at=cached["at"], id__gt=cached["id"])
        new = messages.filter(after)
        added = list(new.order_by("created_at", "id").values_list("created_at", "id", "content"))
        if now - cached.get("checked", 0) < RECOUNT_SECONDS:
            return _store(key, cached, added, encoding, checked=cached.get("checked", 0))
        if cached["count"] + len(added) == messages.count():
            return _store(key, cached, added, encoding, checked=now)
    # streamed: a user of 100,000 messages held whole is ~50 MB the web process keeps
    rows = messages.order_by("created_at", "id").values_list("created_at", "id", "content")
    empty = {"count": 0, "tokens": 0, "at": None, "id": None}
    return _store(key, empty, rows.iterator(chunk_size=RECOUNT_CHUNK), encoding, checked=now)


def _cached(key: str) -> dict[str, Any] | None:
    try:
        raw = redis_client().get(key)
    except Exception:  # Redis is down: count from scratch
        return None
    return json.loads(raw) if raw else None


def _store(
    key: str, state: dict[str, Any], rows: Iterable[Any], encoding: str, *, checked: float
) -> int:
    """``state`` grown by ``rows`` (created_at, id, content; oldest first), stored."""
    tokens, count, last = state["tokens"], 0, None
    for created_at, memory_id, content in rows:
        tokens += token_count(content, encoding)
        count, last = count + 1, (created_at.isoformat(), str(memory_id))
    if count or checked != state.get("checked"):
        at, last_id = last or (state["at"], state["id"])
        state = {
            "count": state["count"] + count,
            "tokens": tokens,
            "at": at,
            "id": last_id,
            "checked": checked,
        }
        try:
            redis_client().set(key, json.dumps(state), ex=CACHE_TTL)
        except Exception:
            logger.debug("history token count not cached (Redis unreachable)")
    return int(tokens)


def savings_record(*, end_user: EndUser, served: int, full: int) -> None:
    """Add one context to the user's totals (contexts, tokens served, tokens the full
    history would have taken); kept in Redis for the dashboard."""
    key = TOTALS_KEY.format(project=end_user.project_id)
    try:
        pipe = redis_client().pipeline(transaction=False)
        pipe.hincrby(key, f"{end_user.pk}:contexts", 1)
        pipe.hincrby(key, f"{end_user.pk}:served", served)
        pipe.hincrby(key, f"{end_user.pk}:full", full)
        pipe.execute()
    except Exception:
        logger.debug("context totals not recorded (Redis unreachable)")


def savings_totals(*, end_user: EndUser) -> dict[str, int]:
    """The user's totals: contexts built, tokens served, tokens of the full histories."""
    key = TOTALS_KEY.format(project=end_user.project_id)
    fields = ("contexts", "served", "full")
    values = redis_client().hmget(key, [f"{end_user.pk}:{name}" for name in fields])
    return {name: int(value or 0) for name, value in zip(fields, values, strict=True)}
