"""API errors: DRF's shape (``{"detail": "..."}``, or ``{"field": ["message", ...]}``
for a field), with 401 (not 403) for a missing key, and 503 with Retry-After (not 500)
while PostgreSQL or Redis is unreachable. A 5xx names the request's id
(``"request_id"``), as its log lines do; an exception nothing here knows is answered
by the middleware (memoryhub/middleware.py: a JSON 500)."""

from __future__ import annotations

import logging
import time
from typing import Any

import kombu.exceptions
import psycopg
import redis
from django import db
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from memories.providers import request_ids
from memories.providers.embeddings import EmbeddingError
from memories.services.idempotency import IdempotencyKeyReused
from memories.services.matching import MemoryConflict

logger = logging.getLogger(__name__)

# What a request meets while a service is down or restarting. A database
# OperationalError is also a dropped connection, a server shutting down, a deadlock or
# a statement cancelled: each is over by itself, so "retry later" is the right answer.
DATABASE_ERRORS = (db.OperationalError, db.InterfaceError, psycopg.OperationalError)
REDIS_ERRORS = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    kombu.exceptions.OperationalError,  # the broker, when a view enqueues directly
)
LOG_EVERY_SECONDS = 10.0  # one warning per service per interval, not one per request
_logged_at: dict[str, float] = {}


def outage_of(exc: BaseException) -> str | None:
    """The service ``exc`` says is unreachable ("database" or "redis"), else None."""
    if isinstance(exc, DATABASE_ERRORS):
        return "database"
    if isinstance(exc, REDIS_ERRORS):
        return "redis"
    return None


def outage_detail(service: str) -> str:
    name = {"database": "The database (PostgreSQL)", "redis": "Redis"}[service]
    return f"{name} is unavailable; retry after {retry_after_seconds()} seconds."


def outage_log(service: str, exc: BaseException) -> None:
    now = time.monotonic()
    if now - _logged_at.get(service, -LOG_EVERY_SECONDS) >= LOG_EVERY_SECONDS:
        _logged_at[service] = now
        logger.warning("%s unavailable, answering 503: %s: %s", service, type(exc).__name__, exc)


def retry_after_seconds() -> int:
    return int(settings.MEMORYHUB["RETRY_AFTER_SECONDS"])


def body_too_large() -> Response:
    """Django's own check of a body read whole (DATA_UPLOAD_MAX_MEMORY_SIZE), as the 413
    the request limits middleware gives for a Content-Length over the limit."""
    limit = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0)
    return Response(
        {"detail": f"request body larger than {limit} bytes", "limit": limit},
        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = _response(exc, context)
    if response is not None and response.status_code >= 500 and isinstance(response.data, dict):
        response.data["request_id"] = request_ids.current.get()
    return response


def _response(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, exceptions.NotAuthenticated):
        return Response(
            {"detail": "Authentication required: 'Authorization: Bearer <api key>'."},
            status=status.HTTP_401_UNAUTHORIZED,
            headers={"WWW-Authenticate": 'Bearer realm="api"'},
        )
    if isinstance(exc, MemoryConflict):
        return Response({"id": [str(exc)]}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, IdempotencyKeyReused):
        return Response(
            {"detail": "This Idempotency-Key was used with a different request."},
            status=status.HTTP_422_UNPROCESSABLE_ENTITY,
        )
    if isinstance(exc, EmbeddingError):
        code = (
            status.HTTP_503_SERVICE_UNAVAILABLE
            if exc.retryable
            else status.HTTP_500_INTERNAL_SERVER_ERROR
        )
        return Response({"detail": f"Embedding failed: {exc}"}, status=code)
    service = outage_of(exc)
    if service is not None:
        outage_log(service, exc)
        return Response(
            {"detail": outage_detail(service), "service": service},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(retry_after_seconds())},
        )
    if isinstance(exc, RequestDataTooBig):
        return body_too_large()
    return drf_exception_handler(exc, context)
