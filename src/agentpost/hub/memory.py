"""Giving the memory a hub freed back to the system (docs/operations.md "Memory").

CPython's objects of over 512 bytes (request bodies, answers, uploads held in memory, SQLite's
pages) come from the C allocator. glibc keeps what they free in its heaps for reuse, and a
heap shrinks only from its top: after months of posts of every size the hub's resident memory
is its peak plus the holes between what is still live, not what it uses. `malloc_trim(0)`
hands every whole free page back (madvise), wherever it lies. The sweeper calls it after each
sweep, at most once every `every` seconds, on a worker thread. It does not hold the GIL, but
it holds the allocator's lock while it walks the heap, and the event loop's larger
allocations wait for it: a trim that took over 50 ms is logged, with how long. On a libc
without it (musl, macOS) it does nothing.

`AGENTPOST_MALLOC_TRIM=0` turns it off (bench/soak.py records which; bench/README.md has a
run of each side by side).
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
from collections.abc import Callable

log = logging.getLogger("agentpost.hub")
SLOW_TRIM_SECONDS = 0.05


def _malloc_trim() -> Callable[[int], int] | None:
    try:  # the symbols the process has loaded: its libc's, with no ldconfig to run
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    trim: Callable[[int], int] = fn
    return trim


class Trimmer:
    """`give_back()` at most once every `every` seconds; `enabled` false where the libc has no
    `malloc_trim` or the operator turned it off."""

    def __init__(self, every: float = 30.0, enabled: bool | None = None) -> None:
        if enabled is None:
            enabled = os.environ.get("AGENTPOST_MALLOC_TRIM", "1") != "0"
        self._trim = _malloc_trim() if enabled else None
        self.every = every
        self._last = float("-inf")
        self.trims = 0

    @property
    def enabled(self) -> bool:
        return self._trim is not None

    def due(self, now: float | None = None) -> bool:
        return self.enabled and (now if now is not None else time.monotonic()) - self._last >= (
            self.every
        )

    def give_back(self) -> bool:
        """Trim now (blocking: call it on a worker thread); whether memory was released."""
        if self._trim is None:
            return False
        started = time.monotonic()
        released = bool(self._trim(0))
        self._last = time.monotonic()
        self.trims += 1
        took = self._last - started
        if took > SLOW_TRIM_SECONDS:
            log.info("memory trim took %.0f ms (the loop's larger allocations waited)", took * 1e3)
        return released
