"""Pausing Python's cyclic garbage collector while a discovery batch builds its objects.

    collection_paused()   a context manager; automatic collection is off inside it

A cold discovery of a thousand skills builds tens of thousands of small objects (strings,
mappings, frozen values) that all survive. Every 700 allocations the collector wakes up and
scans the young ones, promotes them, and scans them again one generation up; in a process that
already holds a large heap (an agent with its SDK loaded), the allocations can also tip it into
a full collection of everything. None of that finds garbage: the batch's objects are all alive.
Pausing automatic collection for the batch and restoring it afterwards leaves one young
collection to pay once the batch is done.

The pause is process-wide, so it is shared: batches may overlap (on several threads, or on the
event loop and a worker thread), and collection comes back only when the last one ends, and only
if it was enabled when the first one began. An application that disabled the collector itself
keeps it disabled.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collection_paused"]


class _SharedPause:
    """How many batches are inside the pause, and the collector's state before the first."""

    __slots__ = ("_holders", "_lock", "_was_enabled")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._was_enabled = False

    def enter(self) -> None:
        with self._lock:
            if self._holders == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._holders += 1

    def leave(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders == 0 and self._was_enabled:
                gc.enable()


_PAUSE = _SharedPause()


@contextmanager
def collection_paused() -> Iterator[None]:
    """Turn automatic garbage collection off for the duration of the block.

    Use it around synchronous work only (no ``await`` inside), so that the pause lasts as long
    as the work and never as long as some other task's wait.
    """
    _PAUSE.enter()
    try:
        yield
    finally:
        _PAUSE.leave()
