"""Watching the hub under test (bench/stack.py's Hub) while a benchmark runs: peak RSS
and CPU seconds per role (web, worker, postgres, ...) per phase, and the CPU other
processes on the machine used meanwhile."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import psutil

from bench.stack import Hub


class Monitor:
    """Samples the hub's processes every ``interval`` s in a thread: RSS per role and
    CPU use, ours versus the rest of the machine (other sessions share these cores).

    ``runner``, when set, is one more process of ours (with its children), such as
    the mem0 runner of bench/compare_mem0.py."""

    def __init__(self, hub: Hub, interval: float = 1.0, roles_every: float = 5.0) -> None:
        self.hub = hub
        self.interval = interval
        self.roles_every = roles_every  # workers can be replaced: look for them again
        self.phase = "start"
        self.runner: psutil.Process | None = None
        self.peaks: dict[str, dict[str, float]] = {}
        self.cpu: dict[str, dict[str, float]] = {}
        self.roles_cpu: dict[str, dict[str, float]] = {}  # phase -> role -> CPU seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._roles: dict[str, list[psutil.Process]] = {}
        self._roles_at = 0.0
        self._cpu_seen: dict[int, float] = {}

    def start(self) -> None:
        psutil.cpu_times()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _peak(self, phase: str, name: str, value: float) -> None:
        for key in (phase, "all"):
            bucket = self.peaks.setdefault(key, {})
            bucket[name] = max(bucket.get(name, 0.0), value)

    def _runner_processes(self) -> list[psutil.Process]:
        runner = self.runner
        if runner is None:
            return []
        try:
            return [runner, *runner.children(recursive=True)]
        except psutil.Error:
            return []

    def _cpu_since_seen(self, key: int, process: psutil.Process) -> float:
        """CPU seconds the process used since the last sample (0 the first time)."""
        times = process.cpu_times()
        total = times.user + times.system
        used = total - self._cpu_seen.get(key, total)
        self._cpu_seen[key] = total
        return used

    def _sample(self, phase: str) -> float:
        """Record each role's RSS and CPU seconds; returns the CPU seconds our processes
        used since the last sample."""
        ours = 0.0
        roles_cpu = self.roles_cpu.setdefault(phase, {})
        for role, processes in {**self._roles, "runner": self._runner_processes()}.items():
            rss = []
            for process in processes:
                try:
                    rss.append(process.memory_info().rss / 2**20)
                    used = self._cpu_since_seen(process.pid, process)
                except psutil.Error:
                    continue
                ours += used
                roles_cpu[role] = roles_cpu.get(role, 0.0) + used
            if rss:
                self._peak(phase, f"{role}_max_mib", max(rss))
                self._peak(phase, f"{role}_sum_mib", sum(rss))
        mine = self._cpu_since_seen(-1, psutil.Process())  # this process: the clients
        roles_cpu["bench"] = roles_cpu.get("bench", 0.0) + mine
        return ours + mine

    def _run(self) -> None:
        last_busy = busy_seconds()
        while not self._stop.wait(self.interval):
            if time.monotonic() - self._roles_at > self.roles_every:
                self._roles = self.hub.role_processes()
                self._roles_at = time.monotonic()
            phase = self.phase
            ours = self._sample(phase)
            busy = busy_seconds()
            bucket = self.cpu.setdefault(phase, {"wall": 0.0, "busy": 0.0, "ours": 0.0})
            bucket["wall"] += self.interval
            bucket["busy"] += busy - last_busy
            bucket["ours"] += ours
            last_busy = busy

    def foreign_cpu(self, phase: str) -> float | None:
        """Cores' worth of CPU other processes used during a phase (0 = we had the machine)."""
        bucket = self.cpu.get(phase)
        if not bucket or not bucket["wall"]:
            return None
        return max(0.0, bucket["busy"] - bucket["ours"]) / bucket["wall"]

    def cores_by_role(self, phase: str) -> dict[str, float]:
        """Cores' worth of CPU each role of ours used during a phase (web, postgres,
        worker, ..., bench: this process)."""
        wall = self.cpu.get(phase, {}).get("wall")
        if not wall:
            return {}
        used = self.roles_cpu.get(phase, {}).items()
        return {role: round(seconds / wall, 2) for role, seconds in sorted(used) if seconds}

    def report(self) -> dict[str, dict[str, Any]]:
        """Per phase: seconds, our CPU seconds, and busy, our and foreign cores."""
        out = {}
        for phase, bucket in self.cpu.items():
            if bucket["wall"]:
                out[phase] = {
                    "seconds": bucket["wall"],
                    "ours_cpu_seconds": round(bucket["ours"], 1),
                    "roles_cpu_seconds": {
                        role: round(used, 1)
                        for role, used in sorted(self.roles_cpu.get(phase, {}).items())
                        if used
                    },
                    "busy_cores": round(bucket["busy"] / bucket["wall"], 2),
                    "ours_cores": round(bucket["ours"] / bucket["wall"], 2),
                    "foreign_cores": round(
                        max(0.0, bucket["busy"] - bucket["ours"]) / bucket["wall"], 2
                    ),
                }
        return out

    def quiet_wait(self, limit: float, threshold: float, seconds: float = 3.0) -> float:
        """Wait up to ``limit`` s until other processes use under ``threshold`` cores
        over ``seconds`` (the hub's and our own work does not count, unlike
        quiet_wait()); returns the cores they used last. The monitor must be running."""
        deadline = time.monotonic() + limit
        phase, self.phase = self.phase, "waiting for quiet"
        try:
            while True:
                before = dict(self.cpu.get(self.phase, {"wall": 0.0, "busy": 0.0, "ours": 0.0}))
                time.sleep(seconds)
                after = self.cpu.get(self.phase, before)
                wall = after["wall"] - before["wall"]
                used = after["busy"] - before["busy"] - (after["ours"] - before["ours"])
                foreign = max(0.0, used) / wall if wall else 0.0
                if foreign < threshold or time.monotonic() > deadline:
                    return foreign
                print(
                    f"  waiting for a quiet machine: other processes use {foreign:.2f} cores",
                    flush=True,
                )
        finally:
            self.phase = phase


def quiet_wait(limit: float, threshold: float = 0.3) -> float:
    """Wait up to ``limit`` s for the machine to be quiet (under ``threshold`` cores busy
    over 5 s); returns the busy cores last seen."""
    deadline = time.monotonic() + limit
    while True:
        busy = psutil.cpu_percent(interval=5) / 100 * (os.cpu_count() or 1)
        if busy < threshold or time.monotonic() > deadline:
            return busy
        print(f"  waiting for a quiet machine: {busy:.2f} cores busy", flush=True)


def busy_seconds() -> float:
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)
