"""What the derived memories do when the core's signals fire (connected in apps.py)."""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import receiver

from memories.services.buffer import rooms_over_capacity
from memories.signals import memories_created
from synopsis.services.facts import facts_extract_enqueue
from synopsis.services.summaries import room_summarize_enqueue

logger = logging.getLogger(__name__)


@receiver(memories_created, dispatch_uid="synopsis.summarize_overflowing_rooms")
def summarize_overflowing_rooms(
    sender: Any, project_id: int, memory_ids: list[Any], **kwargs: Any
) -> None:
    """Rooms that got messages and are now over capacity get a summary task. This runs
    after the write committed: a failure here must not fail the write, and the beat
    sweep catches any room it missed."""
    room_ids = kwargs.get("message_room_ids")
    if room_ids == []:
        return
    try:
        over = rooms_over_capacity(project_id=project_id, room_ids=room_ids, memory_ids=memory_ids)
        if over:
            room_summarize_enqueue(room_ids=over)
    except Exception:
        logger.exception("could not queue summaries for project %s (the sweep will)", project_id)


@receiver(memories_created, dispatch_uid="synopsis.mine_user_messages")
def mine_user_messages(sender: Any, project_id: int, memory_ids: list[Any], **kwargs: Any) -> None:
    """New user messages get a fact-extraction task (the beat sweep catches the ones a
    Redis outage lost). Senders that do not say which are user messages: all ids go,
    and the task keeps the user messages."""
    ids = kwargs.get("user_message_ids", memory_ids)
    if not ids:
        return
    try:
        facts_extract_enqueue(memory_ids=ids)
    except Exception:
        logger.exception(
            "could not queue fact extraction for project %s (the sweep will)", project_id
        )
