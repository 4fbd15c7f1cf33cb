"""Threads that run searches' steps below the priority of writes.

A web process answers writes and searches on the same cores. When searches keep the
cores busy, a write of a few milliseconds of CPU waits for its turn behind them. So a
search's work runs on threads of their own (one per search slot, slots.py; the vector
lane's, lane.py; the query embedding's) whose priority is lowered by SEARCH_NICE
(Linux nice levels; 0: searches run on the request's thread, at its priority): the
scheduler runs a write's thread, and the PostgreSQL backends it waits on, as soon as
they can run, and searches take what is left, which on a busy machine is nearly all.
The Celery worker stays below searches (memories/worker.py).

Python runs one thread at a time in a process (the GIL): a write's thread that the
scheduler wakes may still wait for a search's thread to hand the GIL on. That is the
part of a write's wait this does not remove (BENCHMARKS.md).

A nice level only ever goes up for an unprivileged process, so the threads are
dedicated: a request's thread never lowers itself. Each keeps its own database
connection between steps, as request threads do.

Lowering searches' PostgreSQL backends too was measured and not kept (BENCHMARKS.md):
it changed nothing alone and made the writes' tail worse beside the threads.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from django.conf import settings
from django.db import close_old_connections, connections

from memories.providers.read_database import current_database, on_database

logger = logging.getLogger(__name__)

T = TypeVar("T")


def search_nice() -> int:
    """How far searches' threads are lowered (0: not at all, nor on threads of their
    own); Linux only."""
    return max(0, int(settings.SEARCH_NICE)) if sys.platform == "linux" else 0


# The query embedding's thread runs this many levels below the search's own: the search
# thread's work between its statements is short, and at one level the scheduler often
# woke it on the core the embedding held and let it wait there: a search's first
# statement took the embedding's ~3.5 ms instead of ~1.5 (one client, LoCoMo questions:
# HTTP p50 ~17.5 -> ~16.5 ms, BENCHMARKS.md). Above the worker's processes
# (SEARCH_NICE + EMBEDDING_WORKER_NICE), which it preempts while they embed a batch.
EMBEDDING_BELOW_SEARCH = 4


def thread_priority_lower(below: int = 0) -> None:
    """Set the calling thread's nice level to SEARCH_NICE (plus ``below``) above its
    process's (its main thread's). Absolute, not relative: a thread started by a lowered
    thread (the vector lane's and the query embedding's, started by a search) inherits
    its level."""
    if not (amount := search_nice()):
        return
    thread = threading.get_native_id()
    try:
        target = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + amount + below)
        if os.getpriority(os.PRIO_PROCESS, thread) < target:
            os.setpriority(os.PRIO_PROCESS, thread, target)
    except OSError as error:  # e.g. a sandbox that forbids it: searches run as before
        logger.debug("could not lower the priority of thread %s: %s", thread, error)


class StepThreads:
    """``count()`` threads named ``name``, each with its own database connection, that
    run the steps submitted to them in the order they came, at the lowered priority."""

    def __init__(self, name: str, count: Callable[[], int]) -> None:
        self.name, self.count = name, count
        self._lock = threading.Lock()
        self._tasks: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any], str] | None] | None
        self._tasks = None
        self._threads: list[threading.Thread] = []

    def submit(self, step: Callable[[], T]) -> Future[tuple[T, float]]:
        """``step`` run on one of the threads: its result and its milliseconds."""
        done: Future[tuple[T, float]] = Future()
        # on the caller's database: a search on a read replica runs its steps there too
        self._tasks_get().put((step, done, current_database()))
        return done

    def close(self) -> None:
        """Stop the threads, each closing its database connection (a test database
        cannot be dropped while a session uses it); the next step starts them again."""
        with self._lock:
            tasks, threads, self._tasks = self._tasks, list(self._threads), None
            self._threads.clear()
        if tasks is None:
            return
        for _ in threads:
            tasks.put(None)  # each thread takes one and stops
        for thread in threads:
            thread.join()

    def _tasks_get(self) -> queue.SimpleQueue[tuple[Callable[[], Any], Future[Any], str] | None]:
        with self._lock:
            if self._tasks is None:
                self._tasks = queue.SimpleQueue()
                for number in range(max(1, self.count())):
                    thread = threading.Thread(
                        target=_serve,
                        args=(self._tasks,),
                        name=f"{self.name}-{number}",
                        daemon=True,
                    )
                    thread.start()
                    self._threads.append(thread)
            return self._tasks


def _serve(tasks: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any], str] | None]) -> None:
    thread_priority_lower()
    try:
        while (task := tasks.get()) is not None:
            step, done, database = task
            # a connection broken since the last step (a restarted server) is replaced
            close_old_connections()
            start = time.perf_counter()
            try:
                with on_database(database):
                    result = step()
                done.set_result((result, (time.perf_counter() - start) * 1000))
            except BaseException as error:  # the submitting thread re-raises it
                done.set_exception(error)
    finally:
        connections.close_all()  # the replica's too
