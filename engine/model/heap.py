"""What the process's heap holds: Redis's used_memory, for maxmemory and INFO memory.

Owns `HeapMeter` (one per process: `meter()`), over the compiled kernel's allocator hooks
(`_heap_c.pyx`; the pure build's twin `_heap_py.py` hooks nothing):

- `used()`: the bytes the interpreter's allocators have handed out and not taken back, counted
  as Redis's zmalloc counts: pymalloc's blocks in use by their size class (a walk of its
  arenas' pool headers, O(arenas)), the malloc'd blocks by malloc_usable_size (O(1)), plus the
  process's footprint when counting began (`base`: the interpreter, its modules and their
  arenas, the resident set at the first `meter()`). Deleting keys lowers it at once, where the
  resident set keeps freed arenas' pages.
- `bound()`: an upper bound in O(1), each arena counted whole (its free blocks too): below the
  limit, nothing needs a walk.

Without the hooks (the pure build, PYTHONMALLOC, dev mode), both are the resident set, read at
most once per `RSS_EVERY_NS`. Not counted: memory C libraries take with malloc directly (LMDB
maps its file; the Lua host counts its own heap), and what arenas made before counting began
hand out later beyond their share of `base`. Must not touch: Python objects' contents.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Final

from streamkeep.engine.wire import kernel_switches

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model import _heap_c as _kernel
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.model import _heap_py as _kernel  # type: ignore[no-redef]
else:
    kernel_switches.loaded(__name__, True)

install = _kernel.install
installed = _kernel.installed
raw_live = _kernel.raw_live
arena_bytes = _kernel.arena_bytes
arena_count = _kernel.arena_count
counted_bound = _kernel.counted_bound
small_used = _kernel.small_used

RSS_EVERY_NS: Final = 10_000_000  # without hooks: the resident set is read at most every 10 ms
_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_set() -> int:
    """The process's resident set size (Linux /proc; 0 where there is none)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def physical_memory() -> int:
    """The machine's physical memory in bytes (0 when it cannot be read)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def _hooks_allowed() -> bool:
    """The allocators are the plain ones the hooks understand: no debug hooks in front of
    malloc (PYTHONMALLOC, dev mode) and a 64-bit CPython of a pool layout the walk knows."""
    return (not os.environ.get("PYTHONMALLOC") and not sys.flags.dev_mode
            and sys.implementation.name == "cpython" and sys.maxsize > 2**32
            and (3, 10) <= sys.version_info[:2] <= (3, 13))


class HeapMeter:
    """The process's used memory (see the module's docstring)."""

    def __init__(self) -> None:
        self.counting = _hooks_allowed() and _kernel.install()
        self.base = resident_set() - (
            _kernel.arena_bytes() + _kernel.raw_live() if self.counting else 0)
        self._rss = self.base
        self._rss_at = 0

    def used(self) -> int:
        """Bytes held now: an exact count with the hooks (a walk of the arenas), else the
        resident set."""
        if not self.counting:
            return self._resident()
        small, _blocks = _kernel.small_used()
        return self.base + small + _kernel.raw_live()

    def bound(self) -> int:
        """An upper bound of `used()` in O(1) (the resident set, read at most every 10 ms,
        without the hooks)."""
        if not self.counting:
            return self._resident()
        return self.base + _kernel.counted_bound()

    def malloced(self) -> int:
        """The malloc'd part of `used()`, exact in O(1) (0 without the hooks)."""
        return _kernel.raw_live() if self.counting else 0

    def _resident(self) -> int:
        now = time.monotonic_ns()
        if now - self._rss_at >= RSS_EVERY_NS:
            self._rss, self._rss_at = resident_set() or self._rss, now
        return self._rss

    def arenas(self) -> int:
        """How many arenas a walk reads (its cost)."""
        return _kernel.arena_count()


_METER: HeapMeter | None = None


def meter() -> HeapMeter:
    """The process's meter, made (and its hooks installed) on first use."""
    global _METER
    if _METER is None:
        _METER = HeapMeter()
    return _METER


__all__ = ["RSS_EVERY_NS", "HeapMeter", "arena_bytes", "arena_count", "counted_bound", "install",
           "installed", "meter", "physical_memory", "raw_live", "resident_set", "small_used"]
