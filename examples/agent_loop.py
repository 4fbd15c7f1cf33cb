"""An agent loop with long-term memory: before each LLM call, MemoryHub's context for
what the user just said; after it, both turns appended.

    python examples/agent_loop.py --url http://127.0.0.1:8000 --key mh_...
    python examples/agent_loop.py --interactive          # type the user's turns yourself

The model: any OpenAI-compatible chat endpoint when LLM_BASE_URL is set (LLM_API_KEY,
LLM_MODEL: e.g. http://localhost:11434/v1 and llama3.2 for Ollama); without it, the
tests' local stub (tests/synopsis/llm_server.py), which answers one fixed sentence and
keeps what it was sent, so the walk can check what the model was shown.

The scripted walk talks in two conversations (rooms) a week apart: the second starts
empty, and the model still gets what the user said in the first, from MemoryHub.
Exits non-zero when it did not. Needs the Python client: pip install ./clients/python
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
from memoryhub_client import MemoryHub

SYSTEM = "You are a helpful assistant. What you remember about the user:\n\n"
FIRST_CHAT = [
    "Hi! I just adopted a cat called Miso.",
    "My sister Ana lives in Lisbon, I am visiting her in May.",
    "I have been vegetarian for ten years, by the way.",
]
A_WEEK_LATER = "What should I cook for my sister when I visit her, and where was that again?"
REMEMBERED = ("Lisbon", "vegetarian")  # what the second chat's first call must be shown

Llm = Callable[[list[dict[str, str]]], str]


def chat_model(base_url: str, api_key: str, model: str) -> Llm:
    """One chat completion per call, from an OpenAI-compatible endpoint."""
    http = httpx.Client(base_url=base_url.rstrip("/"), timeout=120)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def complete(messages: list[dict[str, str]]) -> str:
        response = http.post(
            "/chat/completions", json={"model": model, "messages": messages}, headers=headers
        )
        response.raise_for_status()
        return str(response.json()["choices"][0]["message"]["content"])

    return complete


def turn(hub: MemoryHub, llm: Llm, room: str, text: str, max_tokens: int) -> tuple[str, str]:
    """One turn of the agent: context, LLM call, remember both turns. Returns the system
    prompt sent and the reply."""
    context = hub.context(text, room=room, max_tokens=max_tokens)  # before the call
    system = SYSTEM + context.prompt
    reply = llm([{"role": "system", "content": system}, {"role": "user", "content": text}])
    hub.memories.add_batch(  # after it
        [{"role": "user", "content": text}, {"role": "assistant", "content": reply}], room=room
    )
    print(f"user: {text}\n  context: {context.total_tokens} tokens\n  model: {reply}")
    return system, reply


def settle(hub: MemoryHub, seconds: float = 120) -> None:
    """Waits until the worker has embedded the user's turns (a real agent does not wait:
    a turn is found by its words at once, by its meaning a moment later)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(m.embedding_status != "pending" for m in hub.memories.list(limit=500)):
            return
        time.sleep(0.5)


def stub_model() -> tuple[Llm, list[str]]:
    """The tests' local OpenAI-compatible stub, and the system prompts it is sent."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.synopsis.llm_server import LlmServer  # only in a checkout, only without an LLM

    server = LlmServer().start()
    server.default_text = "(the stub model) Noted."
    complete = chat_model(server.base_url, "", "stub")
    shown: list[str] = []

    def recorded(messages: list[dict[str, str]]) -> str:
        reply = complete(messages)
        shown.append(server.requests[-1].messages[0]["content"])  # as the stub received it
        return reply

    return recorded, shown


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("MEMORYHUB_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("MEMORYHUB_API_KEY"), help="read-write")
    parser.add_argument("--user", default=f"loop-{uuid.uuid4().hex[:8]}")
    parser.add_argument("--max-tokens", type=int, default=1500, help="the context's budget")
    parser.add_argument("--interactive", action="store_true", help="type the user's turns")
    return parser.parse_args()


def model() -> tuple[Llm, list[str]]:
    """The endpoint LLM_BASE_URL names, else the stub; and what the stub was shown."""
    if base_url := os.environ.get("LLM_BASE_URL"):
        key, name = os.environ.get("LLM_API_KEY", ""), os.environ.get("LLM_MODEL", "gpt-4o-mini")
        return chat_model(base_url, key, name), []
    return stub_model()


def main() -> None:
    args = arguments()
    llm, shown = model()
    hub = MemoryHub(args.url, args.key, user=args.user)
    hub.users.create(args.user)  # once per user; a known one is returned unchanged
    if args.interactive:
        hub.rooms.create(room := f"{args.user}-chat")  # once per conversation, likewise
        while (text := input("you> ").strip()) not in ("", "quit", "exit"):
            turn(hub, llm, room, text, args.max_tokens)
        return
    hub.rooms.create(room := f"{args.user}-monday")
    for text in FIRST_CHAT:
        turn(hub, llm, room, text, args.max_tokens)
    settle(hub)
    hub.rooms.create(room := f"{args.user}-next-week")
    sent, reply = turn(hub, llm, room, A_WEEK_LATER, args.max_tokens)
    prompt = shown[-1] if shown else sent  # as the stub received it, else as it was sent
    print(f"the new chat's first call was shown:\n{prompt}")
    if missing := [word for word in REMEMBERED if word not in prompt]:
        sys.exit(f"FAILED: the new chat's context lacks {missing}:\n{prompt}")
    if not reply.strip():
        sys.exit("FAILED: the model answered nothing")
    hub.users.delete(args.user)  # the walk leaves nothing behind
    for name in (f"{args.user}-monday", f"{args.user}-next-week"):
        hub.rooms.delete(name)
    print(f"Agent loop completed: the new chat was given {', '.join(REMEMBERED)} from the first.")


if __name__ == "__main__":
    main()
