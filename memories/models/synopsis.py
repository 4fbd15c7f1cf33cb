"""The user synopsis (MUXI's two-tier cache): per end user, an identity part that
changes slowly (who they are, from facts) and a context part that follows the
conversation (open goals, recent topics). The synopsis app generates the parts;
agents read them (memories/services/synopsis.py).

The two parts are columns of one row, not rows of a child table: the set of parts
is fixed by design, a read is one row, and a generation locks one row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import models
from django.utils import timezone

from memories.models.history import MemoryRevision
from memories.models.tenancy import EndUser, Project

IDENTITY, CONTEXT = "identity", "context"
PARTS = (IDENTITY, CONTEXT)
# a part's columns are named <part>_<field>
PART_FIELDS = (
    "text",
    "generated_at",
    "token_count",
    "source_ids",
    "generator",
    "locked",
    "edited_by",
)


@dataclass(frozen=True)
class SynopsisPart:
    """One part as stored: its text and where it came from."""

    text: str
    generated_at: datetime | None  # when its material was read (or an operator wrote it)
    token_count: int
    source_ids: list[str]
    generator: str  # "template", "llm:<model>", "operator"; a fallback says why
    locked: bool  # never regenerated while locked
    edited_by: str  # who last edited or locked it, if anyone

    def as_json(self) -> dict[str, Any]:
        """The part as the cache holds it."""
        return {
            "text": self.text,
            "generated_at": self.generated_at.isoformat() if self.generated_at else None,
            "token_count": self.token_count,
            "source_ids": self.source_ids,
            "generator": self.generator,
            "locked": self.locked,
            "edited_by": self.edited_by,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SynopsisPart:
        generated_at = data.get("generated_at")
        return cls(
            text=data["text"],
            generated_at=datetime.fromisoformat(generated_at) if generated_at else None,
            token_count=data["token_count"],
            source_ids=list(data["source_ids"]),
            generator=data["generator"],
            locked=data["locked"],
            edited_by=data["edited_by"],
        )


class Synopsis(models.Model):
    """What an agent should know about a user before it says anything: one row per
    user, two parts, each with its own generated-at (its TTL is per project)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="synopses")
    end_user = models.OneToOneField(EndUser, on_delete=models.CASCADE, related_name="synopsis")

    identity_text = models.TextField(blank=True)
    identity_generated_at = models.DateTimeField(null=True, blank=True)
    identity_token_count = models.PositiveIntegerField(default=0)
    identity_source_ids = models.JSONField(default=list, blank=True)
    identity_generator = models.CharField(max_length=200, blank=True)
    identity_locked = models.BooleanField(default=False)
    identity_edited_by = models.CharField(max_length=200, blank=True)

    context_text = models.TextField(blank=True)
    context_generated_at = models.DateTimeField(null=True, blank=True)
    context_token_count = models.PositiveIntegerField(default=0)
    context_source_ids = models.JSONField(default=list, blank=True)
    context_generator = models.CharField(max_length=200, blank=True)
    context_locked = models.BooleanField(default=False)
    context_edited_by = models.CharField(max_length=200, blank=True)

    # raised by every write: the Redis cache keeps the newest version it was given
    version = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "synopses"

    def __str__(self) -> str:
        return f"synopsis of {self.end_user_id}"

    def part(self, name: str) -> SynopsisPart:
        """The part ``name`` (identity or context) as stored."""
        return SynopsisPart(**{field: getattr(self, f"{name}_{field}") for field in PART_FIELDS})

    def part_set(self, name: str, **values: Any) -> list[str]:
        """Set fields of part ``name``; returns the column names changed."""
        columns = []
        for field, value in values.items():
            if field not in PART_FIELDS:
                raise ValueError(f"unknown field of a synopsis part: {field}")
            setattr(self, f"{name}_{field}", value)
            columns.append(f"{name}_{field}")
        return columns


class SynopsisRevision(models.Model):
    """Every operator's or agent's edit, lock and unlock of a synopsis part: who, when,
    the part before and after (generations are not recorded: the row says which
    generator wrote the part and when)."""

    class Action(models.TextChoices):
        EDIT = "edit"
        LOCK = "lock"
        UNLOCK = "unlock"

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="synopsis_revisions"
    )
    end_user = models.ForeignKey(
        EndUser, on_delete=models.CASCADE, related_name="synopsis_revisions"
    )
    part = models.CharField(max_length=16, choices=[(p, p) for p in PARTS])
    action = models.CharField(max_length=16, choices=Action.choices)
    actor_type = models.CharField(max_length=16, choices=MemoryRevision.ActorType.choices)
    actor = models.CharField(max_length=200)  # key prefix, operator username or task name
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # a user's synopsis history, newest first
            models.Index(
                fields=["project", "end_user", "-created_at"], name="synopsis_revision_user"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.part} of {self.end_user_id} by {self.actor}"
