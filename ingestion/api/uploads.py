"""The upload size cap, enforced before the body is read: by the announced
Content-Length first, then byte by byte while a multipart file arrives (a body
whose length was not announced, or understated, stops at the cap)."""

from __future__ import annotations

from typing import Any

from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from ingestion.services.documents import max_upload_bytes, max_upload_mb

# room for the multipart envelope and the form fields beside a file of the cap's size
ENVELOPE_BYTES = 64 * 1024


class UploadTooLarge(Exception):
    """The upload passes the cap; the view answers too_large_response()."""


def too_large_response() -> Response:
    return Response(
        {
            "detail": f"Uploads are limited to {max_upload_mb()} MB (INGESTION_MAX_UPLOAD_MB).",
            "limit": max_upload_bytes(),  # in bytes, as every 413 of the API says it
            "max_upload_mb": float(max_upload_mb()),
        },
        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )


class CappedUploadHandler(FileUploadHandler):
    """First of the upload handlers: passes each chunk of a file on to the others and
    stops the upload as soon as the file passes the cap."""

    def __init__(self, request: HttpRequest, limit: int) -> None:
        super().__init__(request)
        self.limit = limit

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > self.limit:
            raise UploadTooLarge()
        return raw_data

    def file_complete(self, file_size: int) -> Any:
        return None  # the next handler (memory or temporary file) builds the file


def upload_size_guard(request: Request) -> None:
    """Refuse (413) a body announced larger than the cap, and cap a multipart file
    while it arrives. Call before anything reads request.data."""
    limit = max_upload_bytes()
    try:
        announced = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        announced = 0
    if announced > limit + ENVELOPE_BYTES:
        raise UploadTooLarge()
    django_request = request._request
    django_request.upload_handlers = [
        CappedUploadHandler(django_request, limit),
        *django_request.upload_handlers,
    ]
