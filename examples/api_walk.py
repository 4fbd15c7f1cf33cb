"""A scripted walk through API v1 against a running hub (what an agent developer does first).

    python examples/api_walk.py --url http://127.0.0.1:8000 --key mh_...

Creates a user, writes 100 messages in batches, waits until the worker has embedded
them, searches in every mode, deletes one memory and reads its revisions.
Exits non-zero at the first step that does not behave. Only needs `requests`.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
import uuid
from typing import Any

import requests

TOPICS = [
    "I adopted a golden retriever called Biscuit last spring",
    "My sister Ana lives in Lisbon and works as an architect",
    "I am training for the Berlin marathon in September",
    "Cooking Thai green curry is my favourite weekend hobby",
    "I switched jobs and now work as a data engineer at a bank",
]


def check(condition: bool, message: str) -> None:
    if not condition:
        sys.exit(f"FAILED: {message}")
    print(f"ok  {message}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--key", required=True, help="a read-write API key")
    args = parser.parse_args()
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {args.key}"
    base = args.url.rstrip("/") + "/api/v1"
    user = f"walk-{uuid.uuid4().hex[:8]}"

    response = api.post(f"{base}/users/", json={"external_id": user, "name": "Walker"})
    check(response.status_code == 201, f"create user {user} -> {response.status_code}")
    check(
        api.post(f"{base}/users/", json={"external_id": user}).status_code == 200,
        "create again is idempotent (200)",
    )

    messages = [
        {"user": user, "room": f"{user}-chat", "role": "user" if i % 2 == 0 else "assistant",
         "content": f"{TOPICS[i % len(TOPICS)]} (note {i})", "metadata": {"turn": i}}
        for i in range(100)
    ]  # fmt: skip
    ids = []
    for start in range(0, 100, 25):
        response = api.post(
            f"{base}/memories/batch/", json={"memories": messages[start : start + 25]}
        )
        check(
            response.status_code == 201,
            f"batch write {start}-{start + 24} -> {response.status_code}",
        )
        ids += [item["memory"]["id"] for item in response.json()["results"]]
    # kind=message: the workers may already have derived facts from them
    messages_only = {"user": user, "kind": "message"}
    count = api.get(f"{base}/memories/count/", params=messages_only).json()["count"]
    check(count == 100, f"count of the user's messages is {count}")

    _embedded(api, base, user)

    _searches(api, base, user)
    _deletes(api, base, user, ids, messages)
    print("API walk completed.")


def _embedded(api: requests.Session, base: str, user: str) -> None:
    """Wait (at most 2 minutes) until the worker embedded every message."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        page = api.get(f"{base}/memories/", params={"user": user, "limit": 500}).json()["results"]
        pending = sum(1 for memory in page if memory["embedding_status"] == "pending")
        if not pending:
            break
        time.sleep(0.5)
    check(pending == 0, "the worker embedded all 100 messages")


def _searches(api: requests.Session, base: str, user: str) -> None:
    """Each mode finds the memory a question asks about first."""
    searches = {
        "vector": ("what dog does the user have?", "golden retriever"),
        "keyword": ("marathon training", "marathon"),
        "hybrid": ("where does the sister live?", "Lisbon"),
        "auto": ("which city is the user's sister in?", "Lisbon"),
    }
    for mode, (query, expected) in searches.items():
        response = api.post(
            f"{base}/search/",
            json={"user": user, "query": query, "mode": mode, "k": 5, "explain": True},
        )
        body = response.json()
        results = body["results"]
        check(response.status_code == 200 and len(results) == 5, f"{mode} search returns 5 results")
        top = results[0]["memory"]["content"]
        print(f"      top: {top!r} ({body['timings_ms']['total']:.1f} ms)")
        check(expected in top, f"{mode} search puts the right memory first")


def _deletes(
    api: requests.Session, base: str, user: str, ids: list[str], messages: list[dict[str, Any]]
) -> None:
    """Delete one memory (its history stays, without its words), then the user."""
    victim = ids[0]
    check(api.delete(f"{base}/memories/{victim}/").status_code == 204, "delete one memory")
    check(api.get(f"{base}/memories/{victim}/").status_code == 404, "it is gone")
    revisions = api.get(f"{base}/memories/{victim}/revisions/").json()["results"]
    actions = [revision["action"] for revision in revisions]
    check(actions == ["delete", "create"], f"its revisions are {actions}")
    said = hashlib.sha256(messages[0]["content"].encode()).hexdigest()
    before = revisions[0]["before"]
    check(
        before.get("content_sha256") == said and "content" not in before,
        "the delete revision keeps the text's SHA-256, not the text (erasure)",
    )

    # the 99 messages left and what the workers derived from them (facts, summaries)
    held = api.get(f"{base}/memories/count/", params={"user": user}).json()["count"]
    check(held >= 99, f"the user holds {held} memories: the 99 messages and what was derived")
    response = api.delete(f"{base}/users/{user}/")
    check(
        response.status_code == 200 and response.json()["deleted"] == held,
        f"delete the user and all {held} of its memories",
    )
    gone = api.get(f"{base}/memories/count/", params={"user": user})
    check(gone.status_code == 404 or gone.json()["count"] == 0, "nothing of the user is left")


if __name__ == "__main__":
    main()
