"""The tables agents read and write. Every row carries its project (the tenant)."""

from memories.models.embedding import Embedding, EmbeddingSpace, EmbeddingSwitch
from memories.models.history import IdempotencyKey, MemoryRevision, SettingsRevision
from memories.models.maintenance import MaintenanceRun
from memories.models.memory import (
    SEARCH_CONFIG,
    Memory,
    MemoryQuerySet,
    content_hash,
    keyword_document_sql,
    keyword_owner_token,
)
from memories.models.operators import Membership, MembershipQuerySet
from memories.models.synopsis import Synopsis, SynopsisPart, SynopsisRevision
from memories.models.tallies import MemoryTally
from memories.models.tasks import ParkedTask
from memories.models.tenancy import (
    Agent,
    ApiKey,
    ApiKeyQuerySet,
    EndUser,
    EndUserQuerySet,
    Project,
    Room,
    RoomQuerySet,
)

__all__ = [
    "SEARCH_CONFIG",
    "keyword_document_sql",
    "keyword_owner_token",
    "Agent",
    "ApiKey",
    "ApiKeyQuerySet",
    "Embedding",
    "EmbeddingSpace",
    "EmbeddingSwitch",
    "EndUser",
    "EndUserQuerySet",
    "IdempotencyKey",
    "MaintenanceRun",
    "Membership",
    "MembershipQuerySet",
    "Memory",
    "MemoryQuerySet",
    "MemoryRevision",
    "MemoryTally",
    "ParkedTask",
    "Project",
    "Room",
    "RoomQuerySet",
    "SettingsRevision",
    "Synopsis",
    "SynopsisPart",
    "SynopsisRevision",
    "content_hash",
]
