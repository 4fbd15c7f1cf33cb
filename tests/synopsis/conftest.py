"""Fixtures of the synopsis tests: a scripted OpenAI-compatible endpoint on 127.0.0.1,
the settings that point the LLM provider at it, and the embedding stand-in."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from memories.services import embedding as pipeline
from memories.services import embedding_spaces
from tests.memories.conftest import CountingProvider
from tests.synopsis.llm_server import LlmServer


@pytest.fixture(scope="session")
def llm_server_session() -> Iterator[LlmServer]:
    """One endpoint for the whole session: its base_url stays the same, so a worker
    process started once (LLM_BASE_URL=server.base_url) can use it in every test."""
    server = LlmServer().start()
    yield server
    server.stop()


@pytest.fixture
def llm_server(llm_server_session: LlmServer) -> Iterator[LlmServer]:
    """The endpoint with an empty script and no requests recorded."""
    llm_server_session.reset()
    yield llm_server_session
    llm_server_session.reset()


@pytest.fixture
def llm_settings(settings: Any, llm_server: LlmServer) -> dict[str, Any]:
    """settings.LLM pointing at ``llm_server``, with a short timeout, two retries and
    a backoff of 10 ms."""
    settings.LLM = {
        "BASE_URL": llm_server.base_url,
        "API_KEY": "test-key",
        "MODEL": "stub-model",
        "TIMEOUT": 0.5,
        "MAX_RETRIES": 2,
        "BACKOFF": 0.01,
    }
    return settings.LLM


@pytest.fixture
def no_llm(settings: Any) -> None:
    """No LLM configured, whatever the environment says."""
    settings.LLM = {**settings.LLM, "BASE_URL": ""}


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> CountingProvider:
    """The embedding provider the summarizers use: the hashing stand-in, recording
    its calls (as tests/memories/conftest.py installs it for the pipeline)."""
    counting = CountingProvider(dimension=64)
    monkeypatch.setattr(embedding_spaces, "get_provider", lambda: counting)  # facts
    monkeypatch.setattr(pipeline, "get_provider", lambda: counting)  # the summaries
    return counting


@pytest.fixture
def clean_redis(redis_client: Any) -> Iterator[None]:
    """No cached synopsis, queued flag or queued task from another test."""
    for key in redis_client.scan_iter(match="memoryhub:synopsis*"):
        redis_client.delete(key)
    redis_client.delete("derived")
    yield
    redis_client.delete("derived")
