"""The OpenAI Agents SDK ``Session`` over a live hub, through the Session interface the
SDK's runner calls (and once through ``Runner.run`` itself, with a fixed model standing
in for the LLM: the hub is real)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.memory import Session
from agents.models.interface import Model
from agents.usage import Usage
from memoryhub_client import AsyncMemoryHub, BadRequest, MemoryHub, PermissionDenied
from memoryhub_client.integrations.openai_agents import MemoryHubSession
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from tests.clients.conftest import FAST, run

pytestmark = pytest.mark.django_db(transaction=True)

LONG = "x" * 20_000  # past the hub's 16 KB metadata cap: the item goes in the content

# one item of each shape the runner writes (TResponseInputItem)
SHAPES: list[Any] = [
    {"role": "user", "content": "I adopted a cat called Miso"},
    {"role": "developer", "content": "Be brief."},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Lovely name!", "annotations": []}],
    },
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is in this picture?"},
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
        ],
    },
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city": "Lisbon"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 24 °C \x00 ok"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Think"}]},
    {"type": "reasoning", "id": "rs_2", "summary": []},
    {"type": "function_call_output", "call_id": "call_2", "output": LONG},
    {"type": "item_reference", "id": "msg_0"},
]


async def _hub(live_server: Any, key: str, **options: Any) -> AsyncMemoryHub:
    return AsyncMemoryHub(live_server.url, key, **{**FAST, **options})


def test_add_get_limit_pop_clear_as_sqlite_session(live_server, owner, hub) -> None:
    turns: list[Any] = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}"} for n in range(5)
    ]

    async def use() -> dict[str, Any]:
        async with await _hub(live_server, owner.raw_key) as client:
            session = MemoryHubSession("chat-1", client, user="alice")
            seen: dict[str, Any] = {"protocol": isinstance(session, Session)}
            seen["empty"] = (await session.get_items(), await session.pop_item())
            await session.add_items(turns[:3])
            await session.add_items([])
            await session.add_items(turns[3:])
            seen["all"] = await session.get_items()
            seen["last2"] = await session.get_items(limit=2)
            seen["zero"], seen["negative"] = await session.get_items(0), await session.get_items(-1)
            seen["more"] = await session.get_items(limit=50)
            limited = MemoryHubSession(
                "chat-1", client, user="alice", session_settings={"limit": 3}
            )
            seen["settings"] = (await limited.get_items(), await limited.get_items(limit=1))
            seen["popped"] = (await session.pop_item(), await session.pop_item())
            seen["after_pop"] = await session.get_items()
            await session.clear_session()
            seen["cleared"] = (await session.get_items(), await session.pop_item())
            await session.clear_session()  # nothing left: no error
            return seen

    seen = run(use())
    assert seen["protocol"] and seen["empty"] == ([], None)
    assert seen["all"] == turns and seen["last2"] == turns[3:]
    assert seen["zero"] == [] and seen["negative"] == turns and seen["more"] == turns
    assert seen["settings"] == (turns[2:], turns[4:])
    assert seen["popped"] == (turns[4], turns[3]) and seen["after_pop"] == turns[:3]
    assert seen["cleared"] == ([], None)
    assert hub.rooms.get("chat-1").external_id == "chat-1"  # the room stays


def test_items_of_every_shape_round_trip(live_server, owner, hub) -> None:
    async def use() -> list[Any]:
        async with await _hub(live_server, owner.raw_key) as client:
            session = MemoryHubSession("shapes", client)
            await session.add_items(SHAPES)
            return await session.get_items()

    assert run(use()) == SHAPES
    stored = list(hub.memories.list(room="shapes", order="asc"))
    assert [m.role for m in stored] == [
        *("user", "system", "assistant", "user", "assistant", "tool", "", "", "tool", "")
    ]
    assert [m.content for m in stored[:8]] == [
        "I adopted a cat called Miso",
        "Be brief.",
        "Lovely name!",
        "What is in this picture?\n[input_image]",
        'weather({"city": "Lisbon"})',
        "Sunny, 24 °C  ok",
        "Think",
        "[reasoning]",
    ]
    assert json.loads(stored[8].content) == SHAPES[8]  # too large for the metadata
    assert json.loads(stored[9].content) == SHAPES[9]  # no text of its own: its JSON
    assert all(m.kind == "message" and m.user is None for m in stored)


def test_order_holds_within_one_call_across_batches(live_server, owner) -> None:
    # two batch requests
    items: list[Any] = [{"role": "user", "content": f"n{n}"} for n in range(620)]

    async def use() -> tuple[list[Any], list[Any]]:
        async with await _hub(live_server, owner.raw_key) as client:
            session = MemoryHubSession("long", client)
            await session.add_items(items)
            return await session.get_items(), await session.get_items(limit=510)

    everything, latest = run(use())
    assert everything == items and latest == items[-510:]


def test_sessions_and_other_memories_are_isolated(live_server, owner, outsider, hub) -> None:
    hub.memories.add("a turn another writer appended", room="chat-a", role="user")
    hub.memories.add("Alice has a cat", room="chat-a", kind="fact", user="alice")

    async def use() -> dict[str, Any]:
        async with (
            await _hub(live_server, owner.raw_key) as client,
            await _hub(live_server, outsider.raw_key) as other_project,
        ):
            a = MemoryHubSession("chat-a", client, user="alice")
            b = MemoryHubSession("chat-b", client, user="alice")
            bob = MemoryHubSession("chat-a", client, user="bob")
            stranger = MemoryHubSession("chat-a", other_project, user="alice")
            await a.add_items([{"role": "user", "content": "for a"}])
            await b.add_items([{"role": "user", "content": "for b"}])
            seen: dict[str, Any] = {
                "a": await a.get_items(),
                "b": await b.get_items(),
                "bob": await bob.get_items(),
                "stranger": (await stranger.get_items(), await stranger.pop_item()),
            }
            await stranger.clear_session()
            await bob.clear_session()
            seen["a_kept"] = await a.get_items()
            seen["a_popped"] = await a.pop_item()
            seen["a_pop_again"] = await a.pop_item()  # the other writer's turn is not popped
            await b.clear_session()
            return seen

    seen = run(use())
    assert seen["a"] == [{"role": "user", "content": "for a"}] == seen["a_kept"]
    assert seen["b"] == [{"role": "user", "content": "for b"}]
    assert seen["bob"] == [] and seen["stranger"] == ([], None)
    assert seen["a_popped"] == seen["a"][0] and seen["a_pop_again"] is None
    left = sorted(m.content for m in hub.memories.list(room="chat-a"))
    assert left == ["Alice has a cat", "a turn another writer appended"]
    assert hub.memories.count(room="chat-b") == 0


def test_clear_deletes_only_the_session_items_among_other_turns(live_server, owner, hub) -> None:
    async def use() -> list[Any]:
        async with await _hub(live_server, owner.raw_key) as client:
            session = MemoryHubSession("mixed", client)
            await session.add_items([{"role": "user", "content": "one"}])
            hub.memories.add("not the session's", room="mixed", role="user")
            await session.add_items([{"role": "assistant", "content": "two"}])
            await session.clear_session()  # one delete per item: the room has other turns
            return await session.get_items()

    assert run(use()) == []
    assert [m.content for m in hub.memories.list(room="mixed")] == ["not the session's"]


def test_a_read_only_key_cannot_write(live_server, owner) -> None:
    async def use() -> list[Any]:
        async with await _hub(live_server, owner.raw_read_key) as client:
            session = MemoryHubSession("ro", client)
            with pytest.raises(PermissionDenied) as denied:
                await session.add_items([{"role": "user", "content": "hi"}])
            assert denied.value.status == 403
            return await session.get_items()  # reading is allowed

    assert run(use()) == []


def test_bad_input_is_refused(live_server, owner) -> None:
    for bad in ("", "   ", "a/b"):
        with pytest.raises(ValueError, match="session id"):
            MemoryHubSession(bad, MemoryHub(live_server.url, owner.raw_key))

    async def use() -> list[Any]:
        async with await _hub(live_server, owner.raw_key) as client:
            session = MemoryHubSession("bad", client)
            with pytest.raises(TypeError, match="is a dict"):
                await session.add_items(["just a string"])  # type: ignore[list-item]
            with pytest.raises(BadRequest) as refused:  # past the hub's content cap too
                await session.add_items([{"role": "user", "content": "y" * 40_000}])
            assert "memories[0].content" in str(refused.value)
            return await session.get_items()

    assert run(use()) == []  # nothing half-written


def test_the_sync_client_works_from_a_thread(live_server, owner) -> None:
    options: dict[str, Any] = {**FAST, "user": "carol"}
    with MemoryHub(live_server.url, owner.raw_key, **options) as client:
        session = MemoryHubSession("sync", client)

        async def use() -> tuple[list[Any], Any]:
            await session.add_items(SHAPES[:3])
            return await session.get_items(), await session.pop_item()

        items, popped = run(use())
        assert items == SHAPES[:3] and popped == SHAPES[2]
        assert {m.user for m in client.memories.list(room="sync")} == {"carol"}


class FixedModel(Model):
    """A stand-in for the LLM: calls the ``weather`` tool once, then answers."""

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions, input, *args, **kwargs) -> ModelResponse:  # type: ignore[no-untyped-def]
        self.inputs.append(input)
        if not isinstance(input, list) or input[-1].get("type") != "function_call_output":
            call_id = f"call_{len(self.inputs)}"
            call = ResponseFunctionToolCall(
                type="function_call", call_id=call_id, name="weather", arguments='{"city":"Lisbon"}'
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text="Sunny in Lisbon.", annotations=[])
        message = ResponseOutputMessage(
            type="message", id="msg", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


def test_the_sdk_runner_keeps_its_turns_in_the_hub(live_server, owner, hub) -> None:
    model = FixedModel()
    agent = Agent(name="helper", instructions="Help.", model=model, tools=[weather])
    config = RunConfig(tracing_disabled=True)

    async def use() -> list[Any]:
        async with await _hub(live_server, owner.raw_key) as client:
            session = MemoryHubSession("runner", client, user="dana")
            first = await Runner.run(
                agent, "Weather in Lisbon?", session=session, run_config=config
            )
            assert first.final_output == "Sunny in Lisbon."
            again = MemoryHubSession("runner", client, user="dana")  # a new process, say
            await Runner.run(agent, "And tomorrow?", session=again, run_config=config)
            return await again.get_items()

    items = run(use())
    kinds = [item.get("type", "message") for item in items]
    assert kinds == ["message", "function_call", "function_call_output", "message"] * 2
    assert items[0]["content"] == "Weather in Lisbon?" and items[4]["content"] == "And tomorrow?"
    # the second run's model saw the first run's turns, read back from the hub
    assert model.inputs[2][:4] == items[:4]
    assert hub.memories.count(room="runner", user="dana") == 8


def test_without_a_client_it_reads_the_environment(live_server, owner, monkeypatch) -> None:
    monkeypatch.setenv("MEMORYHUB_URL", live_server.url)
    monkeypatch.setenv("MEMORYHUB_API_KEY", owner.raw_key)

    async def use() -> list[Any]:
        session = MemoryHubSession("from-env")
        assert isinstance(session.hub, AsyncMemoryHub)
        try:
            await session.add_items([{"role": "user", "content": "hi"}])
            return await session.get_items()
        finally:
            await session.hub.aclose()

    assert run(use()) == [{"role": "user", "content": "hi"}]
