"""Worker health: each worker, each task it runs and each queue judged ok, amber or red,
with the reason in words. What /ready/ details, the console's overview shows and
`manage.py workers` prints; read from the heartbeats (services/workers.py) and the
broker (services/queues.py).

A running task is amber past WORKER_TASK_AMBER_SHARE of its soft time limit (the one
its pool enforces: the task's own, else CELERY_TASK_SOFT_TIME_LIMIT) and red past the
limit itself. A queue is amber or red when its oldest waiting task has waited longer
than its pair in WORKER_QUEUE_AGE_LIMITS, and red when no live worker takes it. A
worker is amber when its heartbeat is late, red when it stopped (lost)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings

from memories.services.queues import QueueReading, oldest_waiting, queue_readings
from memories.services.workers import (
    HEARTBEAT_INTERVAL,
    worker_heartbeats,
    workers_lost,
)

OK, AMBER, RED = "ok", "amber", "red"
LEVELS = (OK, AMBER, RED)
HEARTBEAT_LATE = 2 * HEARTBEAT_INTERVAL  # a beat missed: amber (the live record lasts 3)
# (amber, red) seconds for a queue's oldest waiting task. Embedding ("default") is
# tight: a new memory is found by keyword only until it is embedded. An embedding run
# lasts up to EMBEDDING_RUN_SECONDS (60) and the next one waits for it: red past that
# and a half. Derived memory and documents may wait minutes; maintenance (pruning,
# importance) runs for up to an hour a task, and nothing a user waits for queues there.
QUEUE_AGE_LIMITS: dict[str, tuple[float, float]] = {
    "default": (30.0, 90.0),
    "derived": (300.0, 1800.0),
    "ingestion": (300.0, 1800.0),
    "maintenance": (3600.0, 4 * 3600.0),
}
OTHER_QUEUE_AGE_LIMITS = (300.0, 1800.0)


@dataclass(frozen=True)
class Limits:
    """The thresholds, from settings over the defaults above: WORKER_QUEUE_AGE_LIMITS
    (a dict, or the environment's "queue=amber/red" items, comma-separated) and
    WORKER_TASK_AMBER_SHARE."""

    queue_age: dict[str, tuple[float, float]]
    task_amber_share: float

    @classmethod
    def from_settings(cls) -> Limits:
        configured: str | dict[str, tuple[float, float]] = settings.WORKER_QUEUE_AGE_LIMITS or {}
        if isinstance(configured, str):
            configured = queue_age_limits_parse(configured)
        share = settings.WORKER_TASK_AMBER_SHARE
        return cls({**QUEUE_AGE_LIMITS, **configured}, float(share))

    def for_queue(self, name: str) -> tuple[float, float]:
        amber, red = self.queue_age.get(name, OTHER_QUEUE_AGE_LIMITS)
        return float(amber), float(red)


def queue_age_limits_parse(given: str) -> dict[str, tuple[float, float]]:
    """The (amber, red) seconds by queue of items like "derived=600/3600,default=20/60";
    ValueError naming an item that is not <queue>=<amber>/<red> with amber <= red."""
    found = {}
    for item in filter(None, (part.strip() for part in given.split(","))):
        name, _, value = item.partition("=")
        amber, _, red = value.partition("/")
        try:
            pair = (float(amber), float(red))
        except ValueError:
            pair = (1.0, 0.0)
        if not name.strip() or pair[0] > pair[1]:
            raise ValueError(f"WORKER_QUEUE_AGE_LIMITS: {item!r} is not <queue>=<amber>/<red>")
        found[name.strip()] = pair
    return found


@dataclass
class TaskHealth:
    """A task a worker runs now."""

    task: str
    id: str
    queue: str | None
    input: str  # ids only (services/workers.py task_input_words)
    seconds: float
    soft_limit: float | None
    hard_limit: float | None
    status: str = OK
    reason: str = ""

    @property
    def duration(self) -> str:
        return duration_words(self.seconds)

    @property
    def soft_limit_words(self) -> str:
        return duration_words(self.soft_limit) if self.soft_limit else ""


@dataclass
class WorkerHealth:
    """A worker as its last heartbeat shows it; ``alive`` False: it stopped beating."""

    hostname: str
    age_seconds: float
    alive: bool
    pid: int | None = None
    queues: list[str] | None = None  # None: a heartbeat that does not say (all of them)
    concurrency: int | None = None
    running: list[TaskHealth] = field(default_factory=list)
    status: str = OK
    reasons: list[str] = field(default_factory=list)

    @property
    def age_words(self) -> str:
        return duration_words(self.age_seconds)


@dataclass
class QueueHealth:
    """A queue: its length, how long its oldest task has waited, who takes it."""

    name: str
    length: int
    oldest_seconds: float | None
    amber_seconds: float
    red_seconds: float
    scheduled: int  # taken by a worker, waiting for a countdown or ETA (not counted above)
    consumers: list[str]
    status: str = OK
    reasons: list[str] = field(default_factory=list)

    @property
    def oldest_words(self) -> str:
        return "" if self.oldest_seconds is None else duration_words(self.oldest_seconds)

    @property
    def limits_words(self) -> str:
        amber, red = duration_words(self.amber_seconds), duration_words(self.red_seconds)
        return f"amber over {amber}, red over {red}"


@dataclass
class HealthReport:
    """Every worker (live, then lost) and every queue, judged."""

    workers: list[WorkerHealth]
    lost: list[WorkerHealth]
    queues: list[QueueHealth]

    @property
    def judged(self) -> list[WorkerHealth | QueueHealth]:
        return [*self.workers, *self.lost, *self.queues]

    @property
    def status(self) -> str:
        return worst(item.status for item in self.judged)

    @property
    def reasons(self) -> list[str]:
        return [reason for _, reason in self.findings]

    @property
    def findings(self) -> list[tuple[str, str]]:
        """(status, reason) of each thing that is not ok: workers, lost ones, queues."""
        return [(item.status, reason) for item in self.judged for reason in item.reasons]

    def as_dict(self, *, inputs: bool) -> dict[str, Any]:
        """The report as JSON; without ``inputs`` no task's input (ids of a tenant's
        rows) is in it: what a public endpoint may show."""
        data: dict[str, Any] = {
            "status": self.status,
            "reasons": self.reasons,
            "workers": [asdict(worker) for worker in self.workers],
            "lost": [asdict(worker) for worker in self.lost],
            "queues": {queue.name: asdict(queue) for queue in self.queues},
        }
        if not inputs:
            for worker in data["workers"]:
                for task in worker["running"]:
                    task.pop("input")
        return data


def worst(statuses: Iterable[str]) -> str:
    """The worst of ``statuses`` (ok when there is none)."""
    return max(statuses, key=LEVELS.index, default=OK)


def duration_words(seconds: float) -> str:
    """95 s, 2 min 30 s, 12 min, 2 h 5 min: precise where a limit is near."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 600:
        minutes, rest = divmod(int(seconds), 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    minutes = int(seconds / 60 + 0.5)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def health_report(*, alive: list[dict[str, Any]] | None = None) -> HealthReport:
    """Workers and queues as Redis holds them now, judged against the settings'
    thresholds; ``alive``: the live heartbeats if the caller read them already.
    Raises redis.RedisError when Redis does not answer."""
    now = time.time()
    limits = Limits.from_settings()
    alive = worker_heartbeats() if alive is None else alive
    workers = [worker_judge(heartbeat, now=now, limits=limits) for heartbeat in alive]
    lost = [
        lost_judge(heartbeat) for heartbeat in workers_lost(alive=[w.hostname for w in workers])
    ]
    queues = [queue_judge(r, workers=workers, now=now, limits=limits) for r in queue_readings()]
    return HealthReport(workers=workers, lost=lost, queues=queues)


def worker_judge(heartbeat: dict[str, Any], *, now: float, limits: Limits) -> WorkerHealth:
    """A live worker from its heartbeat: amber when the beat is late, and each running
    task judged against its soft limit."""
    worker = _worker(heartbeat, alive=True)
    for running in heartbeat.get("running") or []:
        worker.running.append(task_judge(running, hostname=worker.hostname, now=now, limits=limits))
    if worker.age_seconds > HEARTBEAT_LATE:
        worker.status = AMBER
        worker.reasons.append(_silent(worker))
    for task in worker.running:
        if task.reason:
            worker.reasons.append(task.reason)
    worker.status = worst([worker.status, *(task.status for task in worker.running)])
    return worker


def lost_judge(heartbeat: dict[str, Any]) -> WorkerHealth:
    """A worker whose heartbeat stopped without a clean stop: red, naming what it ran."""
    worker = _worker(heartbeat, alive=False)
    was = sorted({str(running.get("task")) for running in heartbeat.get("running") or []})
    worker.reasons.append(_silent(worker) + (f" (it was running {', '.join(was)})" if was else ""))
    worker.status = RED
    return worker


def _silent(worker: WorkerHealth) -> str:
    return f"no heartbeat from {worker.hostname} for {worker.age_words}"


def _worker(heartbeat: dict[str, Any], *, alive: bool) -> WorkerHealth:
    return WorkerHealth(
        hostname=heartbeat["hostname"],
        age_seconds=heartbeat["age_seconds"],
        alive=alive,
        pid=heartbeat.get("pid"),
        queues=heartbeat.get("queues"),
        concurrency=heartbeat.get("concurrency"),
    )


def task_judge(running: dict[str, Any], *, hostname: str, now: float, limits: Limits) -> TaskHealth:
    """A running task: amber past the share of its soft limit, red past the limit (and
    said so when it outlived its hard limit, at which the pool should have killed it)."""
    task = TaskHealth(
        task=str(running.get("task")),
        id=str(running.get("id")),
        queue=running.get("queue"),
        input=str(running.get("input", "")),
        seconds=round(max(0.0, now - float(running["started_at"])), 1),
        soft_limit=running.get("soft_limit"),
        hard_limit=running.get("hard_limit"),
    )
    if not task.soft_limit:
        return task
    runs = f"{hostname} runs {task.task} for {task.duration}"
    limit = task.soft_limit_words
    if task.hard_limit and task.seconds > task.hard_limit:
        hard = duration_words(task.hard_limit)
        task.status, task.reason = RED, f"{runs}, past its {hard} hard limit: it was not stopped"
    elif task.seconds > task.soft_limit:
        task.status, task.reason = RED, f"{runs}, past its {limit} soft limit"
    elif task.seconds > task.soft_limit * limits.task_amber_share:
        share = f"{limits.task_amber_share:.0%}"
        task.status, task.reason = AMBER, f"{runs}, over {share} of its {limit} soft limit"
    return task


def queue_judge(
    reading: QueueReading, *, workers: list[WorkerHealth], now: float, limits: Limits
) -> QueueHealth:
    """A queue: red when no live worker takes it, amber/red by its oldest task's wait."""
    running = [task.id for worker in workers for task in worker.running]
    amber, red = limits.for_queue(reading.name)
    queue = QueueHealth(
        name=reading.name,
        length=reading.length,
        oldest_seconds=oldest_waiting(reading, running=running, now=now),
        amber_seconds=amber,
        red_seconds=red,
        scheduled=sum(1 for m in reading.taken if m.eta is not None and m.eta > now),
        consumers=[w.hostname for w in workers if w.queues is None or reading.name in w.queues],
    )
    if not queue.consumers:
        waiting = f", {queue.length} waiting" if queue.length else ""
        queue.status = RED
        queue.reasons.append(f"queue {queue.name}: no live worker takes it{waiting}")
    age = queue.oldest_seconds
    if age is not None and age > amber:
        level = RED if age > red else AMBER
        queue.status = worst([queue.status, level])
        queue.reasons.append(
            f"queue {queue.name}: oldest task waiting {queue.oldest_words} ({queue.limits_words})"
        )
    return queue
