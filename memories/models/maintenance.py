"""What the scheduled maintenance did: one row per run of a task (and project)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memories.models.tenancy import Project


class MaintenanceRun(models.Model):
    """One run of a maintenance task (pruning, importance, sweeps), for one project or
    all: when, how it ended, what it counted. A dry run is recorded too."""

    class Status(models.TextChoices):
        RUNNING = "running"
        OK = "ok"
        FAILED = "failed"

    task = models.CharField(max_length=100)
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="maintenance_runs"
    )
    dry_run = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    counts = models.JSONField(default=dict, blank=True)  # e.g. {"fifo": 3, "age": 10}
    details = models.JSONField(default=dict, blank=True)  # e.g. a dry run's ids per policy
    error = models.TextField(blank=True)

    class Meta:
        indexes = [
            # the last runs of a task, overall and per project (admin, API)
            models.Index(fields=["task", "-started_at"], name="maintenance_run_task"),
            models.Index(fields=["project", "task", "-started_at"], name="maintenance_run_project"),
        ]

    def __str__(self) -> str:
        return f"{self.task} at {self.started_at:%Y-%m-%d %H:%M}"
