"""What the derived memories do when the core's signals fire (connected in apps.py)."""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import receiver

from memories.providers.task_sending import TaskNotSent, sending_paused
from memories.services.buffer import rooms_over_capacity
from memories.signals import memories_created, synopsis_requested
from synopsis.services.facts import facts_extract_enqueue
from synopsis.services.summaries import room_summarize_enqueue
from synopsis.services.synopses import synopsis_facts_refresh, synopsis_generate_enqueue

logger = logging.getLogger(__name__)


@receiver(memories_created, dispatch_uid="synopsis.summarize_overflowing_rooms")
def summarize_overflowing_rooms(
    sender: Any, project_id: int, memory_ids: list[Any], **kwargs: Any
) -> None:
    """Rooms that got messages and are now over capacity get a summary task. This runs
    after the write committed: a failure here must not fail the write, and the beat
    sweep catches any room it missed."""
    room_ids = kwargs.get("message_room_ids")
    if room_ids == [] or sending_paused():  # no room, or Redis down: nothing to send
        return
    try:
        over = rooms_over_capacity(project_id=project_id, room_ids=room_ids, memory_ids=memory_ids)
        if over:
            room_summarize_enqueue(room_ids=over)
    except Exception:
        logger.exception("could not queue summaries for project %s (the sweep will)", project_id)


@receiver(memories_created, dispatch_uid="synopsis.mine_user_messages")
def mine_user_messages(
    sender: Any, project_id: int, user_message_ids: list[Any], **kwargs: Any
) -> None:
    """New user messages get a fact-extraction task (the beat sweep catches the ones a
    Redis outage lost)."""
    ids = user_message_ids
    if not ids:
        return
    try:
        facts_extract_enqueue(memory_ids=ids)
    except TaskNotSent:
        pass  # Redis is down: logged once per pause (task_sending.py); the sweep mines them
    except Exception:
        logger.exception(
            "could not queue fact extraction for project %s (the sweep will)", project_id
        )


@receiver(synopsis_requested, dispatch_uid="synopsis.generate_synopsis")
def generate_synopsis(
    sender: Any, end_user_id: int, parts: list[str], force: bool = False, **kwargs: Any
) -> bool:
    """A synopsis asked for (a stale read, a refresh) gets a generation task; an error
    propagates to the asker, who clears its queued flags."""
    synopsis_generate_enqueue(end_user_id=end_user_id, parts=parts, force=force)
    return True


@receiver(memories_created, dispatch_uid="synopsis.refresh_synopses_after_facts")
def refresh_synopses_after_facts(
    sender: Any, project_id: int, memory_ids: list[Any], **kwargs: Any
) -> None:
    """Users who got ``synopsis.refresh_after_facts`` new facts since their identity part
    was generated get it regenerated. A write of user messages alone has no facts to
    look for; a failure here must not fail the write (the TTL catches up)."""
    ids = set(memory_ids) - set(kwargs.get("user_message_ids") or [])
    if not ids:
        return
    try:
        synopsis_facts_refresh(project_id=project_id, memory_ids=list(ids))
    except Exception:
        logger.exception("could not check the synopses of project %s", project_id)
