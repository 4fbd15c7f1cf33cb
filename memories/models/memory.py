"""The one table of everything remembered: turns, summaries, facts, knowledge…"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from typing import Any

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from django.utils import timezone

from memories.models.tenancy import Agent, EndUser, Project, Room

SEARCH_CONFIG = "english"

# Keyword search's indexed document: the text's lexemes and one token of the memory's
# owner, "~u<end user id>" ("~u" for the project's shared memories), which no text
# yields (the parser splits at "~"). A search filtered to one user asks for that token
# AND its words: PostgreSQL's GIN index then walks the user's postings and skips
# through the words', instead of reading every posting of the words in the whole
# table and intersecting with the user's rows (at 1M memories, a user of 9,000: 38 ms
# -> 4 ms for the matching rows, BENCHMARKS.md). Index memory_keyword_gin (migration
# 0013) is built on exactly this expression; queries must repeat it to use it.
KEYWORD_OWNER_PREFIX = "~u"


def keyword_document_sql(alias: str) -> str:
    """The SQL of keyword search's indexed document over memories_memory ``alias``."""
    return (
        f"({alias}.search_vector || array_to_tsvector("
        f"ARRAY['{KEYWORD_OWNER_PREFIX}' || coalesce({alias}.end_user_id::text, '')]))"
    )


def keyword_owner_token(end_user_id: int | None) -> str:
    """The owner token of a user's memories (None: of the project's shared ones)."""
    return f"{KEYWORD_OWNER_PREFIX}{end_user_id if end_user_id is not None else ''}"


def content_hash(text: str) -> str:
    """The de-duplication and embedding-cache key of a text (whitespace-normalized)."""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


class MemoryQuerySet(models.QuerySet["Memory"]):
    def bulk_create(  # type: ignore[override]
        self, objs: Iterable[Memory], *args: Any, **kwargs: Any
    ) -> list[Memory]:
        """As Django's, giving a memory without a public id its pk as one (see Memory)."""
        memories = list(objs)
        for memory in memories:
            memory.public_id_default()
        return super().bulk_create(memories, *args, **kwargs)  # type: ignore[arg-type,return-value]

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
    """One remembered thing of any kind: a turn, a summary, a fact, a document chunk…

    Two ids. ``id`` (the pk) is the hub's own: every foreign key (Embedding, embedding
    windows), revision row (``MemoryRevision.memory_id``) and internal lookup uses it,
    and no client ever sees it. ``public_id`` is the id clients see and address, unique
    within the project (``memory_public_id``): a client may choose it (for idempotent
    retries) without learning or blocking anything of another project. Without a client
    id both are the same fresh uuid4; with client id X, ``public_id`` is X and ``id`` is
    X too unless some memory anywhere already has pk X (then a fresh uuid4: unpredictable,
    so no tenant can occupy it in advance).

    Stored references that clients read hold public ids, always resolved within the
    memory's own project: ``source_ids`` (what a summary or fact derives from),
    ``metadata["superseded_by"]``, ``metadata["extracted_from"]``,
    ``metadata["previous_summary_id"]``, ``content_json["supersedes"]``, a synopsis'
    source ids, a prune run's ids, a revision's ``memory_public_id``. The API, exports
    and imports pass them through unchanged. Internal ones hold pks: foreign keys,
    signals (memories_created), task arguments, access counts in Redis, the list
    cursor (opaque to clients).
    """

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
        # written but not yet visible: a document version whose chunks are still being
        # embedded; they become active all at once, replacing the previous version's
        STAGED = "staged"
        # forgotten by an operator in the console: out of search and contexts, in the
        # trash for pruning.trash_days (undo), then erased (memories.services.trash)
        TRASHED = "trashed"
        # extracted by a worker while the project reviews extractions (facts.review):
        # waits in the console's review inbox, reaches no context until accepted
        PROPOSED = "proposed"

    class EmbeddingStatus(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # the id clients see, unique within the project (see the class docstring); save()
    # and bulk_create() default it to the pk
    public_id = models.UUIDField(editable=False)
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
    importance = models.FloatField(default=0.5)  # explicit: set by the agent or an operator
    pinned = models.BooleanField(default=False, db_default=False)  # importance 1, never pruned
    # MUXI's 0.3 x recency + 0.3 x access frequency + 0.4 x importance, recomputed by beat
    importance_score = models.FloatField(default=0.5, db_default=0.5)
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
            # what a project's workers embedded lately (the Jobs page's chart per hour;
            # it read all of the project's rows: 176 ms of its 410 at 100,000)
            models.Index(
                fields=["project", "-embedded_at"],
                name="memory_project_embedded",
                condition=Q(embedded_at__isnull=False),
            ),
            # the rarer statuses of a project, newest first: the trash, the review inbox,
            # the console's status filter (a status filter scanned all of a project's rows)
            models.Index(
                fields=["project", "status", "-created_at"],
                name="memory_project_status",
                condition=~Q(status="active"),
            ),
            # the admin's memory list across projects, newest first
            models.Index(fields=["-created_at", "-id"], name="memory_created"),
            # embedding cache lookups: is there already a vector for this text?
            models.Index(fields=["content_hash"], name="memory_content_hash"),
            # the embedding workers' claim query and the beat backfill
            models.Index(
                fields=["created_at"],
                name="memory_embedding_pending",
                condition=Q(embedding_status="pending"),
            ),
            # a document's chunks in order: listing, publishing a version, deleting
            models.Index(
                fields=["document_id", "chunk_index"],
                name="memory_document_chunk",
                condition=Q(document_id__isnull=False),
            ),
            # metadata containment filters (metadata @> {...}); without the pending list
            # (fastupdate), which every search would read through (migration 0012).
            # Keyword search's GIN index is on keyword_document_sql(), outside the
            # model's state: migration 0013 builds it, bench/bulk.py rebuilds it.
            GinIndex(fields=["metadata"], name="memory_metadata_gin", fastupdate=False),
        ]
        constraints = [
            # a client-chosen id is unique within its project, not across the hub; also
            # the index of every lookup by (project, public id)
            models.UniqueConstraint(fields=["project", "public_id"], name="memory_public_id"),
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

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.public_id_default()
        super().save(*args, **kwargs)

    def public_id_default(self) -> None:
        """Give a new memory without a public id its pk as one (a deferred public id,
        absent from __dict__, is left alone: reading it would query)."""
        if self.__dict__.get("public_id", False) is None:
            self.public_id = self.pk

    # what a revision records before and after a change
    SNAPSHOT_FIELDS = (
        "content",
        "content_json",
        "metadata",
        "kind",
        "role",
        "importance",
        "pinned",
        "confidence",
        "status",
        "end_user_id",
        "room_id",
        "source_ids",
    )

    def snapshot(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.SNAPSHOT_FIELDS}
