"""The Celery tasks' metrics, counted in the worker processes that run them.

Imported by every worker before it forks its pool (settings.CELERY_IMPORTS), so the
receivers below run in each pool process: ``memoryhub_task_duration_seconds`` (by task
and outcome: SUCCESS, FAILURE, RETRY...), ``memoryhub_task_failures_total`` (by task
and exception class) and ``memoryhub_task_retries_total``.

The pool processes are many and short-lived, so the counters are kept in
prometheus-client's multiprocess files (PROMETHEUS_MULTIPROC_DIR):

* a worker on a machine of its own serves them itself: with METRICS_WORKER_PORT set,
  its main process answers ``GET /metrics`` on METRICS_WORKER_ADDR (127.0.0.1 unless
  set: give the machine's internal address) and that port, adding up its pool
  processes' files (a folder of its own, made at start, when PROMETHEUS_MULTIPROC_DIR
  is not set). Prometheus scrapes each worker as a target of its own;
* on one machine, web and workers given the same PROMETHEUS_MULTIPROC_DIR write to
  the same folder: the web's /metrics then answers the tasks' counters too, and no
  worker port is needed. A second worker on the machine finding the port taken logs
  it and goes on (the one that has it serves the shared folder).
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import time
from typing import Any

# multiprocess mode is chosen when prometheus_client is first imported: a worker that
# serves a port and was given no folder gets one before that
_PORT = os.environ.get("METRICS_WORKER_PORT", "").strip()
_MADE_DIR: str | None = None
if _PORT and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    _MADE_DIR = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="memoryhub-")

from celery.signals import task_failure, task_postrun, task_prerun, task_retry, worker_ready  # noqa: E402
from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess, values  # noqa: E402
from prometheus_client import start_http_server as _start_http_server  # noqa: E402

logger = logging.getLogger(__name__)

if os.environ.get("PROMETHEUS_MULTIPROC_DIR") and values.ValueClass is values.MutexValue:
    values.ValueClass = values.get_value_class()  # imported before the folder was set

# a task runs from milliseconds (a flush) to an hour (a maintenance run)
TASK_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0)

TASK_SECONDS = Histogram(
    "memoryhub_task_duration_seconds",
    "Time a Celery task ran, by task and outcome (its state).",
    ["task", "state"],
    buckets=TASK_BUCKETS,
)
TASK_FAILURES = Counter(
    "memoryhub_task_failures",
    "Celery tasks that raised, by task and exception class.",
    ["task", "exception"],
)
TASK_RETRIES = Counter("memoryhub_task_retries", "Celery task retries, by task.", ["task"])

_started: dict[str, float] = {}


def _task_name(sender: Any) -> str:
    return str(getattr(sender, "name", None) or sender or "unknown")


@task_prerun.connect(dispatch_uid="memoryhub-metrics-task-prerun")
def task_started(task_id: str | None = None, **kwargs: Any) -> None:
    if task_id:
        _started[task_id] = time.perf_counter()


@task_postrun.connect(dispatch_uid="memoryhub-metrics-task-postrun")
def task_ended(
    sender: Any = None, task_id: str | None = None, state: str | None = None, **kwargs: Any
) -> None:
    started = _started.pop(task_id, None) if task_id else None
    if started is not None:
        TASK_SECONDS.labels(_task_name(sender), state or "UNKNOWN").observe(
            time.perf_counter() - started
        )


@task_failure.connect(dispatch_uid="memoryhub-metrics-task-failure")
def task_failed(sender: Any = None, exception: BaseException | None = None, **kwargs: Any) -> None:
    TASK_FAILURES.labels(_task_name(sender), type(exception).__name__).inc()


@task_retry.connect(dispatch_uid="memoryhub-metrics-task-retry")
def task_retried(sender: Any = None, **kwargs: Any) -> None:
    TASK_RETRIES.labels(_task_name(sender)).inc()


@worker_ready.connect(dispatch_uid="memoryhub-metrics-worker-port")
def worker_port_serve(**kwargs: Any) -> None:
    """With METRICS_WORKER_PORT: this worker's main process serves its pool's counters."""
    if _PORT:
        worker_metrics_serve(int(_PORT), os.environ.get("METRICS_WORKER_ADDR", "127.0.0.1"))


def worker_metrics_serve(port: int, addr: str) -> bool:
    """Serve the multiprocess folder's counters on ``addr:port``; False when taken."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    try:
        _start_http_server(port, addr=addr, registry=registry)
    except OSError as error:
        logger.warning(
            "task metrics not served on %s:%d (%s): another process of this machine "
            "serves them if it shares PROMETHEUS_MULTIPROC_DIR",
            addr,
            port,
            error,
        )
        return False
    logger.info("task metrics served on http://%s:%d/metrics", addr, port)
    return True


def _made_dir_remove(owner: int = os.getpid()) -> None:
    if _MADE_DIR and os.getpid() == owner:  # the main process, not a forked pool process
        shutil.rmtree(_MADE_DIR, ignore_errors=True)


atexit.register(_made_dir_remove)
