"""Signals other apps connect to in AppConfig.ready() (memories imports none of them)."""

from django.dispatch import Signal

# sent after commit when memories were created from an agent's or an operator's input
# (one, a batch, an import: memories.services.stored.memories_stored); kwargs:
# project_id, memory_ids (their pks, in the order written), message_room_ids (the rooms
# that got new messages, sorted: their buffers may have overflowed) and
# user_message_ids (the new messages a user wrote, role user with a user: facts are
# mined from them)
memories_created = Signal()

# sent when a user's synopsis should be regenerated (stale on a read, asked for by an
# operator or agent); kwargs: project_id, end_user_id, parts (list), force (bool: even
# a fresh part). The receiver queues the work and raises if it cannot.
synopsis_requested = Signal()
