"""What a round trip through the Python client (clients/python) adds over a raw httpx
call to the same endpoint: p50/p95 ms each way and the difference.

    .venv/bin/python bench/client_overhead.py [--calls 200] [--url URL --key KEY]

Two measures:

* **live**: against a hub (a scratch `manage.py hub` started here, or ``--url/--key``),
  ``--calls`` gets of one memory and ``--calls`` keyword searches each way. The raw
  call and the client's call alternate, each on its own keep-alive connection, so that
  both see the same hub load; the client builds the request, adds the Idempotency-Key,
  decodes the JSON into its dataclasses and checks for retries, the raw call only sends
  and decodes the JSON.
* **in process**: the same two calls answered by an httpx MockTransport with the hub's
  recorded answer (no network, no hub): the client's own CPU time per call, without
  the noise of a live round trip.

Not part of the tests; the figures go in BENCHMARKS.md / the issue note.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryhub_client import MemoryHub  # noqa: E402

from bench.client import percentile  # noqa: E402
from bench.stack import REPO, Hub, free_port, hub_env, scratch_reset  # noqa: E402

PROJECT = "client-overhead"
SEARCH = {"query": "where does her sister live", "user": "alice", "mode": "keyword", "k": 10}


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def summary(raw: list[float], client: list[float]) -> dict[str, float | None]:
    p50_raw, p50_client = percentile(raw, 0.5), percentile(client, 0.5)
    p95_raw, p95_client = percentile(raw, 0.95), percentile(client, 0.95)
    return {
        "raw_p50": p50_raw,
        "raw_p95": p95_raw,
        "client_p50": p50_client,
        "client_p95": p95_client,
        "added_p50": None if None in (p50_raw, p50_client) else round(p50_client - p50_raw, 3),
    }


def pairs(calls: int, raw: Callable[[], Any], client: Callable[[], Any]) -> dict[str, float | None]:
    """``calls`` of each, alternated (the order flips each round), after 10 warm-ups."""
    for _ in range(10):
        raw(), client()
    raw_ms, client_ms = [], []
    for n in range(calls):
        if n % 2:
            raw_ms.append(timed(raw))
            client_ms.append(timed(client))
        else:
            client_ms.append(timed(client))
            raw_ms.append(timed(raw))
    return summary(raw_ms, client_ms)


def calls_of(http: httpx.Client, hub: MemoryHub, memory_id: str) -> dict[str, tuple[Any, Any]]:
    """The two calls, raw and through the client."""

    def raw_get() -> Any:
        response = http.get(f"/api/v1/memories/{memory_id}/")
        response.raise_for_status()
        return response.json()

    def raw_search() -> Any:
        response = http.post("/api/v1/search/", json=SEARCH)
        response.raise_for_status()
        return response.json()

    return {
        "get": (raw_get, lambda: hub.memories.get(memory_id)),
        "search": (raw_search, lambda: hub.search(**SEARCH)),
    }


def measure(base: str, key: str, calls: int, transport: Any = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    http = httpx.Client(base_url=base, headers=headers, timeout=30, transport=transport)
    hub = MemoryHub(base, key, transport=transport)
    try:
        memory_id = hub.memories.page(user="alice", limit=1).results[0].id
        return {
            name: pairs(calls, raw, client)
            for name, (raw, client) in calls_of(http, hub, memory_id).items()
        }
    finally:
        http.close()
        hub.close()


def recorded(base: str, key: str) -> httpx.MockTransport:
    """A transport that answers as the hub did, from memory (one recording per path)."""
    answers: dict[str, tuple[int, bytes]] = {}
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
        page = http.get("/api/v1/memories/", params={"user": "alice", "limit": 1})
        memory_id = page.json()["results"][0]["id"]
        answers["/api/v1/memories/"] = (200, page.content)
        got = http.get(f"/api/v1/memories/{memory_id}/")
        answers[f"/api/v1/memories/{memory_id}/"] = (200, got.content)
        found = http.post("/api/v1/search/", json=SEARCH)
        answers["/api/v1/search/"] = (200, found.content)

    def answer(request: httpx.Request) -> httpx.Response:
        status, content = answers[request.url.path]
        return httpx.Response(status, content=content, headers={"Content-Type": "application/json"})

    return httpx.MockTransport(answer)


def seed(base: str, key: str) -> None:
    """A user with 360 turns in four rooms (each under a room's capacity, so that no
    summary runs), all embedded before anything is timed: the worker stays idle."""
    with MemoryHub(base, key) as hub:
        for room in range(4):
            turns = [
                {"content": f"turn {room}-{n}: my sister lives in Lisbon near the river {n}"}
                for n in range(90)
            ]
            hub.memories.add_batch(turns, user="alice", room=f"chat-{room}")
        deadline = time.monotonic() + 300
        while any(m.embedding_status != "done" for m in hub.memories.list(user="alice", limit=500)):
            if time.monotonic() > deadline:
                raise RuntimeError("the seeded turns were not embedded within 300 s")
            time.sleep(1)
        time.sleep(5)  # the fact extraction the turns queued ends too


def hub_started(args: argparse.Namespace) -> tuple[Hub, str]:
    data_dir = args.data_dir
    scratch_reset(data_dir)
    data_dir.mkdir(parents=True)
    hub = Hub(data_dir, free_port(), hub_env(data_dir, 0, 16), [])
    print(f"starting a hub in {data_dir}", flush=True)
    print(f"  ready in {hub.start(timeout=300):.0f} s", flush=True)
    return hub, hub.api_key_unthrottled(PROJECT)


def report(results: dict[str, Any], calls: int) -> None:
    print(
        f"\nms per call (p50 / p95), live: {calls} calls each way, in process: {calls * 10};"
        " added = client p50 - raw p50"
    )
    for measure_name, by_call in results.items():
        for call, row in by_call.items():
            print(
                f"  {measure_name:10} {call:7} raw {row['raw_p50']:7.3f} / {row['raw_p95']:7.3f}"
                f"   client {row['client_p50']:7.3f} / {row['client_p95']:7.3f}"
                f"   added {row['added_p50']:+.3f}"
            )


def arguments(doc: str, calls: int, data_dir: str) -> argparse.Namespace:
    """A bench's command line: --calls, a running hub (--url, --key) or a scratch one
    in --data-dir, --json."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=calls)
    parser.add_argument("--url", help="a running hub (else one is started on a scratch folder)")
    parser.add_argument("--key", help="an API key of the running hub (with --url)")
    parser.add_argument("--data-dir", type=Path, default=REPO / "var" / data_dir)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    return parser.parse_args()


def seeded_run(args: argparse.Namespace, run: Callable[[str, str], Any]) -> Any:
    """``run(base, key)`` against the hub ``args`` name (or a scratch one started and
    stopped here), seeded first."""
    hub = None
    if args.url:
        base, key = args.url.rstrip("/"), args.key
    else:
        hub, key = hub_started(args)
        base = hub.base
    try:
        seed(base, key)
        return run(base, key)
    finally:
        if hub is not None:
            print(f"  stopped: {hub.stop()}", flush=True)


def main() -> None:
    args = arguments(__doc__, 200, "bench-client-overhead")

    def both(base: str, key: str) -> dict[str, Any]:
        return {
            "live": measure(base, key, args.calls),
            "in process": measure(base, key, args.calls * 10, recorded(base, key)),
        }

    results = seeded_run(args, both)
    report(results, args.calls)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
