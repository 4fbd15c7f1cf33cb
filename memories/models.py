"""The tables agents read and write. Every row carries its project (the tenant)."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from django.utils import timezone
from pgvector.django import VectorField

SEARCH_CONFIG = "english"


def content_hash(text: str) -> str:
    """The de-duplication and embedding-cache key of a text (whitespace-normalized)."""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


class Project(models.Model):
    """A tenant: its keys see only its own users, rooms and memories."""

    name = models.CharField(max_length=200, unique=True)
    settings = models.JSONField(default=dict, blank=True)
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


class MemoryQuerySet(models.QuerySet["Memory"]):
    def for_project(self, project: Project | int) -> MemoryQuerySet:
        return self.filter(project=project)

    def active(self) -> MemoryQuerySet:
        return self.filter(status=Memory.Status.ACTIVE)

    def of_kind(self, *kinds: str) -> MemoryQuerySet:
        return self.filter(kind__in=kinds)

    def pending_embedding(self) -> MemoryQuerySet:
        return self.filter(embedding_status=Memory.EmbeddingStatus.PENDING)

    def with_external_ids(self) -> MemoryQuerySet:
        """Annotate the user's, room's and agent's external ids, which is all the API
        shows of them (cheaper than select_related of the three rows)."""
        return self.annotate(
            user_external_id=models.F("end_user__external_id"),
            room_external_id=models.F("room__external_id"),
            agent_external_id=models.F("agent__external_id"),
        )


class Memory(models.Model):
    """One remembered thing of any kind: a turn, a summary, a fact, a document chunk…"""

    class Kind(models.TextChoices):
        MESSAGE = "message"
        SUMMARY = "summary"
        FACT = "fact"
        KNOWLEDGE = "knowledge"
        RELATIONSHIP = "relationship"
        GOAL = "goal"

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SYSTEM = "system"
        TOOL = "tool"

    class Status(models.TextChoices):
        ACTIVE = "active"
        ARCHIVED = "archived"  # e.g. summarized out of the buffer; kept, not deleted
        SUPERSEDED = "superseded"
        PRUNED = "pruned"

    class EmbeddingStatus(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memories")
    end_user = models.ForeignKey(
        EndUser, null=True, blank=True, on_delete=models.CASCADE, related_name="memories"
    )
    room = models.ForeignKey(
        Room, null=True, blank=True, on_delete=models.CASCADE, related_name="memories"
    )
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.SET_NULL)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MESSAGE)
    role = models.CharField(max_length=16, choices=Role.choices, blank=True)
    content = models.TextField()
    content_json = models.JSONField(default=dict, blank=True)  # action, source, url, attachments
    metadata = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64)
    is_unique = models.BooleanField(default=False)
    importance = models.FloatField(default=0.5)
    confidence = models.FloatField(default=1.0)
    access_count = models.PositiveIntegerField(default=0)
    accessed_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    embedding_status = models.CharField(
        max_length=16, choices=EmbeddingStatus.choices, default=EmbeddingStatus.PENDING
    )
    embedded_at = models.DateTimeField(null=True, blank=True)
    # provenance: what a summary or fact was derived from, which document chunk this is
    source_ids = models.JSONField(default=list, blank=True)
    document_id = models.UUIDField(null=True, blank=True)
    chunk_index = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    search_vector = models.GeneratedField(
        expression=SearchVector("content", config=SEARCH_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    objects = MemoryQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "memories"
        indexes = [
            # list and count by user / room / kind, newest first; the filtered-set size
            # estimate before a vector search
            models.Index(
                fields=["project", "end_user", "kind", "-created_at"], name="memory_user_kind"
            ),
            models.Index(
                fields=["project", "room", "kind", "-created_at"], name="memory_room_kind"
            ),
            models.Index(fields=["project", "kind", "-created_at"], name="memory_project_kind"),
            # embedding cache lookups: is there already a vector for this text?
            models.Index(fields=["content_hash"], name="memory_content_hash"),
            # the embedding workers' claim query and the beat backfill
            models.Index(
                fields=["created_at"],
                name="memory_embedding_pending",
                condition=Q(embedding_status="pending"),
            ),
            # metadata containment filters (metadata @> {...})
            GinIndex(fields=["metadata"], name="memory_metadata_gin"),
            # keyword search (search_vector @@ tsquery)
            GinIndex(fields=["search_vector"], name="memory_search_vector_gin"),
        ]
        constraints = [
            # `unique` writes: one copy of a text per user, room and kind
            models.UniqueConstraint(
                fields=["project", "end_user", "room", "kind", "content_hash"],
                condition=Q(is_unique=True),
                nulls_distinct=False,
                name="memory_unique_content",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.content[:60]}"

    # what a revision records before and after a change
    SNAPSHOT_FIELDS = (
        "content",
        "content_json",
        "metadata",
        "kind",
        "role",
        "importance",
        "confidence",
        "status",
        "end_user_id",
        "room_id",
    )

    def snapshot(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.SNAPSHOT_FIELDS}


class EmbeddingSpace(models.Model):
    """One embedding model's vector space; each gets its own partial HNSW index."""

    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=200)
    dimension = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["provider", "model"], name="embedding_space_model")
        ]

    def __str__(self) -> str:
        return f"{self.provider}:{self.model} ({self.dimension}d)"

    @property
    def index_name(self) -> str:
        return f"embedding_hnsw_space_{self.pk}"


class Embedding(models.Model):
    """The vector of one window of a memory's text in one space.

    A text longer than the model reads at once is embedded as overlapping windows
    (memories.embeddings.token_windows), each a row; a memory's similarity to a query
    is its best window's. The vector column is untyped so spaces can differ in size.
    """

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="embeddings")
    space = models.ForeignKey(EmbeddingSpace, on_delete=models.CASCADE)
    window = models.PositiveSmallIntegerField(db_default=0)  # 0, 1, ... in text order
    vector = VectorField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["memory", "space", "window"], name="embedding_memory_space_window"
            )
        ]
        # The HNSW index per space is created with the space
        # (memories.services.embedding.embedding_space_index_ensure).

    def __str__(self) -> str:
        return f"{self.memory_id} in space {self.space_id}"


class MemoryRevision(models.Model):
    """Every change to a memory: who, when, what it was before and after."""

    class Action(models.TextChoices):
        CREATE = "create"
        UPDATE = "update"
        SUPERSEDE = "supersede"
        ARCHIVE = "archive"
        PRUNE = "prune"
        DELETE = "delete"

    class ActorType(models.TextChoices):
        API_KEY = "api_key"
        OPERATOR = "operator"
        SYSTEM = "system"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="revisions")
    memory_id = models.UUIDField()  # not a foreign key: revisions outlive deleted memories
    action = models.CharField(max_length=16, choices=Action.choices)
    actor_type = models.CharField(max_length=16, choices=ActorType.choices)
    actor = models.CharField(max_length=200)  # key prefix, operator username or task name
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # a memory's history, newest first
            models.Index(fields=["project", "memory_id", "-created_at"], name="revision_memory"),
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
    """Every change to a project's configuration (memories/config.py): who, when, the
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
