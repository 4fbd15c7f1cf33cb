"""Tasks parked as poison: an input that failed or timed out too many times, kept for an
operator instead of being redelivered in a loop (memories/services/parking.py)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memories.models.tenancy import Project


class ParkedTask(models.Model):
    """A task's input that failed, timed out or killed its worker PARKING_ATTEMPTS times:
    what was asked (task name, arguments), on what (the input's kind and ids), how it
    ended each time, and whether an operator sent it again. One row per task and input:
    parking the same input again reopens its row."""

    class Status(models.TextChoices):
        PARKED = "parked"
        RETRIED = "retried"  # sent again by an operator; parked again if it fails again

    class Reason(models.TextChoices):
        FAILED = "failed"  # the task raised
        TIME_LIMIT = "time limit"  # the soft or hard time limit was reached
        WORKER_LOST = "worker lost"  # its process died (OOM kill, hard limit) and redelivered

    task = models.CharField(max_length=200)
    # what the task works on: "message", "memory", "document", "room", "user", "run" (a
    # task without an input, e.g. a periodic sweep), and its ids
    input_kind = models.CharField(max_length=32)
    input_ids = models.JSONField(default=list, blank=True)
    # the task's input in one canonical string (its arguments): one row per task and input
    input_key = models.CharField(max_length=255)
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    reason = models.CharField(max_length=16, choices=Reason.choices)
    last_error = models.TextField(blank=True)
    first_failed_at = models.DateTimeField(default=timezone.now)
    last_failed_at = models.DateTimeField(default=timezone.now)
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="parked_tasks"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PARKED)
    retried_at = models.DateTimeField(null=True, blank=True)
    retried_by = models.CharField(max_length=150, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "input_key"], name="parked_task_input"),
        ]
        indexes = [
            # the admin's list and the overview's counts: parked first, newest first
            models.Index(fields=["status", "-last_failed_at"], name="parked_task_status"),
            models.Index(fields=["project", "status"], name="parked_task_project"),
        ]

    def __str__(self) -> str:
        return f"{self.task} on {self.input_kind} {self.input_key}"
