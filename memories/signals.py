"""Signals other apps connect to in AppConfig.ready() (memories imports none of them)."""

from django.dispatch import Signal

# sent after commit when memories were stored; kwargs: project_id, memory_ids and
# message_room_ids (the rooms that got new messages: their buffers may have overflowed)
# and user_message_ids (the new messages users wrote: facts may be mined from them)
memories_created = Signal()
