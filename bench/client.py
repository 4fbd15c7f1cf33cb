"""A timed API client on one persistent HTTP connection, and percentile helpers."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any

# gunicorn closes an idle keep-alive connection after 2 s; reconnect before that
# (outside the timed part) rather than time a reconnect or a retry
IDLE_RECONNECT_SECONDS = 1.5


class ApiError(Exception):
    pass


def server_timing(header: str | None) -> dict[str, float]:
    """The hub's ``Server-Timing`` as {metric: ms} (app, db, cpu; empty without it)."""
    metrics = {}
    for metric in (header or "").split(","):
        name, _, params = metric.strip().partition(";")
        if params.startswith("dur="):
            metrics[name] = float(params[4:])
    return metrics


class Api:
    def __init__(self, port: int, key: str) -> None:
        self.port = port
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self.connection: http.client.HTTPConnection | None = None
        self.last_used = 0.0
        self.reconnects_after_error = 0
        self.server_timing: dict[str, float] = {}  # the last response's Server-Timing

    def _connect(self) -> http.client.HTTPConnection:
        if self.connection is not None:
            self.connection.close()
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        self.connection.connect()
        return self.connection

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any, float]:
        """(status, decoded JSON, milliseconds from sending the request to the last byte)."""
        connection = self.connection
        if connection is None or time.monotonic() - self.last_used > IDLE_RECONNECT_SECONDS:
            connection = self._connect()
        try:
            started = time.perf_counter()
            connection.request(method, path, body=body, headers=self.headers)
            response = connection.getresponse()
            raw = response.read()
            elapsed = (time.perf_counter() - started) * 1000
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # should not happen (see IDLE_RECONNECT_SECONDS); counted, and the sample dropped
            self.reconnects_after_error += 1
            self.connection = None
            return self.call(method, path, body)
        self.last_used = time.monotonic()
        self.server_timing = server_timing(response.headers.get("Server-Timing"))
        return response.status, json.loads(raw) if raw else None, elapsed

    def post(self, path: str, body: bytes, expect: int = 201) -> tuple[Any, float]:
        status, data, elapsed = self.call("POST", path, body)
        if status != expect:
            raise ApiError(f"POST {path}: {status} {str(data)[:500]}")
        return data, elapsed

    def get_timed(self, path: str, expect: int = 200) -> tuple[Any, float]:
        status, data, elapsed = self.call("GET", path)
        if status != expect:
            raise ApiError(f"GET {path}: {status} {str(data)[:500]}")
        return data, elapsed

    def get(self, path: str) -> Any:
        return self.get_timed(path)[0]

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


def encode(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def percentile(values: list[float], fraction: float) -> float | None:
    """Linear-interpolated percentile (fraction 0..1) of the values; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: list[float]) -> dict[str, Any]:
    """n, p50, p95, p99, max and mean, rounded to 0.01."""

    def r(value: float | None) -> float | None:
        return None if value is None else round(value, 2)

    return {
        "n": len(values),
        "p50": r(percentile(values, 0.50)),
        "p95": r(percentile(values, 0.95)),
        "p99": r(percentile(values, 0.99)),
        "max": r(max(values)) if values else None,
        "mean": r(sum(values) / len(values)) if values else None,
    }
