"""A failure on the API is a JSON 500 naming the request's id, never Django's HTML page;
every response carries its id (X-Request-ID), and the log lines of the request name it."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from rest_framework.test import APIClient

from memories.api import memories as memory_views
from memories.providers import request_ids
from memories.providers.embeddings import EmbeddingError
from memoryhub.middleware import RequestLimitsMiddleware

MEMORIES = "/api/v1/memories/"
GENERATED = re.compile(r"[0-9a-f]{32}")


def client_of(tenant) -> APIClient:
    """A client that gets the server's answer to an exception instead of the exception."""
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant.raw_key}")
    return client


@contextmanager
def console_log() -> Iterator[io.StringIO]:
    """What the hub's console handler (settings.LOGGING) writes meanwhile."""
    [handler] = [
        handler
        for handler in logging.getLogger().handlers
        if isinstance(handler.formatter, request_ids.RequestIdFormatter)
    ]
    written = io.StringIO()
    stream = handler.setStream(written)  # type: ignore[attr-defined]
    try:
        yield written
    finally:
        handler.setStream(stream)  # type: ignore[attr-defined]


def boom(**kwargs: object) -> None:
    raise RuntimeError("boom")


def test_an_exception_in_an_api_view_is_a_json_500_whose_id_the_log_names(owner, monkeypatch):
    monkeypatch.setattr(memory_views, "memory_create_batch", boom)
    with console_log() as log:
        response = client_of(owner).post(MEMORIES, {"content": "hello"})

    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    request_id = response["X-Request-ID"]
    assert GENERATED.fullmatch(request_id)
    assert response.json() == {"detail": "Internal server error.", "request_id": request_id}
    lines = log.getvalue()
    assert f"ERROR django.request [{request_id}]: Internal Server Error: {MEMORIES}" in lines
    assert "RuntimeError: boom" in lines  # the traceback, for the operator
    assert lines.count("Internal Server Error") == 1


def test_the_test_client_still_sees_the_exception(owner, monkeypatch):
    """Django's got_request_exception is still sent: error trackers (and the test
    client, which raises it into the test) see the exception."""
    monkeypatch.setattr(memory_views, "memory_create_batch", boom)
    with pytest.raises(RuntimeError, match="boom"):
        owner.client.post(MEMORIES, {"content": "hello"})


def test_a_failing_middleware_is_a_json_500_on_the_api_and_a_page_elsewhere(owner, monkeypatch):
    def broken(self, request):
        raise RuntimeError("a middleware failed")

    monkeypatch.setattr(RequestLimitsMiddleware, "__call__", broken)
    with console_log() as log:
        api = client_of(owner).get(MEMORIES)
        page = APIClient(raise_request_exception=False).get("/login/")

    assert api.status_code == 500
    assert api.json() == {"detail": "Internal server error.", "request_id": api["X-Request-ID"]}
    assert f"[{api['X-Request-ID']}]: Internal Server Error: {MEMORIES}" in log.getvalue()
    assert page.status_code == 500
    assert page["Content-Type"].startswith("text/html")  # the console keeps its pages
    assert GENERATED.fullmatch(page["X-Request-ID"])


def test_an_error_the_api_answers_itself_names_the_request_too(owner, monkeypatch):
    def failing(**kwargs: object) -> None:
        raise EmbeddingError("the model refused", retryable=False)

    monkeypatch.setattr(memory_views, "memory_create_batch", failing)
    with console_log() as log:
        response = client_of(owner).post(MEMORIES, {"content": "hello"})
    assert response.status_code == 500
    request_id = response["X-Request-ID"]
    assert response.json() == {
        "detail": "Embedding failed: the model refused",
        "request_id": request_id,
    }
    assert f"ERROR django.request [{request_id}]: Internal Server Error: {MEMORIES}" in (
        log.getvalue()
    )


@pytest.mark.parametrize(
    ("incoming", "kept"),
    [
        ("0af7651916cd43dd8448eb211c80319c", True),  # nginx's $request_id
        ("Root=1-67891233-abcdef012345678912345678", True),  # AWS's trace id
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", True),  # traceparent
        ("two words", False),
        ("line\nbreak", False),
        ("x" * 129, False),
        ("", False),
    ],
)
def test_a_proxys_request_id_is_kept_when_it_looks_like_one(owner, incoming, kept):
    response = owner.client.get(MEMORIES, HTTP_X_REQUEST_ID=incoming)
    assert response.status_code == 200
    if kept:
        assert response["X-Request-ID"] == incoming
    else:
        assert GENERATED.fullmatch(response["X-Request-ID"])


def test_every_response_names_its_own_request(owner, anonymous):
    responses = [
        owner.client.get(MEMORIES),
        owner.client.get("/api/v1/no-such-thing/"),
        anonymous.get(MEMORIES),
        anonymous.get("/login/"),
        anonymous.get("/health/"),
    ]
    assert [r.status_code for r in responses] == [200, 404, 401, 200, 200]
    ids = [r["X-Request-ID"] for r in responses]
    assert all(GENERATED.fullmatch(i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_a_line_logged_outside_a_request_names_none():
    record = logging.LogRecord("memories.tasks", logging.INFO, __file__, 1, "embedded", (), None)
    line = request_ids.RequestIdFormatter().format(record)
    assert line.endswith("INFO memories.tasks: embedded")
