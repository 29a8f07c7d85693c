"""What Redis's allocations cost, for the MEMORY USAGE estimates of the packed and hashed
types: jemalloc's size classes and an sds string's allocation.

Owns the two functions; the estimates themselves (what a value is made of) are each type's.
Must not touch: anything else (pure arithmetic).
"""

from __future__ import annotations


def jemalloc_size(size: int) -> int:
    """The size class jemalloc serves `size` bytes from: 8, then 16-byte steps to 128, then
    four classes per doubling (a distribution's jemalloc, as Debian's redis-server links it;
    Redis's own build uses 8-byte steps to 64, which moves an estimate by at most 8 bytes)."""
    if size <= 8:
        return 8
    if size <= 128:
        return (size + 15) & ~15
    step = 1 << ((size - 1).bit_length() - 3)
    return (size + step - 1) & ~(step - 1)


def sds_alloc(size: int) -> int:
    """An sds string's allocation: the smallest header that fits, the bytes, the NUL."""
    header = 1 if size < 32 else 3 if size < 256 else 5 if size < 65536 else 9
    return jemalloc_size(header + size + 1)


__all__ = ["jemalloc_size", "sds_alloc"]
