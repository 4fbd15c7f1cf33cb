"""The LLM provider (synopsis/llm.py) against a scripted OpenAI-compatible endpoint:
answers, retries of what can pass, clear permanent failures, one LlmCall per call."""

from __future__ import annotations

import socket
import time

import pytest

from synopsis import llm
from synopsis.llm import LlmError, LlmProvider, llm_provider
from synopsis.models import LlmCall

MESSAGES = [{"role": "user", "content": "Summarize: Maria moved to Lisbon."}]


def provider_for(server, **options) -> LlmProvider:
    defaults = {"model": "stub-model", "timeout": 0.5, "max_retries": 2, "backoff": 0.01}
    return LlmProvider(base_url=server.base_url, **{**defaults, **options})


def test_an_answer_with_its_usage_recorded(owner, llm_server, llm_settings):
    llm_server.ok("Maria moved to Lisbon.", prompt_tokens=41, completion_tokens=6)
    provider = llm_provider()
    assert provider is not None and provider.name == "llm:stub-model"

    result = provider.chat(MESSAGES, purpose="summary", project_id=owner.project.pk, max_tokens=50)

    assert (result.text, result.model, result.attempts) == (
        "Maria moved to Lisbon.",
        "stub-model",
        1,
    )
    assert (result.prompt_tokens, result.completion_tokens) == (41, 6)
    [request] = llm_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == "Bearer test-key"
    assert request.body["model"] == "stub-model"
    assert request.body["messages"] == MESSAGES
    assert request.body["max_tokens"] == 50
    call = LlmCall.objects.get()
    assert (call.project, call.purpose, call.model) == (owner.project, "summary", "stub-model")
    assert (call.status, call.error_kind, call.error, call.attempts) == ("ok", "", "", 1)
    assert (call.prompt_tokens, call.completion_tokens) == (41, 6)
    assert call.duration_ms >= 0


def test_no_key_no_authorization_header(db, llm_server):
    llm_server.ok("fine", prompt_tokens=None, completion_tokens=None)
    result = provider_for(llm_server).chat(MESSAGES, purpose="summary")
    assert "Authorization" not in llm_server.requests[0].headers
    assert (result.prompt_tokens, result.completion_tokens) == (None, None)
    call = LlmCall.objects.get()
    assert (call.project, call.prompt_tokens, call.completion_tokens) == (None, None, None)


def test_a_rate_limit_then_an_answer(db, llm_server):
    llm_server.status(429).ok("after a wait")
    result = provider_for(llm_server).chat(MESSAGES, purpose="summary")
    assert (result.text, result.attempts) == ("after a wait", 2)
    assert len(llm_server.requests) == 2
    call = LlmCall.objects.get()  # one row for the call, not one per attempt
    assert (call.status, call.attempts) == ("ok", 2)


def test_retries_back_off_exponentially(db, llm_server):
    llm_server.status(503).status(502).ok("third time")
    clock = time.monotonic()
    result = provider_for(llm_server, backoff=0.2).chat(MESSAGES, purpose="summary")
    assert result.attempts == 3
    assert time.monotonic() - clock >= 0.2 + 0.4


def test_retry_after_is_honoured_up_to_a_cap(db, llm_server, monkeypatch):
    monkeypatch.setattr(llm, "RETRY_AFTER_CAP", 0.3)
    llm_server.status(429, retry_after=120).ok("done")
    clock = time.monotonic()
    result = provider_for(llm_server, backoff=0.01).chat(MESSAGES, purpose="summary")
    elapsed = time.monotonic() - clock
    assert result.attempts == 2
    assert 0.3 <= elapsed < 5  # the server's 0.01 s backoff gave way to Retry-After, capped


def test_server_errors_past_the_retries_are_retryable(owner, llm_server):
    for _ in range(3):
        llm_server.status(500)
    with pytest.raises(LlmError) as raised:
        provider_for(llm_server).chat(MESSAGES, purpose="summary", project_id=owner.project.pk)
    assert (raised.value.retryable, raised.value.kind, raised.value.attempts) == (
        True,
        "server_error",
        3,
    )
    assert len(llm_server.requests) == 3
    call = LlmCall.objects.get()
    assert (call.status, call.error_kind, call.attempts) == ("failed", "retryable", 3)
    assert call.error.startswith("server_error: ") and "500" in call.error


def test_a_timeout_is_retried_then_raised_as_retryable(owner, llm_server):
    for _ in range(3):
        llm_server.delay(3, "too late")
    clock = time.monotonic()
    with pytest.raises(LlmError) as raised:
        provider_for(llm_server, timeout=0.3).chat(
            MESSAGES, purpose="summary", project_id=owner.project.pk
        )
    assert (raised.value.retryable, raised.value.kind, raised.value.attempts) == (
        True,
        "timeout",
        3,
    )
    assert time.monotonic() - clock < 2.5  # did not wait for the answers
    call = LlmCall.objects.get()
    assert (call.status, call.error_kind, call.attempts) == ("failed", "retryable", 3)
    assert call.error.startswith("timeout: ")
    assert call.duration_ms >= 900


def test_a_slow_answer_within_the_timeout_is_fine(db, llm_server):
    llm_server.delay(0.1, "slow but fine")
    assert provider_for(llm_server).chat(MESSAGES, purpose="summary").text == "slow but fine"


def test_an_unreachable_endpoint_is_retryable(db):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = LlmProvider(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=1, backoff=0.01
    )
    with pytest.raises(LlmError) as raised:
        provider.chat(MESSAGES, purpose="summary")
    assert (raised.value.retryable, raised.value.kind, raised.value.attempts) == (
        True,
        "connection",
        2,
    )
    assert LlmCall.objects.get().error_kind == "retryable"


def test_malformed_json_is_permanent(owner, llm_server):
    llm_server.malformed().ok("never asked")
    with pytest.raises(LlmError) as raised:
        provider_for(llm_server).chat(MESSAGES, purpose="summary", project_id=owner.project.pk)
    assert (raised.value.retryable, raised.value.kind, raised.value.attempts) == (
        False,
        "malformed",
        1,
    )
    assert len(llm_server.requests) == 1
    call = LlmCall.objects.get()
    assert (call.status, call.error_kind, call.attempts) == ("failed", "permanent", 1)
    assert call.error.startswith("malformed: ")


def test_a_refusal_is_permanent(db, llm_server):
    llm_server.refusal("I can't summarize that.")
    with pytest.raises(LlmError, match="I can't summarize that") as raised:
        provider_for(llm_server).chat(MESSAGES, purpose="summary")
    assert (raised.value.retryable, raised.value.kind) == (False, "refusal")
    assert len(llm_server.requests) == 1
    assert LlmCall.objects.get().error_kind == "permanent"


def test_an_empty_answer_is_a_refusal(db, llm_server):
    llm_server.ok("   ")
    with pytest.raises(LlmError) as raised:
        provider_for(llm_server).chat(MESSAGES, purpose="summary")
    assert (raised.value.retryable, raised.value.kind) == (False, "refusal")


@pytest.mark.parametrize(
    ("code", "kind"), [(400, "bad_request"), (404, "bad_request"), (401, "auth")]
)
def test_other_client_errors_are_permanent(db, llm_server, code, kind):
    llm_server.status(code).ok("never asked")
    with pytest.raises(LlmError) as raised:
        provider_for(llm_server).chat(MESSAGES, purpose="summary")
    assert (raised.value.retryable, raised.value.kind, raised.value.attempts) == (False, kind, 1)
    assert len(llm_server.requests) == 1


def test_no_provider_without_a_base_url(no_llm):
    assert llm_provider() is None


def test_the_provider_follows_the_settings(settings):
    settings.LLM = {
        "BASE_URL": "http://llm.internal:8000/v1/",
        "API_KEY": "k",
        "MODEL": "qwen2.5",
        "TIMEOUT": 12,
        "MAX_RETRIES": 5,
        "BACKOFF": 0.5,
    }
    provider = llm_provider()
    assert provider is not None
    assert provider.url == "http://llm.internal:8000/v1/chat/completions"
    assert (provider.name, provider.api_key, provider.timeout) == ("llm:qwen2.5", "k", 12.0)
    assert (provider.max_retries, provider.backoff) == (5, 0.5)
