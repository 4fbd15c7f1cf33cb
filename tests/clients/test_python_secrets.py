"""The API key never shows: not in the client's repr, not in any log line (every logger
at DEBUG, httpx and httpcore included), not in an exception's message, repr or
traceback, whatever the call ended in."""

from __future__ import annotations

import logging
import socket
import traceback
import uuid

import httpx
import pytest
from memoryhub_client import MemoryHub, MemoryHubError
from memoryhub_client.xaibo import MemoryHubMemory

pytestmark = pytest.mark.django_db(transaction=True)


class Refusing(httpx.BaseTransport):
    """503 once, then the live hub: a retry is logged."""

    def __init__(self) -> None:
        self.inner, self.calls = httpx.HTTPTransport(), 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.calls == 1:
            return httpx.Response(503, headers={"Retry-After": "0"}, json={"detail": "busy"})
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def _failures(live_server, owner) -> list[MemoryHubError]:
    """Every way a call can fail, each caught."""
    errors: list[MemoryHubError] = []
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    attempts = [
        (live_server.url, owner.raw_key, lambda hub: hub.memories.add("", user="alice")),  # 400
        (live_server.url, owner.raw_read_key, lambda hub: hub.memories.add("x", user="a")),  # 403
        (live_server.url, "mh_wrong_" + owner.raw_key, lambda hub: hub.memories.count()),  # 401
        (live_server.url, owner.raw_key, lambda hub: hub.memories.get(str(uuid.uuid4()))),  # 404
        (closed, owner.raw_key, lambda hub: hub.memories.count()),  # refused
    ]
    for url, key, call in attempts:
        with MemoryHub(url, key, retries=1, backoff=0.01) as hub:
            try:
                call(hub)
            except MemoryHubError as error:
                errors.append(error)
    return errors


def test_the_key_is_in_no_repr_log_or_error(live_server, owner, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    secrets = [owner.raw_key, owner.raw_read_key]
    with MemoryHub(
        live_server.url, owner.raw_key, transport=Refusing(), retries=2, backoff=0.01, user="alice"
    ) as hub:
        hub.memories.add("I adopted a cat", room="chat-1")
        shown = [repr(hub), str(vars(hub)), repr(hub.memories), repr(hub._http.headers)]
        xaibo = MemoryHubMemory(hub=None, config={"url": live_server.url, "api_key": owner.raw_key})
        shown += [repr(xaibo), str(vars(xaibo)), repr(xaibo.hub)]
    errors = _failures(live_server, owner)
    assert len(errors) == 5
    for error in errors:
        shown += [str(error), repr(error), "".join(traceback.format_exception(error))]
    assert "retry 1 of 2" in caplog.text  # the retry was logged
    assert "HTTP Request" in caplog.text  # and httpx's own lines
    everything = "\n".join([*shown, caplog.text])
    for secret in secrets:
        assert secret not in everything
        assert secret[len("mh_12345678_") :] not in everything  # nor its part past the prefix
