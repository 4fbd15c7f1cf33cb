"""Signals other apps connect to in AppConfig.ready() (memories imports none of them)."""

from django.dispatch import Signal

# sent after commit when memories were stored; kwargs: project_id, memory_ids and
# message_room_ids (the rooms that got new messages: their buffers may have overflowed)
# and user_message_ids (the new messages users wrote: facts may be mined from them)
memories_created = Signal()

# sent when a user's synopsis should be regenerated (stale on a read, asked for by an
# operator or agent); kwargs: project_id, end_user_id, parts (list), force (bool: even
# a fresh part). The receiver queues the work and raises if it cannot.
synopsis_requested = Signal()
