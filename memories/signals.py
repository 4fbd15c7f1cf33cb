"""Signals other apps connect to in AppConfig.ready() (memories imports none of them)."""

from django.dispatch import Signal

# sent after commit when memories were stored; kwargs: project_id, memory_ids
memories_created = Signal()
