"""The heap's meter, pure Python: the twin of `_heap_c.pyx` for the pure build, which cannot
hook the interpreter's allocators. It counts nothing itself: `install` says so, and the
facade (engine.model.heap) reads the resident set instead. The same functions, each an honest
zero. Must not touch: anything but answering for the compiled kernel's absence.
"""

from __future__ import annotations


def install() -> bool:
    """No hook can be installed from Python: False (the facade measures the resident set)."""
    return False


def installed() -> bool:
    return False


def raw_live() -> int:
    return 0


def arena_bytes() -> int:
    return 0


def arena_count() -> int:
    return 0


def counted_bound() -> int:
    return 0


def small_used() -> tuple[int, int]:
    return 0, 0
