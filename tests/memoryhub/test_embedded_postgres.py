"""The embedded PostgreSQL's buffer cache: sized to the machine at the first start."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memoryhub import embedded_memory


def test_the_buffer_cache_is_a_quarter_of_memory_within_bounds(monkeypatch):
    class Memory:
        def __init__(self, total):
            self.total = total

    monkeypatch.delenv("MEMORYHUB_PG_SHARED_BUFFERS_MB", raising=False)
    monkeypatch.setattr(embedded_memory, "CGROUP_MEMORY_LIMITS", ())
    for gib, expected in [(0.25, 128), (2, 512), (8, 2048), (24, 6144), (256, 8192)]:
        monkeypatch.setattr("psutil.virtual_memory", lambda gib=gib: Memory(int(gib * 2**30)))
        assert embedded_memory.shared_buffers_mb() == expected, gib
    monkeypatch.setenv("MEMORYHUB_PG_SHARED_BUFFERS_MB", "300")
    assert embedded_memory.shared_buffers_mb() == 300
    monkeypatch.setenv("MEMORYHUB_PG_SHARED_BUFFERS_MB", "2GB")
    with pytest.raises(RuntimeError, match="MEMORYHUB_PG_SHARED_BUFFERS_MB .* not '2GB'"):
        embedded_memory.shared_buffers_mb()


def test_a_containers_memory_limit_bounds_the_buffer_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("MEMORYHUB_PG_SHARED_BUFFERS_MB", raising=False)
    monkeypatch.setattr("psutil.virtual_memory", lambda: type("M", (), {"total": 64 * 2**30}))
    limit = tmp_path / "memory.max"
    paths = (str(tmp_path / "absent"), str(limit))
    monkeypatch.setattr(embedded_memory, "CGROUP_MEMORY_LIMITS", paths)
    limit.write_text(f"{4 * 2**30}\n")  # a container limited to 4 GiB on a 64 GiB host
    assert embedded_memory.shared_buffers_mb() == 1024
    limit.write_text("max\n")  # cgroup v2: no limit
    assert embedded_memory.shared_buffers_mb() == 8192
    limit.write_text("9223372036854771712\n")  # cgroup v1: no limit
    assert embedded_memory.shared_buffers_mb() == 8192


def test_a_new_data_folders_server_runs_with_the_size(tmp_path):
    script = (
        "from memoryhub import embedded\n"
        "server = embedded.postgres_start()\n"
        "import psycopg\n"
        "with psycopg.connect(server.url) as conn:\n"
        "    print(conn.execute('SHOW shared_buffers').fetchone()[0])\n"
    )
    env = {
        **os.environ,
        "MEMORYHUB_DATA_DIR": str(tmp_path),
        "MEMORYHUB_PG_SHARED_BUFFERS_MB": "144",
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "144MB"
