"""The vector lane: a fused search's vector step on a thread of its own, with its own
database connection, while the request's thread runs the keyword step and the
neighbours; the two meet in the ranking.

Both steps are PostgreSQL work of tens of milliseconds on a large filtered set (one
user's 100,000 memories, or 10,000 of a project of 1,000,000), and one connection runs
one statement at a time: in sequence a search waits for the sum of the two, in two
lanes for the longer. What the lane cannot know in advance, the cosine distances of
the keyword candidates that the vector step did not find, takes one more short
statement after it (``neighbours_and_distances``).

Used for filtered sets of at least RETRIEVAL_VECTOR_LANE_MIN_ROWS rows (0: never);
below that both steps take a few milliseconds and the extra statement would cost what
the overlap saves. Not while other searches of the process wait for a slot: then the
cores have other work and overlap saves nothing. Never inside a transaction (a
test's, or a command's): the lane's connection could not see its uncommitted rows.
The lane's threads (one per search slot of the process, see slots.py) keep their
connections between searches, as the request threads do, and run below the priority
of writes (threads.py).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from django.conf import settings
from django.db import connection

from memories.providers.threads import StepThreads
from memories.services.search.slots import searches_waiting

T = TypeVar("T")

# one thread per search slot of the process (slots.py)
_lanes = StepThreads("vector-lane", lambda: int(settings.SEARCH_CONCURRENCY))


def vector_lane_applies(size: int) -> bool:
    """Whether a fused search of a filtered set of ``size`` rows runs its vector step in
    the lane: not while other searches wait for a slot (the cores are busy, and the
    lane would only add its statement)."""
    minimum = int(settings.RETRIEVAL["VECTOR_LANE_MIN_ROWS"])
    return 0 < minimum <= size and not connection.in_atomic_block and not searches_waiting()


def vector_lane_submit(step: Callable[[], T]) -> Future[tuple[T, float]]:
    """``step`` run in the lane: its result and its milliseconds."""
    return _lanes.submit(step)


def vector_lanes_close() -> None:
    """Stop the lane's threads, each closing its database connection (a test database
    cannot be dropped while a session uses it); the next search starts them again."""
    _lanes.close()
