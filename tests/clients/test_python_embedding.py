"""The client's ``hub.embedding`` against a live hub: the model in use and the choices,
a switch started, followed, refused and cancelled, typed; the async client the same.
The switch's job is recorded, not run (tests/memories/services/test_embedding_switch.py
runs it)."""

from __future__ import annotations

import pytest
from memoryhub_client import (
    BadRequest,
    EmbeddingState,
    EmbeddingSwitch,
    MemoryHub,
    PermissionDenied,
)

from memories.services import embedding_switch as switching
from tests.clients.conftest import run
from tests.memories.services.test_embedding_switch import endpoint, endpoint_server

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["endpoint", "endpoint_server"]  # fixtures, used by name


@pytest.fixture(autouse=True)
def jobs(monkeypatch):
    sent = []
    monkeypatch.setattr(switching, "_job_send", lambda pk, countdown=None: sent.append(pk))
    return sent


def test_a_switch_through_the_client(hub: MemoryHub, read_hub: MemoryHub, endpoint, jobs) -> None:
    state = hub.embedding.get()
    assert isinstance(state, EmbeddingState)
    assert (state.model, state.dimension, state.switch) == ("minilm-l6", 384, None)
    assert [choice.key for choice in state.models] == ["minilm-l6", "mpnet-base", "openai"]

    switch = hub.embedding.switch("openai")
    assert isinstance(switch, EmbeddingSwitch) and jobs == [switch.id]
    assert (switch.status, switch.from_model, switch.to_model, switch.settled) == (
        "running", "minilm-l6", "openai", False,
    )  # fmt: skip
    followed = hub.embedding.get().switch
    assert followed is not None and followed.id == switch.id

    with pytest.raises(BadRequest, match="is running"):
        hub.embedding.switch("openai")
    with pytest.raises(PermissionDenied):
        read_hub.embedding.switch("mpnet-base")

    cancelled = hub.embedding.cancel()
    assert cancelled.status == "cancelled" and cancelled.settled


def test_the_async_client_has_the_same_group(async_hub_for, owner, endpoint) -> None:
    async def walk() -> tuple[str, str]:
        async with async_hub_for(owner.raw_key) as hub:
            state = await hub.embedding.get()
            switch = await hub.embedding.switch("openai")
            return state.model, switch.to_model

    assert run(walk()) == ("minilm-l6", "openai")
