"""The LLM provider: any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama,
llama.cpp server), configured by settings.LLM; optional (``llm_provider()`` is None
without LLM_BASE_URL and every feature uses its offline method). For a project whose
monthly token budget is spent (synopsis/services/llm_budget.py) it is None too.

A call retries what can pass (rate limits, 5xx, timeouts, connection errors) with
exponential backoff, and raises an LlmError saying whether a later retry can help.
Every call, answered or failed, is recorded as one LlmCall row (tokens, attempts,
duration, error): call it outside a transaction that the failure would roll back.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import requests
from django.conf import settings
from django.utils import timezone

from synopsis.models import LlmCall
from synopsis.services.llm_budget import BUDGET_SPENT, llm_budget_record, llm_budget_spent

logger = logging.getLogger(__name__)

# the longest wait a server's Retry-After header may impose between two attempts: a
# worker should not sleep for minutes (the task itself is retried later instead)
RETRY_AFTER_CAP = 30.0


class LlmError(Exception):
    """The endpoint did not give a usable answer. ``retryable``: a later call may
    succeed (the caller should retry later); ``kind`` names the failure: timeout,
    connection, rate_limited, server_error (retryable), refusal, malformed,
    bad_request, auth (permanent)."""

    def __init__(
        self, message: str, *, kind: str, retryable: bool, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable
        self.retry_after = retry_after  # seconds the server asked us to wait
        self.attempts = 1


@dataclass(frozen=True)
class ChatResult:
    text: str
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    attempts: int


class LlmProvider:
    """A chat client of one OpenAI-compatible endpoint and model."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str = "",
        model: str,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 1.0,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.backoff = backoff
        self.name = f"llm:{model}"

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        purpose: str,
        project_id: int | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.2,
    ) -> ChatResult:
        """The assistant's answer to ``messages``, after up to ``max_retries`` retries
        of transient failures; LlmError otherwise. Records one LlmCall either way."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
        }
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                result = self._attempt(payload, attempt)
            except LlmError as error:
                error.attempts = attempt
                if not error.retryable or attempt > self.max_retries:
                    self._record(purpose, project_id, started, attempt, error=error)
                    raise
                wait = self.backoff * 2 ** (attempt - 1)
                if error.retry_after is not None:
                    wait = min(max(error.retry_after, 0.0), RETRY_AFTER_CAP)
                logger.info("%s: %s, retrying in %.2f s", self.name, error, wait)
                time.sleep(wait)
                continue
            self._record(purpose, project_id, started, attempt, result=result)
            return result

    def _attempt(self, payload: dict[str, Any], attempt: int) -> ChatResult:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            response = requests.post(self.url, json=payload, headers=headers, timeout=self.timeout)
        except requests.Timeout as exc:
            raise LlmError(
                f"no answer within {self.timeout} s", kind="timeout", retryable=True
            ) from exc
        except requests.RequestException as exc:
            raise LlmError(
                f"endpoint unreachable: {exc}", kind="connection", retryable=True
            ) from exc
        _raise_for_status(response)
        return _result(response, requested_model=self.model, attempts=attempt)

    def _record(
        self,
        purpose: str,
        project_id: int | None,
        started: float,
        attempts: int,
        *,
        result: ChatResult | None = None,
        error: LlmError | None = None,
    ) -> None:
        call = LlmCall.objects.create(
            project_id=project_id,
            purpose=purpose,
            model=result.model if result is not None else self.model,
            status=LlmCall.Status.OK if error is None else LlmCall.Status.FAILED,
            error_kind=(
                ""
                if error is None
                else LlmCall.ErrorKind.RETRYABLE
                if error.retryable
                else LlmCall.ErrorKind.PERMANENT
            ),
            error=f"{error.kind}: {error}" if error is not None else "",
            attempts=attempts,
            prompt_tokens=result.prompt_tokens if result is not None else None,
            completion_tokens=result.completion_tokens if result is not None else None,
            duration_ms=round((time.monotonic() - started) * 1000),
        )
        tokens = (call.prompt_tokens or 0) + (call.completion_tokens or 0)
        llm_budget_record(project_id=project_id, tokens=tokens, at=call.created_at)


def _raise_for_status(response: requests.Response) -> None:
    code = response.status_code
    if code < 400:
        return
    detail = f"{code} {response.text[:300]}".strip()
    if code == 429:
        raise LlmError(
            f"rate limited: {detail}",
            kind="rate_limited",
            retryable=True,
            retry_after=_retry_after(response.headers.get("Retry-After")),
        )
    if code >= 500 or code == 408:
        raise LlmError(
            f"{'server error' if code >= 500 else 'request timeout'}: {detail}",
            kind="server_error" if code >= 500 else "timeout",
            retryable=True,
            retry_after=_retry_after(response.headers.get("Retry-After")),
        )
    if code in (401, 403):
        raise LlmError(f"not authorized: {detail}", kind="auth", retryable=False)
    raise LlmError(f"request refused: {detail}", kind="bad_request", retryable=False)


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (a number of seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return (parsedate_to_datetime(value) - timezone.now()).total_seconds()
    except (TypeError, ValueError):
        return None


def _result(response: requests.Response, *, requested_model: str, attempts: int) -> ChatResult:
    """The answer of a 2xx response, or a permanent LlmError (malformed, refusal)."""
    try:
        data = response.json()
        choice = data["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LlmError(
            f"malformed answer: {response.text[:300]!r}", kind="malformed", retryable=False
        ) from exc
    if not isinstance(message, dict):
        raise LlmError("malformed answer: no message", kind="malformed", retryable=False)
    if message.get("refusal"):
        raise LlmError(f"refused: {message['refusal']}", kind="refusal", retryable=False)
    if choice.get("finish_reason") == "content_filter":
        raise LlmError("refused: content filter", kind="refusal", retryable=False)
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        raise LlmError("refused: empty answer", kind="refusal", retryable=False)
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return ChatResult(
        text=content.strip(),
        model=str(data.get("model") or requested_model),
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        attempts=attempts,
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and value >= 0 else None


def llm_provider(*, project_id: int | None = None) -> LlmProvider | None:
    """The configured provider (settings.LLM), or None when LLM_BASE_URL is empty or
    the budget of ``project_id`` is spent this month."""
    return llm_choice(project_id=project_id)[0]


def llm_choice(*, project_id: int | None = None) -> tuple[LlmProvider | None, str]:
    """(the provider, "") or (None, why the offline method runs: "" when no LLM is
    configured, BUDGET_SPENT when the project's monthly token budget is spent)."""
    config = settings.LLM
    if not config.get("BASE_URL"):
        return None, ""
    if llm_budget_spent(project_id=project_id):
        logger.info("project %s: %s; the offline method runs", project_id, BUDGET_SPENT)
        return None, BUDGET_SPENT
    return LlmProvider(
        base_url=config["BASE_URL"],
        api_key=config.get("API_KEY", ""),
        model=config.get("MODEL", "gpt-4o-mini"),
        timeout=float(config.get("TIMEOUT", 30.0)),
        max_retries=int(config.get("MAX_RETRIES", 3)),
        backoff=float(config.get("BACKOFF", 1.0)),
    ), ""
