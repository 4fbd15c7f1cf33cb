"""The tenant and who it talks to: projects, API keys, agents, end users, rooms."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class Project(models.Model):
    """A tenant: its keys see only its own users, rooms and memories."""

    name = models.CharField(max_length=200, unique=True)
    settings = models.JSONField(default=dict, blank=True)
    # the space its searches read and its writes are embedded into (None: the
    # configured model's, settings.EMBEDDING); changed only by a switch's flip
    # (memories/services/embedding_switch.py)
    embedding_space = models.ForeignKey(
        "memories.EmbeddingSpace", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.name


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiKey(models.Model):
    """An agent's credential: shown once, stored as a SHA-256 hash with a visible prefix."""

    class Scope(models.TextChoices):
        READ = "read"
        WRITE = "write"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.project})"

    @property
    def can_write(self) -> bool:
        return self.Scope.WRITE in self.scopes


class Agent(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="agents")
    external_id = models.CharField(max_length=255)
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "external_id"], name="agent_external_id")
        ]

    def __str__(self) -> str:
        return self.name or self.external_id


class EndUserQuerySet(models.QuerySet["EndUser"]):
    def for_project(self, project: Project | int) -> EndUserQuerySet:
        return self.filter(project=project)

    def by_external_id(self, external_id: str) -> EndUserQuerySet:
        """The user the agent platform knows by this id (one per project)."""
        return self.filter(external_id=external_id)


class EndUser(models.Model):
    """A person an agent talks to, known by the agent platform's own id."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="end_users")
    external_id = models.CharField(max_length=255)
    name = models.CharField(max_length=200, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    objects = EndUserQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "external_id"], name="end_user_external_id")
        ]

    def __str__(self) -> str:
        return self.name or self.external_id


class RoomQuerySet(models.QuerySet["Room"]):
    def for_project(self, project: Project | int) -> RoomQuerySet:
        return self.filter(project=project)

    def by_external_id(self, external_id: str) -> RoomQuerySet:
        """The room the agent platform knows by this id (one per project)."""
        return self.filter(external_id=external_id)


class Room(models.Model):
    """A conversation or session (ElizaOS room), optionally tied to an agent and world."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="rooms")
    external_id = models.CharField(max_length=255)
    name = models.CharField(max_length=200, blank=True)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL)
    world_id = models.CharField(max_length=255, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # the room's own overrides of the project's buffer and working-memory settings
    settings = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    objects = RoomQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "external_id"], name="room_external_id")
        ]

    def __str__(self) -> str:
        return self.name or self.external_id
