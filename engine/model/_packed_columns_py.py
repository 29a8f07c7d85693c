"""The packed columns of the small hashes and sets, pure Python: the reference the compiled
kernel (`_packed_columns_c.pyx`) is tested against.

A pack is one bytes object: a width byte w (1, or 4), the count (1 byte, or 4 bytes
little-endian), then `ncols` columns of `count` lengths (w bytes each, little-endian), then the
strings of column 0 end to end, those of column 1, and so on (the sets keep one column, their
members; the hashes two, fields then values). The lengths of all the columns lie one after
another, so where string i of column c starts is the data's start plus the sum of the first
`c * count + i` lengths.

Packs come from snapshots and RDB files too, so every call checks the pack it reads: the width
byte, the header within the bytes, and the lengths summing to exactly the bytes after the
header; a malformed pack raises ValueError. A column or index out of range is the caller's
mistake: IndexError.
Must not touch: anything but the bytes it is given.
"""

from __future__ import annotations

import sys
from array import array

_BIG_ENDIAN = sys.byteorder == "big"
_LONG = 255  # a length or count from which a pack's lengths take 4 bytes

Lengths = bytes | array


def _header(blob: bytes, ncols: int) -> tuple[int, int, int]:
    """(width, count, offset of the first string) of a checked pack."""
    if ncols < 1:
        raise ValueError("a pack has at least one column")
    size = len(blob)
    if size < 2:
        raise ValueError("pack too short for its header")
    w = blob[0]
    if w == 1:
        n = blob[1]
    elif w == 4:
        if size < 5:
            raise ValueError("pack too short for its header")
        n = int.from_bytes(blob[1:5], "little")
    else:
        raise ValueError("pack width byte is not 1 or 4")
    data = 1 + w + ncols * n * w
    if data > size:
        raise ValueError("pack lengths run past its end")
    total = sum(_lengths(blob, w, ncols * n))
    if total > size - data:
        raise ValueError("pack strings run past its end")
    if total < size - data:
        raise ValueError("pack has bytes after its strings")
    return w, n, data


def _lengths(blob: bytes, w: int, stop: int) -> Lengths:
    """The first `stop` lengths of the pack, all columns counted one after another."""
    if w == 1:
        return blob[2:2 + stop]
    out = array("I", blob[5:5 + 4 * stop])
    if _BIG_ENDIAN:  # the pack's lengths are little-endian on every platform
        out.byteswap()
    return out


def _length(blob: bytes, w: int, j: int) -> int:
    if w == 1:
        return blob[2 + j]
    return int.from_bytes(blob[5 + 4 * j:9 + 4 * j], "little")


def _check_place(ncols: int, n: int, col: int, i: int, last: int) -> None:
    if not 0 <= col < ncols:
        raise IndexError("pack column out of range")
    if not 0 <= i < n + last:
        raise IndexError("pack index out of range")


def pack_count(blob: bytes, ncols: int) -> int:
    """The number of strings in each column."""
    return _header(blob, ncols)[1]


def pack_index(blob: bytes, ncols: int, needle: bytes) -> int:
    """The index of the first string of column 0 equal to `needle`, -1 when none is."""
    w, n, data = _header(blob, ncols)
    lens = _lengths(blob, w, n)
    return _column_index(blob, lens, data, data + sum(lens), needle)


def pack_offset(blob: bytes, ncols: int, col: int, i: int) -> int:
    """Where string i of column col starts in the pack (i may be the count: where the column
    ends)."""
    w, n, data = _header(blob, ncols)
    _check_place(ncols, n, col, i, 1)
    return data + sum(_lengths(blob, w, col * n + i))


def pack_item(blob: bytes, ncols: int, col: int, i: int) -> bytes:
    """String i of column col."""
    w, n, data = _header(blob, ncols)
    _check_place(ncols, n, col, i, 0)
    j = col * n + i
    at = data + sum(_lengths(blob, w, j))
    return blob[at:at + _length(blob, w, j)]


def pack_get(blob: bytes, ncols: int, needle: bytes, col: int) -> bytes | None:
    """The string of column col in the row whose column-0 string is `needle` (a hash's value
    of a field), None when no row is."""
    w, n, data = _header(blob, ncols)
    if not 0 <= col < ncols:
        raise IndexError("pack column out of range")
    lens = _lengths(blob, w, n)
    i = _column_index(blob, lens, data, data + sum(lens), needle)
    if i < 0:
        return None
    j = col * n + i
    at = data + sum(_lengths(blob, w, j))
    return blob[at:at + _length(blob, w, j)]


def pack_strings(blob: bytes, ncols: int) -> list[bytes]:
    """Every string of the pack, column after column (HGETALL, SMEMBERS, a conversion)."""
    w, n, data = _header(blob, ncols)
    out: list[bytes] = []
    at = data
    for size in _lengths(blob, w, ncols * n):
        out.append(blob[at:at + size])
        at += size
    return out


def pack_put(blob: bytes, ncols: int, key: bytes, value: bytes) -> tuple[bytes, bytes | None]:
    """(the pack with the row `key, value` set, the value it replaced or None): an existing
    key's value is replaced in its row, a new row goes last. Two columns only."""
    if ncols != 2:
        raise ValueError("pack_put sets a row of two columns")
    if not isinstance(value, bytes):
        raise TypeError("a value is bytes")
    i = pack_index(blob, ncols, key)
    strings = pack_strings(blob, ncols)
    n = len(strings) >> 1
    keys, values = strings[:n], strings[n:]
    if i >= 0:
        old: bytes | None = values[i]
        values[i] = value
    else:
        old = None
        keys.append(key)
        values.append(value)
    return _build([keys, values]), old


def pack_add(blob: bytes, ncols: int, key: bytes) -> bytes | None:
    """The pack with `key` appended as its last string, or None when `key` is in it already (a
    set's member added). One column only."""
    if ncols != 1:
        raise ValueError("pack_add adds a row of one column")
    if pack_index(blob, ncols, key) >= 0:
        return None
    strings = pack_strings(blob, ncols)
    strings.append(key)
    return _build([strings])


def pack_delete(blob: bytes, ncols: int, key: bytes) -> tuple[bytes, bytes] | None:
    """(the pack without the row of `key`, that row's string in the last column: a hash's
    value, a set's member), or None when `key` is absent."""
    i = pack_index(blob, ncols, key)
    if i < 0:
        return None
    strings = pack_strings(blob, ncols)
    n = len(strings) // ncols
    columns = [strings[c * n:(c + 1) * n] for c in range(ncols)]
    last = columns[-1][i]
    for column in columns:
        del column[i]
    return _build(columns), last


# --- placement: SipHash-1-3 under a table's own 16-byte seed ------------------------------
# A big set's or hash's bucket table places a key by this hash, keyed by a seed the table draws
# when it is made and keeps (a snapshot stores it with the buckets, so a restart adopts them as
# they are): stable across processes, unlike hash(), and as unforgeable as hash() without the
# seed, so no client can pick keys that fill one bucket.

SEED_BYTES = 16
_M64 = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M64


def _sipround(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
    v0 = (v0 + v1) & _M64
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 = (v2 + v3) & _M64
    v3 = _rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & _M64
    v3 = _rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & _M64
    v1 = _rotl(v1, 17) ^ v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def _keys(seed: bytes) -> tuple[int, int]:
    if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
        raise ValueError("a table's seed is 16 bytes")
    return int.from_bytes(seed[:8], "little"), int.from_bytes(seed[8:], "little")


def _siphash13(s: bytes, k0: int, k1: int) -> int:
    v0 = k0 ^ 0x736f6d6570736575
    v1 = k1 ^ 0x646f72616e646f6d
    v2 = k0 ^ 0x6c7967656e657261
    v3 = k1 ^ 0x7465646279746573
    n = len(s)
    whole = n - n % 8
    for i in range(0, whole, 8):
        m = int.from_bytes(s[i:i + 8], "little")
        v3 ^= m
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= m
    b = ((n & 0xFF) << 56) | int.from_bytes(s[whole:], "little")
    v3 ^= b
    v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 ^= b
    v2 ^= 0xFF
    for _ in range(3):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


def _slot(h: int, size: int, split: int) -> int:
    i = h & (size - 1)
    return h & ((size << 1) - 1) if i < split else i


def key_hash(key: bytes, seed: bytes) -> int:
    """SipHash-1-3 of `key` under the 16-byte `seed` (its two little-endian halves)."""
    if not isinstance(key, bytes):
        raise TypeError("a key is bytes")
    return _siphash13(key, *_keys(seed))


def bucket_of(key: bytes, seed: bytes, size: int, split: int) -> int:
    """The bucket of `key` in a table of `size` buckets (a power of two) of which the first
    `split` are split: its hash's low bits, one more for a split bucket."""
    return _slot(key_hash(key, seed), size, split)


def pack_split(blob: bytes, ncols: int, seed: bytes, mask: int, keep: int
               ) -> tuple[bytes, bytes]:
    """(the rows whose key's hash & mask is `keep`, the others): a bucket split in two."""
    k0, k1 = _keys(seed)
    strings = pack_strings(blob, ncols)
    n = len(strings) // ncols
    columns = [strings[c * n:(c + 1) * n] for c in range(ncols)]
    kept: list[list[bytes]] = [[] for _ in range(ncols)]
    moved: list[list[bytes]] = [[] for _ in range(ncols)]
    for r in range(n):
        side = kept if _siphash13(columns[0][r], k0, k1) & mask == keep else moved
        for c in range(ncols):
            side[c].append(columns[c][r])
    return _build(kept), _build(moved)


def pack_placed(blob: bytes, ncols: int, seed: bytes, size: int, split: int,
                index: int) -> int:
    """The pack's count, once it is checked to be bucket `index` of such a table: every key
    placed there, none twice (ValueError if not: a pack read from a file)."""
    k0, k1 = _keys(seed)
    strings = pack_strings(blob, ncols)
    keys = strings[:len(strings) // ncols]
    for key in keys:
        if _slot(_siphash13(key, k0, k1), size, split) != index:
            raise ValueError(f"a key of bucket {index} belongs to another bucket")
    if len(set(keys)) != len(keys):
        raise ValueError(f"a key twice in bucket {index}")
    return len(keys)


def _build(columns: list[list[bytes]]) -> bytes:
    """The pack of these columns in its one form: one-byte lengths when the count and every
    length are under 255, else four."""
    n = len(columns[0])
    strings = [s for column in columns for s in column]
    lens = [len(s) for s in strings]
    if n < _LONG and max(lens, default=0) < _LONG:
        return b"".join((b"\x01", bytes((n,)), bytes(lens), *strings))
    wide = array("I", lens)
    if _BIG_ENDIAN:
        wide.byteswap()
    return b"".join((b"\x04", n.to_bytes(4, "little"), wide.tobytes(), *strings))


def _column_index(blob: bytes, lens: Lengths, start: int, end: int, needle: bytes) -> int:
    """The index of `needle` among the strings stored one after another in blob[start:end]
    (`lens` their lengths), -1 when absent.

    A C-level search of the strings' bytes gives a candidate offset; its index is guessed
    from their mean length and corrected by summing lengths (C level) and stepping a string
    or two, so no Python loop walks every string. A candidate inside another string is
    skipped for the next one."""
    nlen = len(needle)
    if nlen == 0:
        return lens.index(0) if 0 in lens else -1
    c = blob.find(needle, start, end)
    n = len(lens)
    span = end - start
    while c >= 0:
        i = (c - start) * n // span
        p = start + sum(lens[:i])
        while p < c:
            p += lens[i]
            i += 1
        while p > c:
            i -= 1
            p -= lens[i]
        if p == c:
            while i < n and lens[i] == 0:  # empty strings share the offset of the next one
                i += 1
            if i < n and lens[i] == nlen:
                return i
        c = blob.find(needle, c + 1, end)
    return -1
