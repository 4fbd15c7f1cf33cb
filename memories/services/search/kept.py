"""What a web process keeps of a filtered set between searches: values that cost a
statement to read and hardly move (a large set's estimated size, its BM25 mean length),
each for a while, at most so many sets (all forgotten when full: an agent searches the
same user turn after turn, and a process that serves more sets than that reads them
again)."""

from __future__ import annotations

import threading
import time
from typing import Any, Generic, TypeVar

from memories.models import Project
from memories.services.search.filters import SearchFilters

V = TypeVar("V")


class Kept(Generic[V]):
    """Values by key, each for ``seconds``, at most ``limit`` of them."""

    def __init__(self, seconds: float, limit: int = 10_000) -> None:
        self.seconds, self.limit = seconds, limit
        self._values: dict[Any, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> V | None:
        kept = self._values.get(key)
        return kept[1] if kept is not None and kept[0] > time.monotonic() else None

    def put(self, key: Any, value: V) -> None:
        with self._lock:
            if len(self._values) >= self.limit:
                self._values.clear()
            self._values[key] = (time.monotonic() + self.seconds, value)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


def set_key(project: Project, filters: SearchFilters) -> str:
    """A filtered set's key: its WHERE clause and parameters."""
    where, params = filters.sql(project)
    return repr((where, sorted(params.items())))
