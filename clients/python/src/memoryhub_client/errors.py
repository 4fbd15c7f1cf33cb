"""The errors a call raises: one class per kind of failure, each carrying the HTTP status,
the hub's ``detail`` and, for a 400, its messages by field.

Messages name the method and path of the call, never a header: the API key cannot end
up in an exception, a traceback or a log line through them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

__all__ = [
    "AuthenticationError",
    "BadRequest",
    "ConfigurationError",
    "Conflict",
    "ConnectionFailed",
    "DocumentFailed",
    "MemoryHubError",
    "NotFound",
    "PermissionDenied",
    "RateLimited",
    "ServerError",
    "Timeout",
    "Unavailable",
    "WaitTimeout",
]


class MemoryHubError(Exception):
    """Any failure of a call. ``status`` is the HTTP status (None when no answer came),
    ``detail`` the hub's message, ``fields`` its messages by field (400, 409),
    ``request_id`` the hub's id of the request (its logs carry it)."""

    def __init__(
        self,
        status: int | None,
        detail: str,
        fields: Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
        call: str = "",
    ) -> None:
        self.status = status
        self.detail = detail
        self.fields: dict[str, Any] = dict(fields or {})
        self.request_id = request_id
        self.call = call
        super().__init__(self._message())

    def _message(self) -> str:
        where = f"{self.call}: " if self.call else ""
        status = f"{self.status} " if self.status is not None else ""
        request = f" (request id {self.request_id})" if self.request_id else ""
        return f"{where}{status}{self.detail}{request}"


class ConfigurationError(MemoryHubError):
    """The client cannot be built: no hub URL or no API key."""

    def __init__(self, detail: str) -> None:
        super().__init__(None, detail)


class BadRequest(MemoryHubError):
    """400 (the hub names each bad field in ``fields``), 413, 415 or 422."""


class AuthenticationError(MemoryHubError):
    """401: no key, or an unknown or revoked one."""


class PermissionDenied(MemoryHubError):
    """403: a read-only key on a write."""


class NotFound(MemoryHubError):
    """404: no such object in the key's project."""


class Conflict(MemoryHubError):
    """409: e.g. a client-chosen memory id the project uses for another memory."""


class RateLimited(MemoryHubError):
    """429 after the retries: ``retry_after`` is how long the hub asked to wait (s)."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        self.retry_after = retry_after
        super().__init__(*args, **kwargs)


class ServerError(MemoryHubError):
    """5xx after the retries; ``request_id`` finds the request in the hub's logs."""


class Unavailable(ServerError):
    """503: the hub's database or Redis is unreachable (``service`` says which)."""

    def __init__(
        self, *args: Any, retry_after: float | None = None, service: str = "", **kwargs: Any
    ) -> None:
        self.retry_after = retry_after
        self.service = service
        super().__init__(*args, **kwargs)


class ConnectionFailed(MemoryHubError):
    """No answer after the retries: refused, reset, or the network failed."""

    def __init__(self, detail: str, *, call: str = "") -> None:
        super().__init__(None, detail, call=call)


class Timeout(ConnectionFailed):
    """No answer within the timeout, on every attempt."""


class WaitTimeout(MemoryHubError, TimeoutError):
    """A wait (a document's ingestion) did not end in time; ``last`` is the last state."""

    def __init__(self, detail: str, last: Any) -> None:
        self.last = last
        super().__init__(None, detail)


class DocumentFailed(MemoryHubError):
    """A document's ingestion ended ``failed``; ``document`` holds its ``error``."""

    def __init__(self, document: Any) -> None:
        self.document = document
        super().__init__(None, f"document {document.id} failed: {document.error}")


BY_STATUS: dict[int, type[MemoryHubError]] = {
    400: BadRequest,
    401: AuthenticationError,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    413: BadRequest,
    415: BadRequest,
    422: BadRequest,
    429: RateLimited,
    503: Unavailable,
}


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The response's ``Retry-After`` in seconds (delta-seconds or an HTTP date)."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    date = response.headers.get("Date")
    now = parsedate_to_datetime(date) if date else None
    if now is None:
        return None
    return max(0.0, (when - now).total_seconds())


def _body(response: httpx.Response) -> Any:
    """The JSON answer; else its text on one line, cut (a proxy's HTML page)."""
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        text = " ".join(response.text.split())
        return f"{response.reason_phrase}: {text[:200]}" if text else response.reason_phrase


def _field_summary(fields: Mapping[str, Any]) -> str:
    """``{"content": ["Required."]}`` as ``content: Required.`` (nested names dotted)."""
    parts: list[str] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                if str(key).isdigit() and prefix:  # an item of a list: memories[3]
                    walk(f"{prefix}[{key}]", inner)
                else:
                    walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            parts.append(f"{prefix}: {' '.join(value)}")
        elif isinstance(value, list):
            for position, inner in enumerate(value):
                walk(f"{prefix}[{position}]", inner)
        else:
            parts.append(f"{prefix}: {value}")

    walk("", fields)
    return "; ".join(parts)


def error_from_response(response: httpx.Response, *, call: str) -> MemoryHubError:
    """The exception for a non-2xx answer, by status."""
    body = _body(response)
    fields: dict[str, Any] = {}
    if isinstance(body, Mapping) and isinstance(body.get("detail"), str):
        detail = str(body["detail"])
    elif isinstance(body, Mapping) and body:
        fields = dict(body)
        detail = _field_summary(fields)
    else:
        detail = str(body or response.reason_phrase)
    request_id = response.headers.get("X-Request-ID")
    if isinstance(body, Mapping) and isinstance(body.get("request_id"), str):
        request_id = body["request_id"]
    status = response.status_code
    kind = BY_STATUS.get(status, ServerError if status >= 500 else MemoryHubError)
    extra: dict[str, Any] = {}
    if kind is RateLimited:
        extra["retry_after"] = retry_after_seconds(response)
    elif kind is Unavailable:
        extra["retry_after"] = retry_after_seconds(response)
        extra["service"] = str(body.get("service", "")) if isinstance(body, Mapping) else ""
    return kind(status, detail, fields, request_id=request_id, call=call, **extra)
