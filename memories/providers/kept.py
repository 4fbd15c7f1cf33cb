"""Values a web process keeps for a few seconds rather than read them again with every
request: each for a while, at most so many (all forgotten when full)."""

from __future__ import annotations

import threading
import time
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class Kept(Generic[V]):
    """Values by key, each for ``seconds`` (0: none kept), at most ``limit`` of them."""

    def __init__(self, seconds: float, limit: int = 10_000) -> None:
        self.seconds, self.limit = seconds, limit
        self._values: dict[Any, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> V | None:
        kept = self._values.get(key)
        return kept[1] if kept is not None and kept[0] > time.monotonic() else None

    def put(self, key: Any, value: V) -> None:
        if self.seconds <= 0:
            return
        with self._lock:
            if len(self._values) >= self.limit:
                self._values.clear()
            self._values[key] = (time.monotonic() + self.seconds, value)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
