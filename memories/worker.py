"""Celery worker boot: each pool process's setup, the heartbeat bootstep, the retry policy
of the tasks an event queues. Imported by the Celery app before Django is set up: it
imports no model (the model check at start-up is services.embedding.embedding_model_check)."""

from __future__ import annotations

import gc
import logging
import os
from pathlib import Path
from typing import Any

from celery import bootsteps
from django.conf import settings
from django.db import InterfaceError, OperationalError, connections

from memories.providers.embeddings import torch_threads_set
from memories.providers.threads import search_nice
from memories.services.workers import HEARTBEAT_INTERVAL, worker_heartbeat

logger = logging.getLogger(__name__)

AUTOGROUP = Path("/proc/self/autogroup")

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
    """Write this worker's heartbeat to Redis every few seconds (read by /ready/)."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.tref = None

    def start(self, worker: Any) -> None:
        self.hostname = worker.hostname
        self.beat()
        self.tref = worker.timer.call_repeatedly(HEARTBEAT_INTERVAL, self.beat)

    def beat(self) -> None:
        try:
            worker_heartbeat(hostname=self.hostname)
        except Exception as exc:  # noqa: BLE001 - Redis down: the broker reconnect logs it too
            logger.warning("heartbeat failed: %s", exc)

    def stop(self, worker: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()
