"""Celery worker boot: each pool process's setup, the heartbeat bootstep, the retry policy
of the tasks an event queues. Imported by the Celery app before Django is set up: it
imports no model (the model check at start-up is services.embedding.embedding_model_check).

The Celery app (memoryhub/celery.py) imports this module in every process (web, worker,
beat, commands): importing services.queues here connects its before_task_publish
receiver there, so every task message sent carries its send time (a queue's age)."""

from __future__ import annotations

import gc
import logging
import os
import time
from pathlib import Path
from typing import Any

from celery import bootsteps
from celery.worker import state as worker_state
from django.conf import settings
from django.db import InterfaceError, OperationalError, connections

from memories.providers.embeddings import torch_threads_set
from memories.providers.threads import search_nice
from memories.services.queues import task_message_stamp  # noqa: F401 - see the docstring
from memories.services.workers import (
    HEARTBEAT_INTERVAL,
    task_input_words,
    worker_heartbeat,
    worker_heartbeat_stop,
)

logger = logging.getLogger(__name__)

AUTOGROUP = Path("/proc/self/autogroup")
RUNNING_CHECK_SECONDS = 1.0

# Options of the tasks that an event queues (a write's facts, a room's summary, the
# reads' flush, the embedding run): a database error that passes (a connection that
# timed out under load, a deadlock with a maintenance task) retries the task with a
# backoff of 2, 4, 8, ... s (at most 300, jittered) rather than leaving the work to
# the next sweep, a minute or more later. The tasks are safe to run again.
DATABASE_RETRY: dict[str, Any] = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 2,
    "retry_backoff_max": 300,
    "retry_jitter": True,
}


def autogroup_nice(nice: int, autogroup: Path = AUTOGROUP) -> bool:
    """Give this process's session the nice value ``nice``; False where the kernel has
    no autogroups (or refuses).

    With autogroup scheduling (CONFIG_SCHED_AUTOGROUP, on in most distributions'
    kernels) the CPU is shared fairly between sessions first, and a process's own nice
    value only ranks it within its session. The hub starts the worker in a session of
    its own, so os.nice() alone left it a full share beside the web server: a session's
    group takes its nice value from /proc/<pid>/autogroup (raising it needs no
    privilege). Only a worker leading its own session does so (the hub starts it so):
    one started from a shell would lower everything else in that shell's session too."""
    if nice <= 0 or os.getsid(0) != os.getppid():
        return False
    try:
        autogroup.write_text(str(nice))
    except OSError:
        return False
    return True


def worker_process_setup(**kwargs: Any) -> None:
    """In each pool process: torch threads, CPU priority, garbage-collector freeze."""
    connections.close_all()  # never share the parent's database connection
    torch_threads_set(settings.EMBEDDING["TORCH_THREADS"] or None)
    # background work yields the CPU to the web processes on a shared machine: writes
    # and searches must stay fast while a backlog is embedded. Searches run SEARCH_NICE
    # below writes (providers/threads.py): the worker's processes stay WORKER_NICE below
    # them; its session, which the kernel weighs against the web's, WORKER_NICE below
    # the web's (where writes and searches are one session, ranked inside it)
    os.nice(min(19, search_nice() + settings.EMBEDDING["WORKER_NICE"]))
    autogroup_nice(settings.EMBEDDING["WORKER_NICE"])
    gc.freeze()  # the model's objects live as long as the process: never rescan them


class HeartbeatStep(bootsteps.StartStopStep):
    """Write this worker's heartbeat to Redis (read by /ready/, the console's overview
    and `manage.py workers`): its queues and the tasks its pool runs now.

    It runs in the worker's main process, which prefork's pool processes tell when a
    task starts (Request.on_accepted) and ends: celery.worker.state.active_requests is
    exact there, and a pool process killed at its hard limit leaves nothing behind. The
    set is checked every RUNNING_CHECK_SECONDS and written when it changed (a task that
    starts shows within a second), otherwise every HEARTBEAT_INTERVAL."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.tref = None
        self.written: tuple[float, frozenset[str]] = (0.0, frozenset())

    def start(self, worker: Any) -> None:
        self.hostname = worker.hostname
        self.conf = worker.app.conf
        self.info = {
            "pid": os.getpid(),
            "queues": sorted(worker.app.amqp.queues.consume_from),
            "concurrency": worker.concurrency,
        }
        self.beat()
        self.tref = worker.timer.call_repeatedly(RUNNING_CHECK_SECONDS, self.check)

    def check(self) -> None:
        """Beat now if the running tasks changed or the last beat is due for renewal."""
        running = frozenset(request.id for request in list(worker_state.active_requests))
        at, written = self.written
        if running != written or time.monotonic() - at >= HEARTBEAT_INTERVAL:
            self.beat()

    def beat(self) -> None:
        requests = [r for r in list(worker_state.active_requests) if r.time_start is not None]
        self.written = (time.monotonic(), frozenset(request.id for request in requests))
        try:
            running = sorted((task_running(r, self.conf) for r in requests), key=_start)
            worker_heartbeat(hostname=self.hostname, info={**self.info, "running": running})
        except Exception as exc:  # noqa: BLE001 - Redis down: the broker reconnect logs it too
            logger.warning("heartbeat failed: %s", exc)

    def stop(self, worker: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()
            try:
                worker_heartbeat_stop(hostname=self.hostname)
            except Exception as exc:  # noqa: BLE001 - Redis down: the record expires
                logger.warning("heartbeat not cleared: %s", exc)


def task_running(request: Any, conf: Any) -> dict[str, Any]:
    """What the heartbeat says of one running task (a celery Request): its name, id,
    queue, input (ids only), start, pool process and time limits. The limits are the
    ones the pool enforces: the message's own, else the task's, else the app's."""
    hard, soft = request.time_limits
    task = request.task
    return {
        "task": request.name,
        "id": request.id,
        "queue": (request.delivery_info or {}).get("routing_key"),
        "input": task_input_words(request.args or (), request.kwargs or {}),
        "started_at": request.time_start,
        "pid": request.worker_pid,
        "soft_limit": soft or task.soft_time_limit or conf.task_soft_time_limit or None,
        "hard_limit": hard or task.time_limit or conf.task_time_limit or None,
    }


def _start(running: dict[str, Any]) -> float:
    return float(running["started_at"])
