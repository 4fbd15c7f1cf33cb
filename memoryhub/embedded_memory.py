"""The embedded PostgreSQL's buffer cache (``shared_buffers``): how large, from the
environment or the memory the machine (or its container) has, and setting it on the
server (embedded.postgres_start restarts a new data folder's server once with it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def shared_buffers_mb() -> int:
    """The embedded PostgreSQL's buffer cache: MEMORYHUB_PG_SHARED_BUFFERS_MB, else a
    quarter of the machine's memory or of its container's limit (``memory_total``;
    PostgreSQL's own advice for a server), at least 128 MB (its default) and at most 8
    GB. With the default 128 MB, a context at a user of 100,000 memories in a database
    of 1,000,000 copied ~1,800 pages from the system's cache into it each time (p50 44.5
    -> 41 ms in process with 2 GB); with 2 GB, searches of users of ~9,000 there
    interleaved with unfiltered ones still did (warm, auto / vector p50 ~28 / ~14.2 ms;
    with 6 GB, the 5.7 GB database whole, ~22-25 / ~12). Shared memory is taken as it
    is used, so a small database costs no more (BENCHMARKS.md)."""
    given = os.environ.get("MEMORYHUB_PG_SHARED_BUFFERS_MB", "").strip()
    if given:
        if not given.isdigit():
            raise RuntimeError(
                f"MEMORYHUB_PG_SHARED_BUFFERS_MB must be a whole number of megabytes, not {given!r}"
            )
        return max(16, int(given))
    quarter = memory_total() // 4 // 2**20
    return max(128, min(8192, int(quarter)))


# a container's memory limit (cgroup v2, then v1), as seen from inside it
CGROUP_MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def memory_total() -> int:
    """The machine's memory in bytes, or its container's memory limit when that is lower
    (inside a container psutil sees the host's memory, and a buffer cache sized to it
    would outgrow the limit as it fills)."""
    import psutil

    total = int(psutil.virtual_memory().total)
    for path in CGROUP_MEMORY_LIMITS:
        try:
            limit = Path(path).read_text().strip()
        except OSError:
            continue
        if limit.isdigit():  # "max" (v2) or a huge number (v1): no limit
            total = min(total, int(limit))
        break
    return total


def shared_buffers_size(conn: Any) -> bool:
    """Set the buffer cache to ``shared_buffers_mb()`` in postgresql.auto.conf; whether
    the running server has another size (the setting needs a restart)."""
    wanted = shared_buffers_mb()
    row = conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()
    if row is None or int(row[0]) == wanted * 2**20:
        return False
    conn.execute(f"ALTER SYSTEM SET shared_buffers = '{wanted}MB'")
    return True
