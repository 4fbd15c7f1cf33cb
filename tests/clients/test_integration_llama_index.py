"""LlamaIndex's ``Memory`` with ``MemoryHubMemoryBlock`` over a live hub, through the
interface an agent uses: ``Memory.from_defaults(memory_blocks=[...])``, ``put_messages``
/ ``aput_messages`` (a tiny chat-history share so the turns flush to the hub at once)
and ``get`` / ``aget`` (the hub's context in the system message). Vectors come from the
hub's real embedding code (``embed_pending``, as a worker would run it). LlamaIndex's
tokenizer is its own offline copy of cl100k_base: nothing is downloaded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.memory import Memory
from llama_index.core.storage.chat_store.sql import MessageStatus
from memoryhub_client import AsyncMemoryHub, BadRequest, MemoryHub, PermissionDenied
from memoryhub_client.integrations.llama_index import MemoryHubMemoryBlock
from pydantic import ValidationError

from tests.clients.conftest import run
from tests.conftest import Tenant, embed_pending

pytestmark = pytest.mark.django_db(transaction=True)

CONVERSATION = [
    ChatMessage(role="user", content="My sister Ana moved to Lisbon last spring."),
    ChatMessage(role="assistant", content="Lisbon is lovely in spring!"),
    ChatMessage(role="user", content="I also started learning the cello."),
    ChatMessage(role="assistant", content="Good luck with the cello."),
    ChatMessage(role="user", content="Thanks, talk soon."),
]


def memory_with(block: MemoryHubMemoryBlock, session_id: str, **options: Any) -> Memory:
    """A Memory whose chat history keeps ~20 tokens: older messages flush to the hub."""
    settings: dict[str, Any] = {
        "token_limit": 4000,
        "chat_history_token_ratio": 0.005,
        "token_flush_size": 10,
        **options,
    }
    return Memory.from_defaults(session_id=session_id, memory_blocks=[block], **settings)


def system_text(messages: list[ChatMessage]) -> str:
    """What the Memory put in the system message (the memory blocks' section)."""
    return "\n".join(m.content or "" for m in messages if m.role == "system")


def room_turns(hub: MemoryHub, room: str) -> list[tuple[str, str]]:
    page = hub.memories.page(room=room, kind="message", order="asc", limit=50)
    return [(memory.role, memory.content) for memory in page.results]


def with_facts(hub: MemoryHub, count: int) -> MemoryHub:
    """``hub`` after giving its default user ``count`` facts (a long facts section)."""
    text = "User fact number {0}: likes colour {0}."
    hub.memories.add_batch([{"content": text.format(i), "kind": "fact"} for i in range(count)])
    return hub


def test_flushed_turns_and_facts_come_back(
    live_server: Any, owner: Tenant, hub_for: Callable[..., MemoryHub]
) -> None:
    hub = hub_for(owner.raw_key, user="alice")
    hub.memories.add("User's sister Ana is a nurse.", kind="fact")
    memory = memory_with(MemoryHubMemoryBlock(hub=hub, max_tokens=1000), "chat-1")
    memory.put_messages(CONVERSATION)

    # LlamaIndex flushes the oldest whole turns; exactly those are the room's, in order
    active = memory.get_all(status=MessageStatus.ACTIVE)
    flushed = CONVERSATION[: len(CONVERSATION) - len(active)]
    assert "Lisbon" in (flushed[0].content or "") and "Lisbon" not in str(active)
    assert room_turns(hub, "chat-1") == [(m.role.value, m.content) for m in flushed]
    [turn] = hub.memories.page(room="chat-1", limit=1).results
    assert turn.metadata == {"llama_index_session": "chat-1"}

    embed_pending()
    messages = memory.get(input="Where does my sister live now?")
    remembered = system_text(messages)
    assert remembered.startswith("<memory>") and "<memoryhub>" in remembered
    assert "Lisbon" in remembered and "is a nurse" in remembered
    assert messages[1:] == active  # the short-term history follows the system message


def test_the_budget_is_per_call(
    live_server: Any, owner: Tenant, hub_for: Callable[..., MemoryHub]
) -> None:
    hub = with_facts(hub_for(owner.raw_key, user="alice"), 40)
    block = MemoryHubMemoryBlock(hub=hub, room="notes")
    memory = memory_with(block, "chat-1")
    memory.put_messages(CONVERSATION)
    tokenizer = memory.tokenizer_fn

    large = system_text(memory.get(max_tokens=2000))
    small = system_text(memory.get(max_tokens=150))
    assert len(tokenizer(small)) < len(tokenizer(large))
    assert len(tokenizer(small)) <= 150 + 20  # the hub's budget plus the <memory> tags


def test_an_over_full_memory_asks_the_hub_for_less(
    live_server: Any, owner: Tenant, hub_for: Callable[..., MemoryHub]
) -> None:
    """Past ``token_limit`` the Memory truncates the block: the hub re-fits its sections."""
    hub = with_facts(hub_for(owner.raw_key, user="alice"), 60)
    block = MemoryHubMemoryBlock(hub=hub, max_tokens=1500)
    roomy = memory_with(block, "chat-1", token_limit=4000)
    tight = memory_with(block, "chat-1", token_limit=160)
    full = system_text(roomy.get(input="colours"))
    trimmed = system_text(tight.get(input="colours"))
    assert "User fact number" in trimmed  # fewer facts, not none
    tokens = roomy.tokenizer_fn
    assert len(tokens(trimmed)) <= 160 + 20 < len(tokens(full))  # 20: the <memory> tags
    tiny = memory_with(block, "chat-1", token_limit=50)  # under the hub's minimum budget
    assert system_text(tiny.get(input="colours")) == ""


def test_another_user_room_or_project_sees_nothing(
    live_server: Any, owner: Tenant, outsider: Tenant, hub_for: Callable[..., MemoryHub]
) -> None:
    alice = hub_for(owner.raw_key, user="alice")
    alice.memories.add("User's sister Ana is a nurse.", kind="fact")
    memory_with(MemoryHubMemoryBlock(hub=alice), "chat-1").put_messages(CONVERSATION)
    embed_pending()

    bob = hub_for(owner.raw_key, user="bob")
    bob.memories.add("User plays chess.", kind="fact")
    question = "Where does my sister live?"
    for other, session in (
        (MemoryHubMemoryBlock(hub=bob), "chat-9"),  # another user and room
        (MemoryHubMemoryBlock(hub=hub_for(outsider.raw_key, user="alice")), "chat-1"),
    ):
        seen = system_text(memory_with(other, session).get(input=question))
        assert "Lisbon" not in seen and "nurse" not in seen
    # the same room with another user: the room's recent turns (a room is shared by
    # its participants), never alice's own facts
    shared = system_text(memory_with(MemoryHubMemoryBlock(hub=bob), "chat-1").get(input=question))
    assert "chess" in shared and "Lisbon" in shared and "nurse" not in shared
    assert room_turns(hub_for(outsider.raw_key), "chat-1") == []
    # a new room of a known user (the hub's 404 for the room): her own memories, found
    # by meaning, without a conversation history
    fresh = memory_with(MemoryHubMemoryBlock(hub=alice), "chat-2")
    seen = system_text(fresh.get(input="Where does my sister live?"))
    assert "Lisbon" in seen and "conversation so far" not in seen


def test_a_read_only_key_cannot_write(
    live_server: Any, owner: Tenant, hub_for: Callable[..., MemoryHub]
) -> None:
    memory = memory_with(MemoryHubMemoryBlock(hub=hub_for(owner.raw_read_key, user="alice")), "c")
    with pytest.raises(PermissionDenied) as refused:
        memory.put_messages(CONVERSATION)
    assert refused.value.status == 403
    assert memory.get(input="sister") == memory.get_all(status=MessageStatus.ACTIVE)  # reads ok


def test_bad_input(live_server: Any, owner: Tenant, hub_for: Callable[..., MemoryHub]) -> None:
    hub = hub_for(owner.raw_key, user="alice")
    with pytest.raises(ValidationError, match="max_tokens"):
        MemoryHubMemoryBlock(hub=hub, max_tokens=5)
    with pytest.raises(ValueError, match="room"):  # outside a Memory: no session id
        run(MemoryHubMemoryBlock(hub=hub).aput(CONVERSATION[:1]))
    hub.memories.add("User's sister Ana is a nurse.", kind="fact")
    bad = memory_with(MemoryHubMemoryBlock(hub=hub, budgets={"facts": -1.0}), "chat-1")
    with pytest.raises(BadRequest):
        bad.get(input="food")
    # a tool call without text is kept as name(arguments); an empty message is skipped
    call = ChatMessage(
        role="assistant",
        blocks=[ToolCallBlock(tool_name="weather", tool_kwargs={"city": "Lisbon"})],
    )
    run(MemoryHubMemoryBlock(hub=hub, room="tools").aput([call, ChatMessage(role="user")]))
    assert room_turns(hub, "tools") == [("assistant", "weather({'city': 'Lisbon'})")]


def embed_in_thread() -> None:
    """``embed_pending`` from a worker thread, closing that thread's connection (the
    test database is dropped at the end of the session)."""
    try:
        embed_pending()
    finally:
        connection.close()


def test_async_memory_with_the_async_client(live_server: Any, owner: Tenant) -> None:
    async def scenario() -> tuple[str, str]:
        async with AsyncMemoryHub(live_server.url, owner.raw_key, user="carol") as hub:
            await hub.memories.add("User is vegetarian.", kind="fact")
            block = MemoryHubMemoryBlock(hub=hub, max_tokens=800)
            memory = memory_with(block, "async-room")
            for message in CONVERSATION:
                await memory.aput(message)
            before = system_text(await memory.aget(input="What should I cook?"))
            await asyncio.to_thread(embed_in_thread)  # the ORM is not for an event loop
            after = system_text(await memory.aget(input="Where did my sister move?"))
            return before, after

    before, after = run(scenario())
    assert "vegetarian" in before
    assert "Lisbon" in after
