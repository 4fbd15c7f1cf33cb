"""The metrics read at scrape time from PostgreSQL and Redis (memoryhub/metrics.py
serves them): what every web process answers alike, wherever the work runs.

* the queues (services/worker_health.py, what /ready/ details): each one's length, the
  age of its oldest waiting task, the tasks taken for a countdown or ETA, its live
  consumers; the live and lost workers and the tasks they run;
* the embedding backlog (pending memories, the oldest one's age: the partial index
  memory_embedding_pending) and time-to-embedded over the memories created in the last
  TIME_TO_EMBEDDED_WINDOW (at most TIME_TO_EMBEDDED_ROWS of the newest: the index
  memory_created, a bounded read whatever the table's size);
* the database: the connections to it by state (pg_stat_activity; Django keeps one
  persistent connection per thread, CONN_MAX_AGE, so that is the pool's use) against
  max_connections;
* each read replica's lag, asked of it now with the router's own query
  (memoryhub/replicas.py), and whether it answered.

A source that fails (Redis down, a replica stopped) drops its own series and sets its
``memoryhub_metrics_source_up`` to 0: the scrape still answers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator

from django.conf import settings
from django.db import connections
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from memories.services.worker_health import health_report
from memoryhub import replicas

logger = logging.getLogger(__name__)

TIME_TO_EMBEDDED_WINDOW = "10 minutes"
TIME_TO_EMBEDDED_ROWS = 1000
QUANTILES = (0.5, 0.95, 1.0)

_BACKLOG_SQL = """
SELECT count(*), EXTRACT(EPOCH FROM now() - min(created_at))
FROM memories_memory WHERE embedding_status = 'pending'
"""
_TIME_TO_EMBEDDED_SQL = f"""
SELECT percentile_cont(ARRAY{list(QUANTILES)}) WITHIN GROUP (ORDER BY seconds), count(*)
FROM (
    SELECT EXTRACT(EPOCH FROM embedded_at - created_at) AS seconds, embedding_status
    FROM memories_memory
    WHERE created_at > now() - interval '{TIME_TO_EMBEDDED_WINDOW}'
    ORDER BY created_at DESC, id DESC LIMIT {TIME_TO_EMBEDDED_ROWS}
) AS recent
WHERE embedding_status = 'done' AND seconds IS NOT NULL
"""
_CONNECTIONS_SQL = """
SELECT coalesce(state, 'unknown'), count(*) FROM pg_stat_activity
WHERE datname = current_database() GROUP BY 1
"""


def gauge(name: str, doc: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


class StateCollector(Collector):
    """Collected at each scrape; each source on its own (one failing spares the rest)."""

    def collect(self) -> Iterator[Metric]:
        sources: dict[str, Callable[[], list[Metric]]] = {
            "queues": queue_metrics,
            "embedding": embedding_metrics,
            "database": database_metrics,
            "replicas": replica_metrics,
        }
        up = gauge("memoryhub_metrics_source_up", "1 when the source answered.", ["source"])
        for name, source in sources.items():
            started = time.perf_counter()
            try:
                found = source()
            except Exception as error:  # noqa: BLE001 - the rest of the scrape stands
                logger.warning("metrics: %s not read: %s", name, error)
                found = []
                up.add_metric([name], 0)
            else:
                up.add_metric([name], 1)
            yield from found
            logger.debug("metrics: %s read in %.1f ms", name, (time.perf_counter() - started) * 1e3)
        yield up


def queue_metrics() -> list[Metric]:
    """The queues and workers as /ready/ judges them (one read of Redis)."""
    report = health_report()
    length = gauge("memoryhub_queue_length", "Tasks waiting in the queue.", ["queue"])
    oldest = gauge(
        "memoryhub_queue_oldest_task_age_seconds",
        "How long the queue's oldest waiting task has waited (0: none waits).",
        ["queue"],
    )
    scheduled = gauge(
        "memoryhub_queue_scheduled", "Tasks a worker holds for a countdown or ETA.", ["queue"]
    )
    consumers = gauge("memoryhub_queue_consumers", "Live workers taking the queue.", ["queue"])
    for queue in report.queues:
        length.add_metric([queue.name], queue.length)
        oldest.add_metric([queue.name], queue.oldest_seconds or 0.0)
        scheduled.add_metric([queue.name], queue.scheduled)
        consumers.add_metric([queue.name], len(queue.consumers))
    workers = gauge("memoryhub_workers", "Celery workers by state.", ["state"])
    workers.add_metric(["alive"], len(report.workers))
    workers.add_metric(["lost"], len(report.lost))
    running = gauge("memoryhub_worker_running_tasks", "Tasks the live workers run now.")
    running.add_metric([], sum(len(worker.running) for worker in report.workers))
    return [length, oldest, scheduled, consumers, workers, running]


def embedding_metrics() -> list[Metric]:
    with connections["default"].cursor() as cursor:
        cursor.execute(_BACKLOG_SQL)
        pending, oldest = cursor.fetchone() or (0, None)
        cursor.execute(_TIME_TO_EMBEDDED_SQL)
        quantiles, embedded = cursor.fetchone() or (None, 0)
    backlog = gauge("memoryhub_embedding_backlog", "Memories waiting for their embedding.")
    backlog.add_metric([], pending)
    age = gauge(
        "memoryhub_embedding_backlog_oldest_seconds",
        "Age of the oldest memory waiting for its embedding (0: none waits).",
    )
    age.add_metric([], float(oldest or 0.0))
    window = TIME_TO_EMBEDDED_WINDOW.replace(" ", "_")
    took = gauge(
        "memoryhub_time_to_embedded_seconds",
        f"From a memory's write to its embedding, over those written in the last {window}.",
        ["quantile"],
    )
    for quantile, seconds in zip(QUANTILES, quantiles or [], strict=False):
        if seconds is not None:
            took.add_metric([str(quantile)], float(seconds))
    count = gauge(
        "memoryhub_time_to_embedded_memories",
        f"Embedded memories the time-to-embedded quantiles are over (last {window}).",
    )
    count.add_metric([], embedded)
    return [backlog, age, took, count]


def database_metrics() -> list[Metric]:
    with connections["default"].cursor() as cursor:
        cursor.execute(_CONNECTIONS_SQL)
        by_state = cursor.fetchall()
        cursor.execute("SELECT current_setting('max_connections')::int")
        row = cursor.fetchone()
    used = gauge(
        "memoryhub_database_connections",
        "Connections to the hub's database (all its processes), by state.",
        ["state"],
    )
    for state, count in by_state:
        used.add_metric([str(state)], count)
    limit = gauge("memoryhub_database_max_connections", "The server's max_connections.")
    limit.add_metric([], row[0] if row else 0)
    mine = gauge(
        "memoryhub_database_process_connections",
        "Database connections this web process holds open (persistent: CONN_MAX_AGE).",
    )
    mine.add_metric([], sum(1 for c in connections.all(initialized_only=True) if c.connection))
    return [used, limit, mine]


def replica_metrics() -> list[Metric]:
    """Each replica's replay lag, asked of it now (the router asks once a second per
    process, and only while reads come): 0 when it replayed all it received."""
    lag = gauge(
        "memoryhub_replica_lag_seconds",
        "How far the replica's replay is behind (0: it replayed all it received).",
        ["replica"],
    )
    up = gauge("memoryhub_replica_up", "1 when the replica answered the lag query.", ["replica"])
    for alias in settings.DATABASE_REPLICAS:
        try:
            with connections[alias].cursor() as cursor:
                cursor.execute(replicas._LAG_SQL)
                row = cursor.fetchone()
        except Exception as error:  # noqa: BLE001 - a stopped replica is a 0, not a failure
            logger.info("metrics: replica %s does not answer: %s", alias, error)
            connections[alias].close()
            up.add_metric([alias], 0)
            continue
        up.add_metric([alias], 1)
        if row is not None and row[0] is not None:
            lag.add_metric([alias], float(row[0]))
    return [lag, up]
