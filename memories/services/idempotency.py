"""Idempotency-Key support: a retried write gets the first response back."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memories.models import IdempotencyKey, Project


class IdempotencyKeyReused(Exception):
    """The key was used before with a different request body."""


def request_fingerprint(*, method: str, path: str, body: Any) -> str:
    payload = json.dumps([method, path, body], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def idempotency_key_lock(*, project: Project, key: str) -> None:
    """Wait for any other request with this key to finish (until the transaction ends).

    A client that times out and retries while its first request still runs would
    otherwise find no stored response and write a second time.
    """
    digest = hashlib.sha256(f"idempotency-key:{project.pk}:{key}".encode()).digest()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s)", [int.from_bytes(digest[:8], "big", signed=True)]
        )


def idempotency_key_lookup(
    *, project: Project, key: str, fingerprint: str
) -> IdempotencyKey | None:
    """The stored response for this key, or None; raises if the key saw another request."""
    stored = IdempotencyKey.objects.filter(project=project, key=key).first()
    if stored is not None and stored.request_hash != fingerprint:
        raise IdempotencyKeyReused(key)
    return stored


def idempotency_key_store(
    *, project: Project, key: str, fingerprint: str, status_code: int, response: Any
) -> None:
    """Remember a response; a concurrent duplicate that stored first wins."""
    try:
        with transaction.atomic():
            IdempotencyKey.objects.create(
                project=project,
                key=key,
                request_hash=fingerprint,
                status_code=status_code,
                response=response,
            )
    except IntegrityError:
        pass


def idempotency_keys_purge() -> int:
    """Delete stored responses older than MEMORYHUB IDEMPOTENCY_KEY_TTL_HOURS."""
    cutoff = timezone.now() - timedelta(hours=settings.MEMORYHUB["IDEMPOTENCY_KEY_TTL_HOURS"])
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=cutoff).delete()
    return deleted
