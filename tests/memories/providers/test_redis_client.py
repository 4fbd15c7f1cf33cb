"""The process's Redis client (memories/providers/redis_client.py): after a command fails to reach
Redis it refuses at once for PAUSE_SECONDS, so a request that touches Redis several
times (a context) waits on a Redis that hangs once per pause, not at every touch.

Redis is a real TCP listener that counts the connections it gets (tests/memories/
providers/test_task_sending.py): closing each at once, or never answering."""

from __future__ import annotations

import pytest
import redis

from memories.providers import redis_client as client_module
from memories.providers.redis_client import RedisPaused, redis_client, redis_paused
from memories.services.access import accesses_sent
from tests.memories.providers.test_task_sending import Listener


@pytest.fixture
def gone(settings):
    listener = Listener()
    settings.REDIS_URL = f"redis://127.0.0.1:{listener.port}/0"
    yield listener
    listener.close()


def test_a_command_that_fails_pauses_every_command_and_pipeline(gone):
    with pytest.raises(redis.ConnectionError):
        redis_client().get("x")
    tried = gone.accepted
    assert tried >= 1 and redis_paused()

    with pytest.raises(RedisPaused):
        redis_client().set("x", "1")
    pipe = redis_client().pipeline(transaction=False)
    pipe.hincrby("totals", "contexts", 1)
    with pytest.raises(RedisPaused):
        pipe.execute()
    assert gone.accepted == tried  # not asked

    client_module._paused_until = 0.0  # the pause over
    with pytest.raises(redis.ConnectionError):
        redis_client().get("x")
    assert gone.accepted > tried  # asked again


@pytest.mark.django_db(transaction=True)
def test_contexts_with_redis_hanging_reach_it_once(owner, settings):
    """Before the pause each of a context's Redis touches (history count, synopsis cache,
    totals) waited the 1 s socket timeout: 4-5 s per context."""
    reply = owner.client.post(
        "/api/v1/memories/", {"user": "ann", "role": "user", "content": "I paint birds"},
        format="json",
    )  # fmt: skip
    assert reply.status_code == 201
    listener = Listener(silent=True)
    settings.REDIS_URL = f"redis://127.0.0.1:{listener.port}/0"
    try:
        for _ in range(3):
            reply = owner.client.post(
                "/api/v1/context/", {"user": "ann", "query": "what do I paint?"}, format="json"
            )
            assert reply.status_code == 200, reply.content
            assert "birds" in reply.content.decode()
            # the counting of the context's reads fails on its own thread: let it fail
            # before the next context, as it would on a hub whose reads are not this close
            accesses_sent(timeout=10)
    finally:
        listener.close()
    # once by the requests' client, which then paused; once by the access counter's own
    # client, on its thread (memories/services/access.py, which pauses on its own)
    assert listener.accepted <= 2 and redis_paused()
