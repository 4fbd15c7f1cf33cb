"""The Python client against a real hub: pytest-django's ``live_server`` (the Django
app served over HTTP from a thread of this process, on the test session's embedded
PostgreSQL and Redis) and the ``owner`` project's raw keys. Tests that need vectors
also take ``celery_worker_process`` (a real worker embeds what they write).

Fixtures: ``hub`` (read-write key), ``read_hub`` (read-only key), ``hub_for(key, **)``
(another client on the live hub), and the plain ``run(coroutine)`` for the async client
(pytest-asyncio is not installed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from memoryhub_client import AsyncMemoryHub, MemoryHub

from tests.conftest import Tenant

T = TypeVar("T")

# short waits: a test that retries should not sleep for seconds
FAST = {"timeout": 30.0, "retries": 2, "backoff": 0.01}


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


@pytest.fixture
def hub_for(live_server: Any) -> Iterator[Callable[..., MemoryHub]]:
    """``hub_for(key, **options)``: a sync client of the live hub, closed after the test."""
    made: list[MemoryHub] = []

    def make(key: str, **options: Any) -> MemoryHub:
        client = MemoryHub(live_server.url, key, **{**FAST, **options})
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def hub(hub_for: Callable[..., MemoryHub], owner: Tenant) -> MemoryHub:
    return hub_for(owner.raw_key)


@pytest.fixture
def read_hub(hub_for: Callable[..., MemoryHub], owner: Tenant) -> MemoryHub:
    return hub_for(owner.raw_read_key)


@pytest.fixture
def async_hub_for(live_server: Any) -> Callable[..., AsyncMemoryHub]:
    """``async_hub_for(key, **options)``: an async client (made, used and closed inside
    one ``run(...)``: its connections belong to that event loop)."""

    def make(key: str, **options: Any) -> AsyncMemoryHub:
        return AsyncMemoryHub(live_server.url, key, **{**FAST, **options})

    return make
