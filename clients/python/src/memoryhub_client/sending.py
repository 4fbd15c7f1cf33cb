"""Sending a call: the request, the retry rules and reading the answer, shared by the
sync and async clients (whose loops only send and sleep).

Retries, at most ``retries`` after the first attempt, with exponential backoff and
jitter:

* 429 and 503 (the hub refused before doing anything), after ``Retry-After``; a wait
  longer than ``max_wait`` is not waited: the error is raised at once, with it;
* connection refused or not established in time (nothing reached the hub);
* 502, 504, a timeout or a connection lost after the request went out: every call is
  safe to send again (reads, updates, deletes; every POST carries one
  ``Idempotency-Key`` for all its attempts and the hub replays its first answer for it;
  a document upload is de-duplicated by its bytes).
"""

from __future__ import annotations

import logging
import random
import uuid
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from memoryhub_client.endpoints.base import API_PREFIX, Call
from memoryhub_client.errors import (
    ConnectionFailed,
    MemoryHubError,
    Timeout,
    error_from_response,
    retry_after_seconds,
)

__all__ = ["Attempts", "RetryPolicy", "USER_AGENT", "request_build"]

logger = logging.getLogger("memoryhub_client")

USER_AGENT = "memoryhub-client/0.1 (python)"
# answers that say the hub did nothing: safe to send again whatever the call
REFUSED = frozenset({429, 503})
# a proxy's answers: the hub may or may not have done it
GATEWAY = frozenset({502, 504})
# the request never reached the hub
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait: attempt n (0-based) waits ``backoff x 2**n``
    (at most ``max_wait``), jittered to 50-100%, or the hub's ``Retry-After``."""

    retries: int = 3
    backoff: float = 0.5
    max_wait: float = 30.0

    def __post_init__(self) -> None:
        if self.retries < 0 or self.backoff < 0 or self.max_wait < 0:
            raise ValueError("retries, backoff and max_wait must be >= 0")

    def pause(self, attempt: int, retry_after: float | None) -> float:
        exponential = min(self.max_wait, self.backoff * 2.0**attempt)
        jittered = exponential * (0.5 + random.random() / 2)
        if retry_after is None:
            return jittered
        # the hub's wait, plus a little so that many clients do not come back at once
        return retry_after + jittered / 10


def request_build(
    http: httpx.Client | httpx.AsyncClient, call: Call[Any], idempotency_key: str
) -> httpx.Request:
    """The HTTP request of one attempt (a fresh one each time: a multipart body is a
    stream). Every POST carries the call's one ``Idempotency-Key``."""
    headers = {"Idempotency-Key": idempotency_key} if call.method == "POST" else None
    return http.build_request(
        call.method,
        API_PREFIX + call.path,
        params=list(call.params) or None,
        json=call.json if call.json is not None and call.files is None else None,
        files=call.files,
        data=call.data,
        headers=headers,
    )


class Attempts(Generic[T]):
    """The attempts of one logical call: after each, either the wait before the next
    (``next_wait``) or the answer (``result``), or the error raised."""

    def __init__(self, call: Call[T], policy: RetryPolicy) -> None:
        self.call = call
        self.policy = policy
        self.idempotency_key = str(uuid.uuid4())
        self.number = 0
        self.maybe_done = False  # an earlier attempt may have reached the hub

    def next_wait(
        self, response: httpx.Response | None, error: httpx.TransportError | None
    ) -> float | None:
        """Seconds to wait before sending again, or None when ``response`` is final.
        Raises ConnectionFailed/Timeout when a transport error ends the call."""
        if error is not None:
            reached = not isinstance(error, NOT_SENT)
            if self.number >= self.policy.retries:
                raise self._transport_failure(error)
            self.maybe_done |= reached
            return self._again(type(error).__name__, None)
        assert response is not None
        status = response.status_code
        retryable = status in REFUSED or status in GATEWAY
        if not retryable or self.number >= self.policy.retries:
            return None
        retry_after = retry_after_seconds(response)
        if retry_after is not None and retry_after > self.policy.max_wait:
            return None  # not worth waiting here: the caller gets the error and its retry_after
        self.maybe_done |= status in GATEWAY
        return self._again(f"answered {status}", retry_after)

    def _again(self, reason: str, retry_after: float | None) -> float:
        wait = self.policy.pause(self.number, retry_after)
        self.number += 1
        logger.info(
            "%s %s; retry %d of %d in %.2f s",
            self.call.name,
            reason,
            self.number,
            self.policy.retries,
            wait,
        )
        return wait

    def _transport_failure(self, error: httpx.TransportError) -> ConnectionFailed:
        attempts = self.number + 1
        what = f"no answer after {attempts} attempt{'s' * (attempts > 1)}"
        detail = f"{what}: {type(error).__name__}: {error}".rstrip(": ")
        kind = Timeout if isinstance(error, httpx.TimeoutException) else ConnectionFailed
        return kind(detail, call=self.call.name)

    def result(self, response: httpx.Response) -> T:
        """The call's answer read from a final response; raises its error otherwise."""
        status = response.status_code
        if status == 404 and self.call.gone_ok and self.maybe_done:
            return self.call.parse(None)  # an earlier attempt deleted it
        if not 200 <= status < 300:
            raise error_from_response(response, call=self.call.name)
        try:
            data = response.json() if response.content else None
            return self.call.parse(data)
        except (ValueError, KeyError, TypeError) as error:
            raise MemoryHubError(
                status, f"unexpected answer: {error}", call=self.call.name
            ) from None
