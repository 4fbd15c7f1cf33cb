"""The synopsis app's own records: calls to the LLM provider, messages mined for facts."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memories.models import Memory, Project


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


class FactExtraction(models.Model):
    """A user message mined for facts (or skipped, or failed): each message is mined
    once, and a failed extraction is recorded here with its error."""

    class Status(models.TextChoices):
        DONE = "done"
        SKIPPED = "skipped"  # no user, extraction off for the project, only the hub's text
        FAILED = "failed"  # the LLM's answer was not valid: nothing stored

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="fact_extractions")
    message = models.OneToOneField(Memory, on_delete=models.CASCADE, related_name="fact_extraction")
    status = models.CharField(max_length=8, choices=Status.choices)
    extractor = models.CharField(max_length=200, blank=True)  # "offline" or "llm:<model>"
    facts = models.PositiveSmallIntegerField(default=0)  # facts created or reinforced
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            # the admin's and the bench's view of recent extractions per project
            models.Index(fields=["project", "-created_at"], name="fact_extraction_project"),
        ]

    def __str__(self) -> str:
        return f"{self.status} {self.message_id}"
