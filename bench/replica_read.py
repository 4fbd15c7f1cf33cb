"""Search throughput with the read path on a streaming replica against the primary
only, at 16 clients, and what the read-replica router adds to a request (issue 43).

One machine: the replica shares the cores with the primary, so the figure is about
correctness and the router's overhead (target: < 0.5 ms a request), not capacity.

1. A hub (`manage.py hub`) on a scratch folder, seeded with --memories memories of
   8 users through the API and embedded by its worker.
2. A standby of its PostgreSQL (pg_basebackup -R, memoryhub/embedded_standby.py).
3. --clients threads, each on its own connection, search (POST /api/v1/search/, the
   default mode, k=10) for --seconds: first the hub as started (primary only), then
   the hub restarted with DATABASE_REPLICA_URLS naming the standby. Per run:
   searches/s, p50/p95, errors, transactions the standby ran (pg_stat_database) and
   the load average.
4. The router in this process, against the same servers: one decision
   (``db_for_read`` for a marked request), and a request through the middleware
   making 10 reads (its Redis look-up of the key's last write and the replica's
   health check included) against the same request with no router.

    .venv/bin/python bench/replica_read.py [--memories 2000] [--seconds 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.client import Api, summary  # noqa: E402
from bench.hub_side import wait_embedded  # noqa: E402
from bench.stack import Hub, free_port, hub_env, scratch_reset  # noqa: E402

USERS = [f"user{n}" for n in range(8)]
WORDS = [
    *("garden", "kitchen", "violin", "hospital", "river", "mountain", "coffee", "bicycle"),
    *("library", "winter", "summer", "sister", "brother", "doctor", "teacher", "concert"),
    *("museum", "harbour", "island", "forest", "recipe", "novel", "painting", "football"),
    *("marathon", "holiday", "birthday", "train", "airport", "village", "market"),
]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--data-dir", type=Path, default=REPO / "var" / "bench-replica")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    return parser.parse_args()


def sentence(rng: random.Random) -> str:
    return f"I talked about the {rng.choice(WORDS)} and the {rng.choice(WORDS)} " + " ".join(
        rng.choice(WORDS) for _ in range(6)
    )


def seed(hub: Hub, key: str, count: int) -> float:
    """``count`` memories written in batches, then embedded: seconds it took."""
    started, rng, api = time.monotonic(), random.Random(43), Api(hub.port, key)
    for offset in range(0, count, 500):
        items = [{"user": USERS[n % len(USERS)], "content": sentence(rng)}
                 for n in range(offset, min(count, offset + 500))]  # fmt: skip
        api.post("/api/v1/memories/batch/", json.dumps({"memories": items}).encode())
    with psycopg.connect(hub.database_conninfo()) as db:
        wait_embedded(db)
    return time.monotonic() - started


def clients_run(port: int, key: str, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` threads searching for ``seconds``: throughput and latencies."""
    latencies: list[float] = []
    errors: list[int] = []
    lock, start = threading.Lock(), time.monotonic()

    def client(number: int) -> None:
        api, rng = Api(port, key), random.Random(number)
        while time.monotonic() - start < seconds:
            body = {"query": f"{rng.choice(WORDS)} {rng.choice(WORDS)}",
                    "user": rng.choice(USERS), "k": 10}  # fmt: skip
            status, _, elapsed = api.call("POST", "/api/v1/search/", json.dumps(body).encode())
            with lock:
                if status == 200:
                    latencies.append(elapsed)
                else:
                    errors.append(status)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "searches_per_second": round(len(latencies) / elapsed, 1),
        "latency_ms": summary(latencies),
        "errors": len(errors),
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def standby_commits(socket_dir: str) -> int:
    """Transactions the standby ran in the hub's database (its own statistics)."""
    with psycopg.connect(host=socket_dir, dbname="memoryhub", user="postgres") as db:
        db.execute("SELECT pg_stat_force_next_flush()")
        row = db.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = 'memoryhub'"
        ).fetchone()
    return int(row[0]) if row else 0


def measured_run(hub: Hub, key: str, args: argparse.Namespace, standby: Any) -> dict[str, Any]:
    """A short unmeasured warm-up, then the measured run; the standby's transactions
    meanwhile (none when it is stopped)."""
    clients_run(hub.port, key, args.clients, 5.0)
    running = standby.running()
    before = standby_commits(standby.socket_dir) if running else 0
    figures = clients_run(hub.port, key, args.clients, args.seconds)
    time.sleep(1.5)  # the standby's backends report their statistics when idle
    after = standby_commits(standby.socket_dir) if running else 0
    figures["standby_transactions"] = after - before
    return figures


def caught_up(hub: Hub, standby: Any, timeout: float = 120) -> None:
    with psycopg.connect(hub.database_conninfo(), autocommit=True) as db:
        target = db.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]
    deadline = time.monotonic() + timeout
    with psycopg.connect(host=standby.socket_dir, dbname="memoryhub", user="postgres") as db:
        while time.monotonic() < deadline:
            sql = f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"
            if db.execute(sql).fetchone()[0]:  # type: ignore[index]
                return
            time.sleep(0.1)
    raise RuntimeError("the standby did not catch up")


def router_overhead(hub: Hub, standby: Any, calls: int = 20_000) -> dict[str, Any]:
    """The router timed in this process against the hub's servers (Django set up here,
    pointed at the hub's primary, Redis and the standby)."""
    os.environ.update(
        MEMORYHUB_DATA_DIR=str(hub.data_dir),
        DATABASE_URL=f"postgres://postgres@{hub.socket_dir().replace('/', '%2F')}/memoryhub",
        DATABASE_REPLICA_URLS=standby.url("memoryhub"),
        DJANGO_SETTINGS_MODULE="memoryhub.settings",
    )
    import django

    django.setup()
    return router_timings(calls)


def router_timings(calls: int, requests: int = 2000) -> dict[str, Any]:
    """Microseconds a decision takes, and what the middleware and the router add to a
    request making 10 reads (a new request each time: its Redis look-up of the key's
    last write and its health check of the replica connection included)."""
    from django.db import connections, router
    from django.http import HttpRequest, HttpResponse
    from django.test import RequestFactory

    from memories.models import Memory
    from memoryhub import db_router, replicas

    def view(request: HttpRequest) -> HttpResponse:
        chosen = {router.db_for_read(Memory) for _ in range(10)}
        return HttpResponse(",".join(sorted(chosen)))

    request = RequestFactory().post("/api/v1/search/", HTTP_AUTHORIZATION="Bearer bench")
    middleware = db_router.ReadPathMiddleware(view)
    assert middleware(request).content == b"replica_0", "the reads did not go to the replica"
    token = db_router._read_path.set(db_router.ReadPath(replicas.api_identity("x"), False))
    started = time.perf_counter()
    for _ in range(calls):
        router.db_for_read(Memory)
    decision_us = (time.perf_counter() - started) / calls * 1e6
    db_router._read_path.reset(token)
    routed_ms = _per_request_ms(lambda: middleware(request), requests)
    routers = router.routers
    router.routers = []  # Django without a router: every read on "default"
    bare_ms = _per_request_ms(lambda: view(request), requests)
    router.routers = routers
    replica = connections["replica_0"]
    return {
        "decision_us": round(decision_us, 2),
        "request_with_router_ms": round(routed_ms, 4),
        "request_without_router_ms": round(bare_ms, 4),
        "added_per_request_ms": round(routed_ms - bare_ms, 4),
        # its parts: the key's last write asked of Redis, the replica connection's
        # health check (the one Django's CONN_HEALTH_CHECKS makes per request anyway)
        "redis_lookup_ms": round(
            _per_request_ms(lambda: replicas.api_wrote_recently("x"), requests), 4
        ),
        "health_check_ms": round(_per_request_ms(replica.is_usable, requests), 4),
    }


def _per_request_ms(call: Any, count: int) -> float:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return samples[len(samples) // 2]  # the median: this machine is shared


def main() -> int:
    """One hub, started naming the standby as its replica (down until it exists, so the
    seeding writes on the primary); the runs differ only by the standby running."""
    args = arguments()
    from memoryhub.embedded_standby import Standby, standby_start

    scratch_reset(args.data_dir)
    hub_dir = args.data_dir / "hub"
    standby = Standby(args.data_dir / "replica", {})
    hub = Hub(hub_dir, free_port(), hub_env(hub_dir, 0, 16), [])
    hub.env["DATABASE_REPLICA_URLS"] = standby.url("memoryhub")
    results: dict[str, Any] = {"load_average_at_start": [round(x, 2) for x in os.getloadavg()],
                               "cores": os.cpu_count(), "memories": args.memories}  # fmt: skip
    print(f"hub ready in {hub.start(timeout=300):.0f} s", flush=True)
    try:
        key = hub.api_key_unthrottled("bench")
        seconds = seed(hub, key, args.memories)
        print(f"seeded {args.memories} memories in {seconds:.0f} s", flush=True)
        standby = standby_start(standby.pgdata, hub.socket_dir())
        caught_up(hub, standby)
        time.sleep(6)  # past the read-your-writes window of the seeding key
        for name in ("read_path_on_replica", "primary_only", "read_path_on_replica_again"):
            if name == "primary_only":
                standby.stop()
            elif not standby.running():
                standby.start()
                caught_up(hub, standby)
            results[name] = measured_run(hub, key, args, standby)
            print(f"{name}: {results[name]}", flush=True)
        results["router"] = router_overhead(hub, standby)
        print("router:", results["router"], flush=True)
    finally:
        hub.stop()
        standby.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
