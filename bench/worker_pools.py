"""Time-to-embedded of a new message on an idle hub and under a derived backlog, for the
worker layout before issue 45 (one worker process on every queue, concurrency 1, as
`make run` started it) and for the worker pools (embedding apart: manage.py hub's
default); and the workers' memory.

    .venv/bin/python bench/worker_pools.py [--messages 20] [--interval 1] [--backlog 10000]

Each layout gets a hub of its own (`manage.py hub` on a scratch folder, the local ONNX
model). A message is one POST /api/v1/memories/ (a new user each time), timed from just
before the request until its row says embedding_status done (polled every 10 ms on a
connection of the bench's own); one is sent every INTERVAL seconds whatever came of the
others, as users write. First on the idle hub; then with the backlog: BACKLOG user
messages (stored, embedded) each queued as a fact-extraction task, and a long text
document uploaded and ingesting. The backlog left when the measure ends is reported, to
show it was there all along. Memory: the largest sum over the worker processes (main and
pool processes) sampled every second of the measures, RSS and PSS (shared pages shared
out). Not part of the tests; BENCHMARKS.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.client import Api, encode, percentile  # noqa: E402
from bench.stack import REPO, Hub, free_port, hub_env, scratch_reset  # noqa: E402
from bench.synthetic_text import text_of_chars  # noqa: E402

LAYOUTS = {
    "one worker, every queue (before)": ["--worker-pools", "single", "--worker-concurrency", "1"],
    "pools: embed + derived (after)": [],
}
PROJECT = "pools"
WAIT_LIMIT = 300.0  # seconds a message may wait for its vector before the bench gives up
DERIVED_QUEUES = ("derived", "ingestion")
CITIES = ["Lyon", "Porto", "Osaka", "Denver", "Tallinn", "Quito", "Perth", "Bergen"]
JOBS = ["nurse", "baker", "pilot", "teacher", "plumber", "chemist", "lawyer", "farmer"]
PETS = ["a cat named Miso", "two dogs", "a parrot", "no pets", "a rabbit called Bun"]
# run by `manage.py shell` in the hub's environment: user messages the offline extractor
# finds facts in (a place, a job, pets), stored and embedded, and a task for each
BACKLOG_CODE = """
import random
from memories.models import EndUser, Memory, Project, content_hash
from memories.providers.task_sending import task_send
rng = random.Random(45)
project = Project.objects.get(name={project!r})
users = [EndUser.objects.get_or_create(project=project, external_id=f"backlog-{{n}}")[0]
         for n in range(100)]
texts = [
    f"I live in {{rng.choice({cities!r})}} and I work as a {{rng.choice({jobs!r})}}. "
    f"At home I have {{rng.choice({pets!r})}}. Message {{n}}."
    for n in range({count})
]
rows = Memory.objects.bulk_create(
    Memory(project=project, end_user=users[n % 100], role="user", content=text,
           content_hash=content_hash(text), embedding_status="done")
    for n, text in enumerate(texts))
for row in rows:
    task_send("synopsis.tasks.facts_extract_task", args=[[str(row.pk)]])
print(len(rows))
"""


@dataclass
class Probe:
    """What a measure talks to: the API, the bench's own database connection, the hub."""

    api: Api
    db: psycopg.Connection
    hub: Hub


def models_copy(data_dir: Path) -> None:
    """The exported ONNX model, so that the hub need not export it (~10 s) first."""
    for source in (REPO / "var" / "models", REPO / "var" / "test" / "models"):
        if source.exists():
            shutil.copytree(source, data_dir / "models", dirs_exist_ok=True)
            return


def message_send(api: Api, user: str) -> str:
    """Write one message (a new user); its id (its primary key: no client id given)."""
    written, _ = api.post(
        "/api/v1/memories/", encode({"user": user, "content": f"{user} just booked a trip."})
    )
    return str(written["memory"]["id"])


def embedded_now(db: psycopg.Connection, ids: list[str]) -> list[str]:
    rows = db.execute(
        "SELECT id::text FROM memories_memory WHERE id = ANY(%s::uuid[])"
        " AND embedding_status = 'done'",
        [ids],
    ).fetchall()
    return [row[0] for row in rows]


def queued(client: redis.Redis, names: tuple[str, ...]) -> int:
    """Tasks waiting in these queues (kombu's lists, its priority lists included)."""
    return sum(client.llen(key) for name in names for key in client.scan_iter(f"{name}*"))


def workers_memory(hub: Hub) -> tuple[float, float]:
    """(RSS, PSS) in MiB summed over the worker processes, main and pool."""
    roles = hub.role_processes()
    rss = pss = 0.0
    for process in roles["worker_main"] + roles["worker_pool"]:
        try:
            info = process.memory_full_info()
        except psutil.Error:
            continue
        rss, pss = rss + info.rss / 2**20, pss + info.pss / 2**20
    return rss, pss


def measure(probe: Probe, count: int, label: str, interval: float) -> dict[str, Any]:
    """``count`` messages, one every ``interval`` s whatever came of the others (as users
    write); each one's seconds from just before its request to embedded, and the
    workers' memory peak meanwhile."""
    sent: dict[str, float] = {}
    seconds: list[float] = []
    peak, next_send, next_sample = (0.0, 0.0), time.monotonic(), 0.0
    while len(seconds) < count:
        now = time.monotonic()
        if len(sent) + len(seconds) < count and now >= next_send:
            sent[message_send(probe.api, f"{label}-{len(sent) + len(seconds)}")] = now
            next_send += interval
        for memory_id in embedded_now(probe.db, list(sent)) if sent else []:
            seconds.append(time.monotonic() - sent.pop(memory_id))
        if now >= next_sample:
            peak, next_sample = max(peak, workers_memory(probe.hub)), now + 1.0
        if sent and now - min(sent.values()) > WAIT_LIMIT:
            raise RuntimeError(f"{label}: a message not embedded within {WAIT_LIMIT:.0f} s")
        time.sleep(0.01)
    return {
        "seconds": [round(s, 3) for s in seconds],
        "p50": percentile(seconds, 0.5),
        "p95": percentile(seconds, 0.95),
        "max": max(seconds),
        "rss_mib": round(peak[0]),
        "pss_mib": round(peak[1]),
    }


def backlog_start(hub: Hub, api: Api, args: argparse.Namespace) -> str:
    """Queue the fact-extraction backlog and upload the long document; its id."""
    rng = random.Random(45)
    started = time.monotonic()
    code = BACKLOG_CODE.format(
        project=PROJECT, cities=CITIES, jobs=JOBS, pets=PETS, count=args.backlog
    )
    written = hub.manage("shell", "-c", code).strip().splitlines()[-1]
    print(
        f"  backlog: {written} fact-extraction tasks queued in {time.monotonic() - started:.0f} s"
    )
    text = text_of_chars(rng, args.document_chars)
    document, _ = api.post(
        "/api/v1/documents/", encode({"text": text, "source": "long.txt"}), expect=202
    )
    return str(document["id"])


def document_state(api: Api, document_id: str) -> str:
    """The document's status and progress: "embedding (120/2300 chunks)"."""
    document = api.get(f"/api/v1/documents/{document_id}/")
    progress = document["progress"]
    return f"{document['status']} ({progress['done']}/{progress['total']} chunks)"


def layout_run(name: str, hub_args: list[str], args: argparse.Namespace) -> dict[str, Any]:
    data_dir = args.data_dir / ("before" if hub_args else "after")
    scratch_reset(data_dir)
    data_dir.mkdir(parents=True)
    models_copy(data_dir)
    hub = Hub(data_dir, free_port(), hub_env(data_dir, 0, 16), hub_args)
    print(f"{name}: starting a hub in {data_dir}", flush=True)
    print(f"  ready in {hub.start(timeout=300):.0f} s", flush=True)
    try:
        api = Api(hub.port, hub.api_key_unthrottled(PROJECT))
        probe = Probe(api, psycopg.connect(hub.database_conninfo(), autocommit=True), hub)
        broker = redis.Redis(unix_socket_path=str(data_dir / "redis" / "redis.sock"))
        measure(probe, 3, "warm-up", 1.0)  # the model loaded in the web and the worker
        result: dict[str, Any] = {"idle": measure(probe, args.messages, "idle", args.interval)}
        document_id = backlog_start(hub, api, args)
        while not document_state(api, document_id).startswith("embedding"):
            time.sleep(0.5)
        result["backlog_at_start"] = queued(broker, DERIVED_QUEUES)
        result["busy"] = measure(probe, args.messages, "busy", args.interval)
        result["backlog_at_end"] = queued(broker, DERIVED_QUEUES)
        result["document_at_end"] = document_state(api, document_id)
        print(f"  idle {result['idle']['seconds']}\n  busy {result['busy']['seconds']}")
        return result
    finally:
        print(f"  stopped: {hub.stop()}", flush=True)


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"\nTime to embedded of a new message, s ({args.messages} messages a phase, one every "
        f"{args.interval:g} s; backlog: "
        f"{args.backlog} fact-extraction tasks and a {args.document_chars / 1e6:g} MB text "
        "document ingesting)"
    )
    print(f"  {'layout':<34} {'phase':<8} {'p50':>6} {'p95':>6} {'max':>6}  RSS/PSS MiB")
    for name, result in results.items():
        for phase in ("idle", "busy"):
            row = result[phase]
            print(
                f"  {name:<34} {phase:<8} {row['p50']:6.2f} {row['p95']:6.2f} {row['max']:6.2f}"
                f"  {row['rss_mib']}/{row['pss_mib']}"
            )
        print(
            f"  {'':<34} backlog {result['backlog_at_start']} -> {result['backlog_at_end']} "
            f"tasks queued, document {result['document_at_end']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20, help="messages timed a phase")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between two")
    parser.add_argument("--backlog", type=int, default=10_000, help="fact-extraction tasks")
    parser.add_argument("--document-chars", type=int, default=4_000_000)
    parser.add_argument("--data-dir", type=Path, default=REPO / "var" / "bench-pools")
    parser.add_argument("--json", type=Path, help="write the figures there too")
    args = parser.parse_args()
    started = time.monotonic()
    results = {name: layout_run(name, hub_args, args) for name, hub_args in LAYOUTS.items()}
    report(results, args)
    print(f"\n(the bench ran {time.monotonic() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
