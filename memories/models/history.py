"""What changed and what was answered: revisions of memories and settings, stored
responses to idempotent requests."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memories.models.tenancy import Project, Room


class MemoryRevision(models.Model):
    """Every change to a memory: who, when, what it was before and after.

    ``memory_id`` is the memory's pk (internal), ``memory_public_id`` the id its
    clients address it by (Memory.public_id): a memory's history is looked up by the
    latter within the project, also after the memory was deleted."""

    class Action(models.TextChoices):
        CREATE = "create"
        UPDATE = "update"
        SUPERSEDE = "supersede"
        ARCHIVE = "archive"
        PRUNE = "prune"
        DELETE = "delete"
        TRASH = "trash"  # an operator's forget: the memory waits in the trash (undo)

    class ActorType(models.TextChoices):
        API_KEY = "api_key"
        OPERATOR = "operator"
        SYSTEM = "system"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="revisions")
    memory_id = models.UUIDField()  # not a foreign key: revisions outlive deleted memories
    memory_public_id = models.UUIDField()
    action = models.CharField(max_length=16, choices=Action.choices)
    actor_type = models.CharField(max_length=16, choices=ActorType.choices)
    actor = models.CharField(max_length=200)  # key prefix, operator username or task name
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    # why, beyond the action: "restore" (an earlier version written back), "undo" (out
    # of the trash), "bulk" (one of many changed at once), "review" (an extraction
    # accepted, edited or rejected); blank: a plain change. db_default: raw inserts
    # (the erasure's, the pruning's) need not name it
    intent = models.CharField(max_length=16, blank=True, default="", db_default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # a project's activity log, newest first
            models.Index(fields=["project", "-created_at"], name="revision_project_created"),
            # its intent filter (restore, undo, bulk, review): rare rows, a small index
            models.Index(
                fields=["project", "intent", "-created_at"],
                name="revision_project_intent",
                condition=~models.Q(intent=""),
            ),
            # a memory's history, newest first
            models.Index(
                fields=["project", "memory_public_id", "-created_at"], name="revision_memory_public"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.memory_id} by {self.actor}"


class IdempotencyKey(models.Model):
    """A replayable response to a write made with an Idempotency-Key header."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    response = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "key"], name="idempotency_key_unique")
        ]
        indexes = [models.Index(fields=["created_at"], name="idempotency_key_created")]

    def __str__(self) -> str:
        return self.key


class SettingsRevision(models.Model):
    """Every change to a project's configuration (memories/config/): who, when, the
    stored overrides before and after."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="settings_revisions"
    )
    # a room's own overrides (of the project's settings); null: the project's
    room = models.ForeignKey(Room, null=True, blank=True, on_delete=models.CASCADE)
    actor_type = models.CharField(max_length=16, choices=MemoryRevision.ActorType.choices)
    actor = models.CharField(max_length=200)  # key prefix, operator username or task name
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # the settings history of a project, newest first
            models.Index(fields=["project", "-created_at"], name="settings_revision_project"),
        ]

    def __str__(self) -> str:
        return f"settings of {self.project_id} by {self.actor}"
