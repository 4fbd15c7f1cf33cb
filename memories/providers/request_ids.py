"""The id of the request being served: on its response (X-Request-ID), in every log line
written while it is served, in the body of a 500. An operator given the id by a client
finds the request's log lines, traceback included.

A proxy's id is kept when it looks like one (a proxy in front that already tags its
access log with it); anything else is replaced by a new one, so a client cannot write
spaces, newlines or a megabyte into the log through the header. Set by the web's
middleware (memoryhub/middleware.py); imported by the logging configuration, before
Django's apps are ready: nothing here imports a model.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar

HEADER = "X-Request-ID"
META_KEY = "HTTP_X_REQUEST_ID"
# letters, digits and the punctuation proxies' ids use (nginx: 32 hex digits; AWS:
# "Root=1-5f84c7a9-..."; W3C traceparent: "00-<trace>-<span>-01")
SANE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:;=+/-]{0,127}")

current: ContextVar[str | None] = ContextVar("request_id", default=None)


def request_id_choose(incoming: str | None) -> str:
    """The incoming id if it is sane, else a new one (32 hex digits)."""
    if incoming and SANE.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


class RequestIdFormatter(logging.Formatter):
    """The hub's log lines: ``<time> <level> <logger>: <message>``, the logger followed by
    `` [<request id>]`` while a request is served."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(request_tag)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        request_id = current.get()
        record.request_tag = f" [{request_id}]" if request_id else ""
        return super().format(record)
