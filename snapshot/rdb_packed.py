"""The packed blobs older RDB types hold, decoded and encoded: ziplists (a zset's type 12, a
hash's 13, as Redis 5 and 6 wrote them), zipmaps (a hash's type 9, Redis 2.4) and intsets (a
set's type 11), plus the listpack of pairs later types hold.

Owns reading these formats byte-compatibly with Redis (every bound checked; RdbError, never
another exception, for a malformed blob) and writing ziplists and intsets as Redis writes them
(integer-looking strings in the smallest integer form). Must not touch: the RDB container
(`snapshot.rdb`), what a type makes of the elements (its own codec module), files or sockets.
"""

from __future__ import annotations

import struct

from streamkeep.engine.model.listpack import as_int
from streamkeep.snapshot.rdb import RdbError

# --- ziplists ------------------------------------------------------------------------------------

_ZL_HEADER = 10  # zlbytes (u32), zltail (u32), zllen (u16), all little-endian
_ZL_END = 0xFF
_ZL_BIG_PREVLEN = 254
# An integer entry's encoding byte -> (its width, its struct format).
_ZL_INTS = {0xC0: (2, "<h"), 0xD0: (4, "<i"), 0xE0: (8, "<q"), 0xF0: (3, ""), 0xFE: (1, "<b")}


def ziplist_items(zl: bytes) -> list[bytes | int]:
    """The elements of a ziplist (ints for integer entries, bytes for strings), checked as
    Redis's deep validation checks them: the header's byte count and tail offset, every entry
    inside the blob with its previous-entry length right, the end marker last, the header's
    count (when it is not the 65535 "unknown") equal to the entries."""
    size = len(zl)
    if size < _ZL_HEADER + 1 or zl[-1] != _ZL_END:
        raise RdbError("bad ziplist header")
    zlbytes, zltail, zllen = struct.unpack_from("<IIH", zl)
    if zlbytes != size or zltail > size - 1:
        raise RdbError("bad ziplist header")
    out: list[bytes | int] = []
    pos, prev_size, last = _ZL_HEADER, 0, _ZL_HEADER
    end = size - 1
    while pos < end:
        start = pos
        prevlen, pos = _zl_prevlen(zl, pos, end)
        if prevlen != prev_size:
            raise RdbError("bad ziplist entry (previous length)")
        value, pos = _zl_value(zl, pos, end)
        out.append(value)
        prev_size, last = pos - start, start
    if pos != end or (out and zltail != last) or (not out and zltail != _ZL_HEADER):
        raise RdbError("bad ziplist length")
    if zllen != 0xFFFF and zllen != len(out):
        raise RdbError("bad ziplist count")
    return out


def _zl_prevlen(zl: bytes, pos: int, end: int) -> tuple[int, int]:
    first = zl[pos]
    if first < _ZL_BIG_PREVLEN:
        return first, pos + 1
    if first != _ZL_BIG_PREVLEN or pos + 5 > end:
        raise RdbError("bad ziplist entry (previous length)")
    return struct.unpack_from("<I", zl, pos + 1)[0], pos + 5


def _zl_value(zl: bytes, pos: int, end: int) -> tuple[bytes | int, int]:
    if pos >= end:
        raise RdbError("truncated ziplist entry")
    enc = zl[pos]
    kind = enc >> 6
    if kind == 0:
        n, pos = enc & 0x3F, pos + 1
    elif kind == 1:
        if pos + 2 > end:
            raise RdbError("truncated ziplist entry")
        n, pos = (enc & 0x3F) << 8 | zl[pos + 1], pos + 2
    elif enc == 0x80:
        if pos + 5 > end:
            raise RdbError("truncated ziplist entry")
        n, pos = struct.unpack_from(">I", zl, pos + 1)[0], pos + 5
    elif kind == 2:
        raise RdbError(f"bad ziplist encoding {enc:#x}")
    elif 0xF1 <= enc <= 0xFD:
        return enc - 0xF1, pos + 1
    elif enc in _ZL_INTS:
        width, fmt = _ZL_INTS[enc]
        if pos + 1 + width > end:
            raise RdbError("truncated ziplist entry")
        raw = zl[pos + 1:pos + 1 + width]
        value = (int.from_bytes(raw, "little", signed=True) if not fmt
                 else struct.unpack(fmt, raw)[0])
        return value, pos + 1 + width
    else:
        raise RdbError(f"bad ziplist encoding {enc:#x}")
    if pos + n > end:
        raise RdbError("truncated ziplist entry")
    return zl[pos:pos + n], pos + n


def _zl_encoding(value: bytes) -> bytes:
    """An element's encoding and data, as ziplistPush writes them (zipTryEncoding: a string
    of at most 32 bytes that string2ll takes becomes the smallest integer form)."""
    iv = as_int(value) if len(value) <= 32 else None
    if iv is None:
        n = len(value)
        if n <= 0x3F:
            return bytes((n,)) + value
        if n <= 0x3FFF:
            return bytes((0x40 | n >> 8, n & 0xFF)) + value
        return b"\x80" + struct.pack(">I", n) + value
    if 0 <= iv <= 12:
        return bytes((0xF1 + iv,))
    if -128 <= iv <= 127:
        return b"\xfe" + struct.pack("<b", iv)
    if -(1 << 15) <= iv < (1 << 15):
        return b"\xc0" + struct.pack("<h", iv)
    if -(1 << 23) <= iv < (1 << 23):
        return b"\xf0" + (iv & 0xFFFFFF).to_bytes(3, "little")
    if -(1 << 31) <= iv < (1 << 31):
        return b"\xd0" + struct.pack("<i", iv)
    return b"\xe0" + struct.pack("<q", iv)


def ziplist(items: list[bytes]) -> bytes:
    """A ziplist of `items` as Redis 6 writes one (its count saturates at 65535)."""
    parts: list[bytes] = []
    prev_size, offset, last = 0, _ZL_HEADER, _ZL_HEADER
    for value in items:
        prev = (bytes((prev_size,)) if prev_size < _ZL_BIG_PREVLEN
                else b"\xfe" + struct.pack("<I", prev_size))
        entry = prev + _zl_encoding(value)
        parts.append(entry)
        last = offset
        offset += len(entry)
        prev_size = len(entry)
    total = offset + 1
    return (struct.pack("<IIH", total, last, min(len(items), 0xFFFF)) + b"".join(parts)
            + b"\xff")


# --- zipmaps (a hash's type 9) -------------------------------------------------------------------


def zipmap_pairs(zm: bytes) -> list[tuple[bytes, bytes]]:
    """The (field, value) pairs of a zipmap: a count byte, then per pair a length, the field,
    a length, a free-space byte, the value and that many unused bytes; 0xFF at the end."""
    if len(zm) < 2 or zm[-1] != 0xFF:
        raise RdbError("bad zipmap")
    pos, end = 1, len(zm) - 1
    out = []
    while pos < end:
        field, pos = _zm_string(zm, pos, end, free=False)
        value, pos = _zm_string(zm, pos, end, free=True)
        out.append((field, value))
    if pos != end:
        raise RdbError("bad zipmap length")
    return out


def _zm_string(zm: bytes, pos: int, end: int, free: bool) -> tuple[bytes, int]:
    first = zm[pos]
    if first < 254:
        n, pos = first, pos + 1
    elif first == 254 and pos + 5 <= end:
        n, pos = struct.unpack_from("<I", zm, pos + 1)[0], pos + 5
    else:
        raise RdbError("bad zipmap entry")
    unused = 0
    if free:
        if pos >= end:
            raise RdbError("truncated zipmap entry")
        unused, pos = zm[pos], pos + 1
    if pos + n + unused > end:
        raise RdbError("truncated zipmap entry")
    return zm[pos:pos + n], pos + n + unused


# --- intsets (a set's type 11) -------------------------------------------------------------------

_INTSET_FORMS = {2: "h", 4: "i", 8: "q"}


def intset_values(blob: bytes) -> list[int]:
    """An intset's integers: its width (2, 4 or 8), its count, the integers ascending (checked:
    strictly ascending, the blob exactly that long)."""
    if len(blob) < 8:
        raise RdbError("bad intset header")
    width, count = struct.unpack_from("<II", blob)
    code = _INTSET_FORMS.get(width)
    if code is None or len(blob) != 8 + width * count:
        raise RdbError("bad intset header")
    values = list(struct.unpack_from(f"<{count}{code}", blob, 8))
    if any(a >= b for a, b in zip(values, values[1:], strict=False)):
        raise RdbError("intset not in order")
    return values


def intset(values: list[int]) -> bytes:
    """An intset of `values` (ascending, distinct) at the narrowest width that holds them."""
    low, high = (min(values), max(values)) if values else (0, 0)
    width = 2 if low >= -(1 << 15) and high < (1 << 15) else \
        4 if low >= -(1 << 31) and high < (1 << 31) else 8
    return struct.pack(f"<II{len(values)}{_INTSET_FORMS[width]}", width, len(values), *values)


# --- elements as strings -------------------------------------------------------------------------


def as_bytes(item: bytes | int) -> bytes:
    """A packed element as the string it stands for (an integer entry in decimal)."""
    return item if isinstance(item, bytes) else b"%d" % item


def groups(items: list[bytes | int], size: int, what: str) -> list[list[bytes | int]]:
    """`items` cut into tuples of `size` (a pair: a member and its score, a field and its
    value); RdbError if they do not divide."""
    if len(items) % size:
        raise RdbError(f"{what}: an odd number of elements")
    return [items[k:k + size] for k in range(0, len(items), size)]


__all__ = ["as_bytes", "groups", "intset", "intset_values", "zipmap_pairs", "ziplist",
           "ziplist_items"]
