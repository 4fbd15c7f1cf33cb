"""API errors: DRF's shape, with 401 (not 403) for a missing key."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from memories.embeddings import EmbeddingError
from memories.services.idempotency import IdempotencyKeyReused
from memories.services.memories import MemoryConflict


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
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
    return drf_exception_handler(exc, context)
