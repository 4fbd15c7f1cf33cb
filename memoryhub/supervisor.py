"""Supervision for `manage.py hub`: what dies is started again, with backoff.

The hub runs the web server, a Celery worker and Celery beat as child processes beside
the embedded PostgreSQL and Redis. A Supervisor polls them twice a second. One that
died is logged (what, how it ended, which attempt, where its log is) and started again
after 0.5 s, then 1, 2, 4 ... up to 30 s while it keeps failing; once it has stayed up
for ``stable_after`` seconds the backoff starts over. A service that fails
``give_up_failures`` times within ``give_up_window`` seconds will not get better by
itself (a broken configuration, a full disk): the supervisor gives up with a message
naming it and its log, and the hub stops everything.

A child that needs PostgreSQL or Redis (the worker and beat do) is not started again
while they do not answer, and its deaths then do not count towards giving up: beat,
for one, exits when the database goes away, and must simply come back with it.

Every service's state goes to a small JSON file in the data folder (hub-state.json),
which /ready/ reads to say what is recovering.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

STATE_FILE = "hub-state.json"
STATE_MAX_AGE = 10.0  # seconds: an older file is a hub that no longer runs


class SupervisorGaveUp(Exception):
    """A service kept failing; the message says which, how, and where its log is."""


@dataclass(frozen=True)
class RestartPolicy:
    first_delay: float = 0.5
    max_delay: float = 30.0
    give_up_failures: int = 5
    give_up_window: float = 60.0
    stable_after: float = 30.0  # seconds up after which a new failure is attempt 1 again

    def delay(self, attempt: int) -> float:
        """Seconds to wait before restart number ``attempt`` (1, 2, ...)."""
        return float(min(self.max_delay, self.first_delay * 2 ** max(0, attempt - 1)))


class Service(Protocol):
    """Something the supervisor keeps running."""

    name: str
    log_path: Path
    needs: tuple[str, ...]  # the dependencies (probe names) it cannot start without

    def start(self) -> None: ...

    def ended(self) -> str | None:
        """None while it runs, else how it ended ("killed by signal 9 (SIGKILL)")."""

    def pid(self) -> int | None: ...

    def stop_begin(self) -> None:
        """Ask it to stop (returns at once: every service is asked before any is waited on)."""

    def stop(self) -> None:
        """Stop it and wait until it has."""


def exit_description(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown"
        return f"killed by signal {-returncode} ({name})"
    return f"exited with code {returncode}"


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - 16384))
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# --- dependencies -----------------------------------------------------------------------


class Probe:
    """A dependency checked every ``interval`` s in a thread of its own: a check that
    hangs (a stopped server) makes the result stale, and stale counts as down."""

    def __init__(self, name: str, check: Callable[[], None], interval: float = 1.0) -> None:
        self.name, self.check, self.interval = name, check, interval
        self.error: str | None = "not checked yet"
        self.checked_at = 0.0
        self._stop = threading.Event()

    def start(self) -> None:
        self.run_once()
        threading.Thread(target=self._loop, name=f"probe-{self.name}", daemon=True).start()

    def run_once(self) -> None:
        try:
            self.check()
            self.error = None
        except Exception as exc:  # noqa: BLE001 - any failure means down; it is reported
            self.error = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        self.checked_at = time.monotonic()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.run_once()

    @property
    def ok(self) -> bool:
        fresh = time.monotonic() - self.checked_at < 3 * self.interval + 1
        return fresh and self.error is None

    def stop(self) -> None:
        self._stop.set()


# --- the supervisor ---------------------------------------------------------------------


@dataclass
class Watch:
    """What the supervisor knows of one service."""

    service: Service
    state: str = "up"  # up, restarting (waiting out its backoff), waiting (on a dependency)
    attempt: int = 0  # failures since it last stayed up for stable_after seconds
    restarts: int = 0
    failures: deque[float] = field(default_factory=deque)  # counted towards giving up
    restart_at: float = 0.0
    up_since: float = 0.0
    last_exit: str | None = None
    waiting_for: tuple[str, ...] = ()
    since: float = field(default_factory=time.time)  # wall clock of its last change of state
    pid: int | None = None


class Supervisor:
    """Keeps services running; see the module docstring for the rules."""

    def __init__(
        self,
        *,
        probes: Sequence[Probe] = (),
        state_path: Path | None = None,
        say: Callable[[str], None] = print,
        policy: RestartPolicy = RestartPolicy(),
        interval: float = 0.5,
    ) -> None:
        self.probes = {probe.name: probe for probe in probes}
        self.state_path, self.say, self.policy, self.interval = state_path, say, policy, interval
        self.watches: dict[str, Watch] = {}
        self.status = "running"
        self._written: tuple[float, str] = (0.0, "")

    def watch(self, service: Service, *, start: bool = True) -> None:
        """Supervise ``service``, starting it first unless it already runs."""
        if start:
            service.start()
        self.watches[service.name] = Watch(
            service=service, up_since=time.monotonic(), pid=service.pid()
        )

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set; raises SupervisorGaveUp when a service keeps failing."""
        for probe in self.probes.values():
            probe.start()
        try:
            while not stop.is_set():
                self.poll(stop)
                # not stop.wait(): a signal handler that sets the event while this thread
                # holds the event's lock (inside wait) would deadlock on it
                time.sleep(self.interval)
        except SupervisorGaveUp:
            self.status = "gave up"
            raise
        finally:
            self.state_write(force=True)

    def poll(self, stop: threading.Event | None = None) -> None:
        """One look at every service: note the dead, restart those whose time has come."""
        down = {name for name, probe in self.probes.items() if not probe.ok}
        for watch in self.watches.values():
            if stop is not None and stop.is_set():
                break  # Ctrl-C: what dies now is being stopped, not failing
            now = time.monotonic()
            if watch.state == "up":
                ended = watch.service.ended()
                if ended is None:
                    if watch.attempt and now - watch.up_since >= self.policy.stable_after:
                        watch.attempt = 0
                    self._pid_check(watch)
                    continue
                self._failed(watch, ended, now, blamed=down & set(watch.service.needs))
            elif now >= watch.restart_at:
                self._restart(watch, now, missing=down & set(watch.service.needs))
        self.state_write()

    def _failed(self, watch: Watch, how: str, now: float, *, blamed: set[str]) -> None:
        name, log = watch.service.name, watch.service.log_path
        watch.last_exit, watch.attempt = how, watch.attempt + 1
        if not blamed:
            watch.failures.append(now)
            while watch.failures and watch.failures[0] < now - self.policy.give_up_window:
                watch.failures.popleft()
            if len(watch.failures) >= self.policy.give_up_failures:
                watch.state = "failed"
                tail = log_tail(log)
                raise SupervisorGaveUp(
                    f"{name} failed {len(watch.failures)} times within "
                    f"{self.policy.give_up_window:.0f} s (last: {how}); giving up. "
                    f"Its log: {log}" + (f"\n--- last lines of {log} ---\n{tail}" if tail else "")
                )
        delay = self.policy.delay(watch.attempt)
        watch.state, watch.restart_at, watch.since = "restarting", now + delay, time.time()
        because = f" ({', '.join(sorted(blamed))} down)" if blamed else ""
        self.say(f"{name} {how}{because}; restart {watch.attempt} in {delay:g} s (log: {log})")

    def _restart(self, watch: Watch, now: float, *, missing: set[str]) -> None:
        name = watch.service.name
        if missing:
            if watch.waiting_for != tuple(sorted(missing)):
                self.say(f"{name} waits for {', '.join(sorted(missing))} before it starts again")
            if watch.state != "waiting":
                watch.state, watch.since = "waiting", time.time()
            watch.waiting_for = tuple(sorted(missing))
            return
        watch.waiting_for = ()
        try:
            watch.service.start()
        except Exception as exc:  # noqa: BLE001 - a failed start is a failure like a crash
            self._failed(watch, f"could not start: {exc}", now, blamed=set())
            return
        watch.state, watch.up_since, watch.since = "up", time.monotonic(), time.time()
        watch.restarts, watch.pid = watch.restarts + 1, watch.service.pid()
        self.say(f"{name} started again (pid {watch.pid}, restart {watch.restarts})")

    def _pid_check(self, watch: Watch) -> None:
        """A server restarted by someone else between two looks (pg_ctl restart) is
        noted, not counted."""
        pid = watch.service.pid()
        if pid != watch.pid:
            self.say(f"{watch.service.name} now runs as pid {pid} (restarted outside the hub)")
            watch.pid, watch.since = pid, time.time()

    def stop_all(self) -> None:
        """Stop every service: all are asked at once, then waited for, the last watched
        first (the hub watches the servers before the processes that use them)."""
        self.status = "stopping"
        self.state_write(force=True)
        for probe in self.probes.values():
            probe.stop()
        services = [watch.service for watch in reversed(self.watches.values())]
        for service in services:
            with contextlib.suppress(Exception):
                service.stop_begin()
        for service in services:
            try:
                service.stop()
            except Exception as exc:  # noqa: BLE001 - stop the others all the same
                self.say(f"{service.name} did not stop cleanly: {exc}")
        if self.state_path is not None:
            self.state_path.unlink(missing_ok=True)  # nothing runs: /ready/ must not read it

    def snapshot(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "status": self.status,
            "services": {
                name: {
                    "state": watch.state,
                    "pid": watch.service.pid() if watch.state == "up" else None,
                    "restarts": watch.restarts,
                    "last_exit": watch.last_exit,
                    "waiting_for": list(watch.waiting_for),
                    "since": round(watch.since, 3),
                    "log": str(watch.service.log_path),
                }
                for name, watch in self.watches.items()
            },
            "dependencies": {
                name: {"ok": probe.ok, "error": probe.error} for name, probe in self.probes.items()
            },
        }

    def state_write(self, *, force: bool = False) -> None:
        """Write the snapshot when it changed, and every 2 s so readers see it is fresh."""
        if self.state_path is None:
            return
        text = json.dumps(self.snapshot(), sort_keys=True)
        now = time.monotonic()
        if not force and text == self._written[1] and now - self._written[0] < 2.0:
            return
        state = {**json.loads(text), "updated_at": time.time()}
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state, indent=1))
        temporary.replace(self.state_path)  # readers never see half a file
        self._written = (now, text)


def hub_state_read(folder: Path, max_age: float = STATE_MAX_AGE) -> dict[str, Any] | None:
    """The state a running hub writes, or None (no hub, or it stopped long ago)."""
    try:
        state: dict[str, Any] = json.loads((folder / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if time.time() - float(state.get("updated_at", 0)) > max_age:
        return None
    return state
