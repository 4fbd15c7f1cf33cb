"""Giving a process's freed memory back to the system.

glibc's malloc keeps what a process frees for its next allocations, and returns it
only from the top of the heap; a one-off peak of small allocations (a model session
made, a tokenizer's ranks read, a user's codes loaded in parts) leaves the process
that much larger for good. ``malloc_trim(0)`` returns every free page: ~0.3 ms when
there is little to give back. Called after such peaks, never per request. Elsewhere
than glibc (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from functools import cache


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def heap_trim() -> bool:
    """Return the process's free heap pages to the system; False where malloc has no
    malloc_trim."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
