"""How many searches a web process runs at once (settings.SEARCH_CONCURRENCY).

A search is CPU work (the query's embedding, PostgreSQL's queries, the ranking); a
write is a few milliseconds of it. With a thread per request and no bound, searches
beyond what the cores can run only slow each other and every write beside them; with
a thread pool as small as the cores, a write queues behind searches for a thread.
So web processes have many threads (WEB_THREADS) and searches wait here for one of
SEARCH_CONCURRENCY slots, holding a thread but no CPU, while a write always finds a
free thread and only the bounded searches to share the cores with.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, Protocol, TypeVar

from django.conf import settings
from django.db import connection

from memories.models import Memory
from memories.providers.read_database import on_database, read_database
from memories.providers.threads import StepThreads, search_nice


class Timed(Protocol):
    timings_ms: dict[str, float]


P = ParamSpec("P")
R = TypeVar("R", bound=Timed)


class SearchSlots:
    """``limit`` slots handed out first come, first served: a freed slot goes straight
    to the longest waiter, never to a search that arrives meanwhile (a semaphore lets
    newcomers overtake, and the searches overtaken make the p95)."""

    def __init__(self, limit: int) -> None:
        self.free = limit
        self.waiters: deque[threading.Event] = deque()
        self.lock = threading.Lock()

    def acquire(self) -> None:
        with self.lock:
            if self.free and not self.waiters:
                self.free -= 1
                return
            turn = threading.Event()
            self.waiters.append(turn)
        turn.wait()  # set by release(), which hands this thread its slot

    def release(self) -> None:
        with self.lock:
            if self.waiters:
                self.waiters.popleft().set()
            else:
                self.free += 1


_lock = threading.Lock()
_slots: dict[int, SearchSlots] = {}


def _slots_for(limit: int) -> SearchSlots:
    with _lock:
        if limit not in _slots:  # one per limit: a test may change the setting
            _slots[limit] = SearchSlots(limit)
        return _slots[limit]


def searches_waiting() -> bool:
    """Whether searches of this process are waiting for a slot: its share of the cores
    is taken."""
    with _lock:
        slots = list(_slots.values())
    return any(s.waiters for s in slots)


@contextmanager
def search_slot(timings: dict[str, float]) -> Iterator[None]:
    """Hold one of the process's SEARCH_CONCURRENCY search slots (0: no bound) for the
    block; records ``search_wait`` (ms spent waiting for it) in ``timings``."""
    limit = int(settings.SEARCH_CONCURRENCY)
    if limit <= 0:
        yield
        return
    slots = _slots_for(limit)
    start = time.perf_counter()
    slots.acquire()
    timings["search_wait"] = (time.perf_counter() - start) * 1000
    try:
        yield
    finally:
        slots.release()


# the threads searches run on below writes' priority, one per slot (threads.py)
_searches = StepThreads("search", lambda: int(settings.SEARCH_CONCURRENCY))


def search_threads_close() -> None:
    """Stop the searches' threads, closing their connections (tests)."""
    _searches.close()


def slotted(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` run in a search slot, on one of the slots' lowered threads when
    SEARCH_NICE is set (threads.py; on the caller's thread inside a transaction, whose
    uncommitted rows another connection could not see), on the database the request's
    reads go to (a read replica or the primary); its result's timings_ms gain
    ``search_wait``, which its ``total`` then includes."""

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        waited: dict[str, float] = {}
        # the search threads are as many as the slots: with no bound (0), none
        threaded = int(settings.SEARCH_CONCURRENCY) > 0 and search_nice()
        # on a read replica when the request's reads go to one (read_database.py)
        with search_slot(waited), on_database(read_database(Memory)):
            if threaded and not connection.in_atomic_block:
                step = functools.partial(function, *args, **kwargs)
                result = _searches.submit(step).result()[0]
            else:
                result = function(*args, **kwargs)
        if waited:
            result.timings_ms.update(waited)
            if "total" in result.timings_ms:
                result.timings_ms["total"] += waited["search_wait"]
        return result

    return run
