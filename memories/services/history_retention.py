"""How long memory revisions are kept: ``pruning.revision_retention_days`` (0: for ever),
applied by the pruning purge (memories.services.pruning)."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import QuerySet
from django.utils import timezone

from memories.models import MemoryRevision, Project
from memories.services.configuration import project_settings_get


def _revisions_expired(project: Project) -> QuerySet[MemoryRevision] | None:
    days = project_settings_get(project=project).pruning.revision_retention_days
    if not days:
        return None
    cutoff = timezone.now() - timedelta(days=days)
    return MemoryRevision.objects.filter(project=project, created_at__lt=cutoff)


def revisions_due(*, project: Project) -> bool:
    """Whether the project keeps revisions older than its ``revision_retention_days``."""
    expired = _revisions_expired(project)
    return expired is not None and expired.exists()


def revisions_purge(*, project: Project) -> int | None:
    """Delete the project's memory revisions older than ``pruning.revision_retention_days``
    of live and erased memories alike; returns the count, None when the project keeps
    them for ever (0). The redacted ones of erased memories hold no words, so the
    retention only decides how long the audit can prove an erasure."""
    expired = _revisions_expired(project)
    return None if expired is None else expired.delete()[0]
