"""heap_trim gives a process's freed heap pages back to the system (glibc)."""

import subprocess
import sys

import pytest
from django.conf import settings

HOLES = """
from memories.providers.heap import heap_trim

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024

# 100 MiB of 2 KiB blocks (malloc's, not Python's small-object arenas); every 20th
# kept, so the freed ones are holes inside the heap that free() cannot return
blocks = [bytes(2048) for _ in range(50_000)]
kept = blocks[::20]
del blocks
before = rss()
print(heap_trim(), before - rss())
"""


def test_freed_holes_in_the_heap_go_back_to_the_system():
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's malloc_trim and /proc: Linux")
    done = subprocess.run(
        [sys.executable, "-c", HOLES], cwd=settings.BASE_DIR, capture_output=True, text=True,
        timeout=60, env={"MALLOC_ARENA_MAX": "2", "PATH": ""},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    trimmed, returned_mib = done.stdout.split()
    assert trimmed == "True"
    assert int(returned_mib) > 50
