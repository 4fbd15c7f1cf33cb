"""Who may use the operators' console for which project, and how."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from memories.models.tenancy import Project


class MembershipQuerySet(models.QuerySet["Membership"]):
    def editors(self) -> MembershipQuerySet:
        return self.filter(role=Membership.Role.EDITOR)


class Membership(models.Model):
    """An operator's access to one project's console: a viewer reads, an editor changes.

    Superusers see every project without a membership."""

    class Role(models.TextChoices):
        VIEWER = "viewer"
        EDITOR = "editor"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(default=timezone.now)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "project"], name="membership_user_project")
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) in {self.project}"

    @property
    def can_edit(self) -> bool:
        return self.role == self.Role.EDITOR
