"""Request latency while Redis is down: writes of user messages, then searches and
contexts of that user, through the API (Django's test client, in one process, on the
hub's database), with Redis at a closed port (a Redis that is gone) and at a listener
that accepts and never answers (a Redis that hangs).

    .venv/bin/python bench/redis_outage.py [--requests 20]

Each case runs in a process of its own: the settings read REDIS_URL (and the broker's
URL with it) when they load. Not part of the tests; BENCHMARKS.md has the figures."""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
CASES = ("gone", "hangs")


def silent_listener() -> int:
    """A TCP port that accepts connections and never answers; its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(100)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            held.append(server.accept()[0])

    threading.Thread(target=serve, daemon=True).start()
    return int(server.getsockname()[1])


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def case_run(case: str, count: int) -> dict[str, object]:
    """In this process: Redis pointed at the case's port, then ``count`` requests of each
    kind, timed."""
    port = silent_listener() if case == "hangs" else closed_port()
    os.environ["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
    sys.path.insert(0, str(BASE_DIR))
    from bench.evaluation_command import django_start

    django_start()
    import logging

    logging.disable(logging.WARNING)  # one warning per failed send; not measured
    from django.conf import settings
    from django.test import Client

    from memories.models import Project
    from memories.services.projects import api_key_create

    settings.ALLOWED_HOSTS = ["*"]
    project = Project.objects.create(name=f"redis-outage-{uuid.uuid4().hex[:8]}")
    _, raw_key = api_key_create(project=project, name="outage")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    query = {"user": "walker", "query": "where do I walk the dog?"}
    requests = {
        "write": lambda n: ("/api/v1/memories/", {
            "user": "walker", "room": "chat", "role": "user",
            "content": f"I walked the dog along the river, walk {n}."}),
        "search": lambda n: ("/api/v1/search/", {**query, "mode": "keyword", "k": 10}),
        "context": lambda n: ("/api/v1/context/", {**query, "max_tokens": 1000}),
    }  # fmt: skip
    rows: dict[str, object] = {"case": case}
    try:
        for name, request in requests.items():
            latencies, statuses = [], set()
            for number in range(count):
                path, body = request(number)
                start = time.perf_counter()
                reply = client.post(path, json.dumps(body), content_type="application/json")
                latencies.append((time.perf_counter() - start) * 1000)
                statuses.add(reply.status_code)
            rows[name] = {
                "n": count, "statuses": sorted(statuses), "first_ms": round(latencies[0], 1),
                "p50_ms": round(statistics.median(latencies), 1),
                "max_after_first_ms": round(max(latencies[1:], default=0.0), 1),
            }  # fmt: skip
    finally:
        project.delete()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20, help="of each kind")
    parser.add_argument("--timeout", type=float, default=180, help="seconds per case")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # one case's process
    args = parser.parse_args()
    if args.case:
        print(json.dumps(case_run(args.case, args.requests)))
        return
    print("Redis   request  statuses  first ms  p50 ms  max after the first, ms")
    for case in CASES:
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--case", case, "--requests", str(args.requests)],
                capture_output=True, text=True, timeout=args.timeout, cwd=BASE_DIR,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            print(f"{case:6}  the requests had not ended after {args.timeout:.0f} s")
            continue
        if done.returncode != 0:
            print(f"{case}: failed\n{done.stderr[-2000:]}")
            continue
        rows = json.loads(done.stdout.strip().splitlines()[-1])
        for name in ("write", "search", "context"):
            row = rows[name]
            print(
                f"{case:6}  {name:7}  {str(row['statuses']):8}  {row['first_ms']:8}  "
                f"{row['p50_ms']:6}  {row['max_after_first_ms']}"
            )


if __name__ == "__main__":
    main()
