"""Listpack sizes, the pure-Python reference of `engine.model.listpack` (compiled twin:
`_listpack_c.pyx`; both are tested on the same inputs).

Redis starts a new stream node when `listpack bytes + new element bytes >=
stream-node-max-bytes`; to split nodes where Redis does, the engine computes the size each
entry would take in Redis's listpack encoding (src/listpack.c: an element's encoding plus its
backlen, integers in the smallest of 7/13/16/24/32/64-bit forms).

Must not touch: anything but the sizes (no stream, node or engine state).
"""

from __future__ import annotations

_U64 = (1 << 64) - 1


def int_size(v: int) -> int:
    """Bytes a listpack integer element takes, backlen included."""
    if 0 <= v <= 127:
        return 2
    if -4096 <= v <= 4095:
        return 3
    if -32768 <= v <= 32767:
        return 4
    if -8388608 <= v <= 8388607:
        return 5
    if -(1 << 31) <= v < (1 << 31):
        return 6
    return 10


def as_int(s: bytes) -> int | None:
    """The integer a listpack would store `s` as (Redis's string2ll: optional '-', no leading
    zeros, no '+' or spaces, int64), or None when it is stored as a string."""
    if not s or len(s) > 20 or not s.isascii():
        return None
    body = s[1:] if s[:1] == b"-" else s
    if not body.isdigit() or (body[:1] == b"0" and (len(body) > 1 or s[:1] == b"-")):
        return None
    v = int(s)
    return v if -(1 << 63) <= v < (1 << 63) else None


def str_size(s: bytes) -> int:
    """Bytes a listpack element holding `s` takes: as an integer when it is one, else its
    string encoding (6/12/32-bit length header) plus the backlen."""
    n = len(s)
    if n < 63 and (n == 0 or n > 20 or not (47 < s[0] < 58 or s[0] == 45)):
        return n + 2  # no digit or '-' first, or too long: a short string, never an integer
    iv = as_int(s)
    if iv is not None:
        return int_size(iv)
    size = n + (1 if n < 64 else 2 if n < 4096 else 5)
    if size <= 127:
        return size + 1
    if size < 16383:
        return size + 2
    if size < 2097151:
        return size + 3
    if size < 268435455:
        return size + 4
    return size + 5


def _delta_size(delta: int) -> int:
    """An ID part's delta from the master entry's, as a signed 64-bit listpack integer
    (Redis subtracts in uint64 arithmetic, so a delta wraps)."""
    delta &= _U64
    return int_size(delta - (1 << 64) if delta >= (1 << 63) else delta)


def entry_size(master_ms: int, master_seq: int, master_fields: tuple[bytes, ...], ms: int,
               seq: int, fields: tuple[bytes, ...]) -> int:
    """Bytes one entry `ms-seq` with flat `fields` (name, value, ...) adds to a node whose
    master entry is `master_ms-master_seq` with field names `master_fields`: flags, the two
    ID deltas, then the values alone when the field names are the master's (the same-fields
    flag), else the field count, names and values; last, the entry's element count."""
    dms, dseq = ms - master_ms, seq - master_seq
    # flags; each delta most often 0..127 (one byte plus its backlen)
    size = (2 + (2 if 0 <= dms <= 127 else _delta_size(dms))
            + (2 if 0 <= dseq <= 127 else _delta_size(dseq)))
    n = len(fields) >> 1
    if n == 1 and len(master_fields) == 1 and fields[0] == master_fields[0]:
        return size + str_size(fields[1]) + 2  # the commonest entry; its count (4): 2 bytes
    if n == len(master_fields) and fields[0::2] == master_fields:
        for value in fields[1::2]:
            size += str_size(value)
        return size + (2 if n < 125 else int_size(n + 3))  # the count: one byte up to 127
    for x in fields:
        size += str_size(x)
    return size + int_size(n) + int_size(2 * n + 4)
