"""What a round trip through each way an agent plugs in adds over the raw HTTP call it
makes: p50/p95 ms each way and the difference, against a live hub.

    .venv/bin/python bench/integrations_overhead.py [--calls 100] [--url URL --key KEY]

Paths, each against the raw call it stands for (alternated call by call, the order
flipped each round, after 10 warm-ups, so both see the same hub load):

* MCP over streamable HTTP (the hub's ``/mcp/``, one session kept open) and over stdio
  (``memoryhub-mcp`` as a subprocess): the ``recall`` tool against ``POST /search/``;
* the OpenAI Agents SDK session: ``get_items(limit=10)`` against ``GET /memories/`` of
  its room;
* the LangGraph store: ``search(namespace, query=...)`` against ``POST /search/``;
* the LlamaIndex memory block: ``aget(messages)`` against ``POST /context/``.

The hub is a scratch ``manage.py hub`` started here (or ``--url/--key``), seeded as
bench/client_overhead.py seeds it. Not part of the tests; the figures go in the issue
note.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llama_index.core.base.llms.types import ChatMessage  # noqa: E402
from memoryhub_client import AsyncMemoryHub, MemoryHub  # noqa: E402
from memoryhub_client.integrations.langgraph import MemoryHubStore  # noqa: E402
from memoryhub_client.integrations.llama_index import MemoryHubMemoryBlock  # noqa: E402
from memoryhub_client.integrations.openai_agents import MemoryHubSession  # noqa: E402

from bench.client_overhead import arguments, seeded_run, summary  # noqa: E402

SEARCH = {"query": "where does her sister live", "user": "alice", "mode": "keyword", "k": 10}
RECALL = {"query": SEARCH["query"], "user": "alice", "mode": "keyword", "k": 10}
SESSION_ROOM = "agents-session"  # the session's own items: 20 turns it added
# what MemoryHubStore.search(("bench",), query=..., limit=10) sends, in keyword mode
STORE_ROOM = "langgraph-bench"
STORE_SEARCH = {
    "query": "the sister's city",
    "room": STORE_ROOM,
    "kind": ["knowledge"],
    "metadata": {"langgraph": {"indexed": True, "prefixes": ["bench"]}},
    "k": 10,
    "mode": "keyword",
}
# what MemoryHubMemoryBlock.aget([the user's message]) asks for
CONTEXT = {"user": "alice", "room": "chat-0", "query": SEARCH["query"], "max_tokens": 1000}
Call = Callable[[], Awaitable[Any]]


async def timed(call: Call) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def pairs(calls: int, raw: Call, through: Call) -> dict[str, float | None]:
    """``calls`` of each, alternated (the order flips each round), after 10 warm-ups."""
    for _ in range(10):
        await raw()
        await through()
    raw_ms: list[float] = []
    through_ms: list[float] = []
    for n in range(calls):
        first, second = (raw, through) if n % 2 else (through, raw)
        (raw_ms if first is raw else through_ms).append(await timed(first))
        (raw_ms if second is raw else through_ms).append(await timed(second))
    return summary(raw_ms, through_ms)


def raw_calls(http: httpx.AsyncClient) -> dict[str, Call]:
    async def search() -> Any:
        response = await http.post("/api/v1/search/", json=SEARCH)
        response.raise_for_status()
        return response.json()

    async def room_list() -> Any:
        params: dict[str, str | int] = {"room": SESSION_ROOM, "user": "alice", "kind": "message"}
        params["limit"] = 10
        response = await http.get("/api/v1/memories/", params=params)
        response.raise_for_status()
        return response.json()

    async def store_search() -> Any:
        response = await http.post("/api/v1/search/", json=STORE_SEARCH)
        response.raise_for_status()
        return response.json()

    async def context() -> Any:
        response = await http.post("/api/v1/context/", json=CONTEXT)
        response.raise_for_status()
        return response.json()

    return {
        "search": search,
        "room_list": room_list,
        "store_search": store_search,
        "context": context,
    }


async def mcp_paths(base: str, key: str, calls: int, raw: dict[str, Call]) -> dict[str, Any]:
    """recall through MCP over HTTP and over stdio, each against the raw search."""
    results: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60.0) as client,
        streamable_http_client(f"{base}/mcp/", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        results["mcp http recall"] = await pairs(
            calls, raw["search"], lambda: session.call_tool("recall", RECALL)
        )
    stdio = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memoryhub_client.mcp_server"],
        env={"MEMORYHUB_URL": base, "MEMORYHUB_API_KEY": key},
    )
    async with (
        stdio_client(stdio) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        results["mcp stdio recall"] = await pairs(
            calls, raw["search"], lambda: session.call_tool("recall", RECALL)
        )
    return results


async def adapter_paths(base: str, key: str, calls: int, raw: dict[str, Call]) -> dict[str, Any]:
    """The framework adapters, each against the raw call it makes."""
    results: dict[str, Any] = {}
    async with AsyncMemoryHub(base, key, user="alice") as hub:
        session = MemoryHubSession(SESSION_ROOM, hub, user="alice")
        await session.clear_session()
        items = [{"role": "user", "content": f"turn {n} of the session"} for n in range(20)]
        await session.add_items(items)  # type: ignore[arg-type]
        results["openai session get_items"] = await pairs(
            calls, raw["room_list"], lambda: session.get_items(limit=10)
        )
        store = MemoryHubStore(
            hub=MemoryHub(base, key), async_hub=hub, room=STORE_ROOM, mode="keyword"
        )
        for n in range(20):
            await store.aput(("bench",), f"note-{n}", {"text": f"the sister's city, note {n}"})
        results["langgraph store asearch"] = await pairs(
            calls,
            raw["store_search"],
            lambda: store.asearch(("bench",), query=str(STORE_SEARCH["query"]), limit=10),
        )
        block = MemoryHubMemoryBlock(hub=hub, user="alice", room="chat-0", max_tokens=1000)
        asked = [ChatMessage(role="user", content=str(CONTEXT["query"]))]
        results["llama_index block aget"] = await pairs(
            calls, raw["context"], lambda: block.aget(messages=asked)
        )
    return results


async def measure(base: str, key: str, calls: int) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as http:
        raw = raw_calls(http)
        return {
            **await mcp_paths(base, key, calls, raw),
            **await adapter_paths(base, key, calls, raw),
        }


def report(results: dict[str, Any], calls: int) -> None:
    print(f"\nms per call (p50 / p95), {calls} calls each way; added = path p50 - raw p50")
    for path, row in results.items():
        print(
            f"  {path:28} raw {row['raw_p50']:7.2f} / {row['raw_p95']:7.2f}"
            f"   path {row['client_p50']:7.2f} / {row['client_p95']:7.2f}"
            f"   added {row['added_p50']:+.2f}"
        )


def main() -> None:
    args = arguments(__doc__, 100, "bench-integrations")
    results = seeded_run(args, lambda base, key: asyncio.run(measure(base, key, args.calls)))
    report(results, args.calls)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
