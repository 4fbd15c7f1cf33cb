"""Counts of a project's memories that a page can read without counting them.

``memories_memory_tally`` holds signed counts by (project, user, room, day created,
kind, status, embedding status), written by statement triggers on ``memories_memory`` (migration
0025): each INSERT, DELETE or UPDATE statement appends one row per group it changed,
+n or -n, and never updates a row, so writers never wait on one another for a counter.
A group's count is the sum of its rows; memories.services.tallies folds them into one
row a group every minute (the beat). ``last_at`` is the latest ``created_at`` written
into the group (kept when rows leave it): the users list's "last activity".

Unmanaged: the table, its triggers and its backfill are the migration's SQL. Projects,
users and rooms are plain ids (0 for none) with no foreign keys; triggers on their own
tables delete their tallies with them, so no row names a deleted one."""

from __future__ import annotations

from django.db import models


class MemoryTally(models.Model):
    project_id = models.BigIntegerField()
    end_user_id = models.BigIntegerField()  # 0: none
    room_id = models.BigIntegerField()  # 0: none
    day = models.DateField()  # the UTC day of created_at
    kind = models.CharField(max_length=16)
    status = models.CharField(max_length=16)
    embedding_status = models.CharField(max_length=16)
    n = models.BigIntegerField()
    last_at = models.DateTimeField(null=True)

    class Meta:
        managed = False
        db_table = "memories_memory_tally"

    def __str__(self) -> str:
        return f"{self.kind}/{self.status}/{self.embedding_status}: {self.n:+}"
