"""The synopsis app's own records: one row per call to the LLM provider."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memories.models import Project


class LlmCall(models.Model):
    """One chat() call to the LLM provider (all its attempts): what it was for, how
    many tokens it used, how long it took, and why it failed if it did."""

    class Status(models.TextChoices):
        OK = "ok"
        FAILED = "failed"

    class ErrorKind(models.TextChoices):
        NONE = "", "none"
        RETRYABLE = "retryable"
        PERMANENT = "permanent"

    # null: a call made for no project (e.g. a health check)
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.CASCADE, related_name="llm_calls"
    )
    purpose = models.CharField(max_length=64)  # e.g. "summary"
    model = models.CharField(max_length=200)
    status = models.CharField(max_length=8, choices=Status.choices)
    error_kind = models.CharField(
        max_length=16, choices=ErrorKind.choices, default=ErrorKind.NONE, blank=True
    )
    error = models.TextField(blank=True, default="")  # "<kind>: <message>" of a failure
    attempts = models.PositiveSmallIntegerField(default=1)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)  # all attempts and waits
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # a project's calls, newest first (usage and failures in the admin)
            models.Index(fields=["project", "-created_at"], name="llm_call_project"),
        ]

    def __str__(self) -> str:
        return f"{self.purpose} with {self.model}: {self.status}"
