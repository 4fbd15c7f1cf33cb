"""`manage.py workers`: what each worker runs and for how long, how long each queue's
oldest task has waited, each ok/amber/red with the reason; for operators and their
monitoring (``--json``; ``--check`` exits 0 ok, 1 amber, 2 red, 3 Redis unreachable,
as a Nagios-style check does)."""

from __future__ import annotations

import json
import time
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.services.worker_health import (
    LEVELS,
    HealthReport,
    QueueHealth,
    WorkerHealth,
    health_report,
)

UNREACHABLE = 3
MARKS = {"ok": "ok   ", "amber": "AMBER", "red": "RED  "}


class Command(BaseCommand):
    help = (
        "Show each Celery worker's running tasks and each queue's oldest waiting task, "
        "ok/amber/red with the reason (--json for monitoring, --check for an exit status)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="one JSON document")
        parser.add_argument(
            "--check", action="store_true", help="exit 0 ok, 1 amber, 2 red, 3 no Redis"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = health_report()
        except redis.RedisError as error:
            if not options["check"]:
                raise CommandError(f"Redis unreachable: {error}") from error
            self.stderr.write(f"Redis unreachable: {error}")
            raise SystemExit(UNREACHABLE) from error
        if options["json"]:
            data = {"checked_at": time.time(), **report.as_dict(inputs=True)}
            self.stdout.write(json.dumps(data, indent=2))
        else:
            self.stdout.write("\n".join(report_lines(report)))
        if options["check"] and report.status != "ok":
            raise SystemExit(LEVELS.index(report.status))


def report_lines(report: HealthReport) -> list[str]:
    """The report for a person: workers and their tasks, queues, then the reasons."""
    lines = [f"Health: {report.status}", "", "Workers"]
    for worker in [*report.workers, *report.lost]:
        lines += _worker_lines(worker)
    if not report.workers and not report.lost:
        lines.append("  none: no worker has sent a heartbeat")
    lines += ["", "Queues"]
    lines += [_queue_line(queue) for queue in report.queues]
    if report.reasons:
        lines += ["", "Why"]
        lines += [f"  {reason}" for reason in report.reasons]
    return lines


def _worker_lines(worker: WorkerHealth) -> list[str]:
    seen = f"seen {worker.age_words} ago"
    takes = ", ".join(worker.queues) if worker.queues is not None else "all queues"
    state = "" if worker.alive else "  LOST"
    lines = [f"  {MARKS[worker.status]} {worker.hostname:<28} {seen:<16} takes {takes}{state}"]
    if worker.alive and not worker.running:
        lines.append("          idle")
    for task in worker.running:
        limit = f" (soft limit {task.soft_limit_words})" if task.soft_limit else ""
        runs = f"runs {task.task}[{task.id}]({task.input})"
        lines.append(f"    {MARKS[task.status]} {runs} for {task.duration}{limit}")
    return lines


def _queue_line(queue: QueueHealth) -> str:
    oldest = queue.oldest_words or "-"
    scheduled = f", {queue.scheduled} scheduled for later" if queue.scheduled else ""
    waiting = f"{queue.length:,} waiting"
    head = f"  {MARKS[queue.status]} {queue.name:<12} {waiting:<14}"
    return f"{head} oldest {oldest:<8} ({queue.limits_words}){scheduled}"
