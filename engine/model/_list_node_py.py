"""List nodes, the pure-Python reference of `engine.model.list_node` (compiled twin:
`_list_node_c.pyx`; both are tested on the same inputs).

A list node is a `bytearray` holding exactly the listpack Redis keeps for a list (a small list
whole, or one node of a quicklist; src/listpack.c):

    header   total bytes (u32 LE), element count (u16 LE; 65535 once it no longer fits)
    entries  each an encoding, its data, then its backlen (the encoding and data's size, 7 bits
             a byte, read from the end: the last byte has bit 7 set when one more precedes it)
    end      0xFF

An element is stored as an integer when its text is a strict int64 decimal (Redis's string2ll),
in the smallest of the 7/13/16/24/32/64-bit forms, else as a string with a 6/12/32-bit length.
It reads back as the same bytes: only a canonical decimal is stored as an integer.

Every function works on one node in place: push and pop at either end, the element at an
index, a range, the indexes equal to an element, and `node_splice`, which replaces a range
with other elements (LSET, LINSERT, LREM and LTRIM are splices). Indexes are 0-based within
the node and already in range (the caller, engine.model.lists, bounds them); one out of range
anyway (an index not below the count, a start or stop outside [0, count], a splice's start
past its stop), or a pop from an empty node, is an IndexError, the same as the compiled
twin's, which checks them so as never to read or write outside the node. A node never
holds more than a list's fill allows, so its count always fits the header (the 65535 form is
read for safety, by walking).

Must not touch: anything but one node's bytes (which node, when to split or merge, and the
list's encoding are engine.model.lists').
"""

from __future__ import annotations

from collections.abc import Sequence

from streamkeep.engine.model.listpack import as_int

_HEADER = 6
_END = 0xFF
_UNKNOWN = 65535
_INT_FORMS = ((0xF1, 2), (0xF2, 3), (0xF3, 4), (0xF4, 8))
_OUT_OF_RANGE = "list node index out of range"  # (the compiled twin's message too)


# --- one element ---------------------------------------------------------------------------------


def _backlen(size: int) -> bytes:
    if size <= 127:
        return bytes((size,))
    n = 2 if size < 16383 else 3 if size < 2097151 else 4 if size < 268435455 else 5
    out = [(size >> (7 * (n - 1))) & 0x7F]
    out.extend(((size >> (7 * (n - 1 - k))) & 0x7F) | 0x80 for k in range(1, n))
    return bytes(out)


def _int_entry(v: int) -> bytes:
    if 0 <= v <= 127:
        return bytes((v, 1))
    if -4096 <= v <= 4095:
        u = v & 0x1FFF
        return bytes((0xC0 | (u >> 8), u & 0xFF, 2))
    for tag, width in _INT_FORMS:
        if -(1 << (8 * width - 1)) <= v < (1 << (8 * width - 1)):
            body = bytes((tag,)) + (v & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
            return body + _backlen(len(body))
    raise OverflowError(v)  # (as_int gives int64 only)


def encode(element: bytes) -> bytes:
    """The element as a listpack entry (encoding, data, backlen)."""
    iv = as_int(element)
    if iv is not None:
        return _int_entry(iv)
    n = len(element)
    if n < 64:
        head = bytes((0x80 | n,))
    elif n < 4096:
        head = bytes((0xE0 | (n >> 8), n & 0xFF))
    else:
        head = b"\xf0" + n.to_bytes(4, "little")
    body = head + bytes(element)
    return body + _backlen(len(body))


def _decode(lp: bytearray, pos: int) -> tuple[bytes, int]:
    """The element at `pos` as bytes, and the offset of the next entry."""
    b = lp[pos]
    if b < 0x80:
        value: int | bytes = b
        size = 1
    elif b & 0xC0 == 0x80:
        n = b & 0x3F
        value, size = bytes(lp[pos + 1:pos + 1 + n]), 1 + n
    elif b & 0xE0 == 0xC0:
        u = ((b & 0x1F) << 8) | lp[pos + 1]
        value, size = (u - 8192 if u >= 4096 else u), 2
    elif b & 0xF0 == 0xE0:
        n = ((b & 0x0F) << 8) | lp[pos + 1]
        value, size = bytes(lp[pos + 2:pos + 2 + n]), 2 + n
    elif b == 0xF0:
        n = int.from_bytes(lp[pos + 1:pos + 5], "little")
        value, size = bytes(lp[pos + 5:pos + 5 + n]), 5 + n
    else:
        width = {0xF1: 2, 0xF2: 3, 0xF3: 4, 0xF4: 8}[b]
        value = int.from_bytes(lp[pos + 1:pos + 1 + width], "little", signed=True)
        size = 1 + width
    text = value if isinstance(value, bytes) else str(value).encode()
    return text, pos + size + len(_backlen(size))


def _prev(lp: bytearray, end: int) -> int:
    """The offset of the entry that ends at `end` (read through its backlen)."""
    p = end - 1
    size = shift = 0
    while True:
        size |= (lp[p] & 0x7F) << shift
        if not lp[p] & 0x80:
            break
        shift += 7
        p -= 1
    return end - len(_backlen(size)) - size


def _offsets(lp: bytearray) -> list[int]:
    """Every entry's offset, then the end marker's."""
    out = []
    pos, end = _HEADER, len(lp) - 1
    while pos < end:
        out.append(pos)
        pos = _decode(lp, pos)[1]
    out.append(end)
    return out


def _check(index: int, limit: int) -> None:
    """IndexError unless 0 <= index <= limit."""
    if not 0 <= index <= limit:
        raise IndexError(_OUT_OF_RANGE)


def _set_header(lp: bytearray, count: int) -> None:
    lp[0:4] = len(lp).to_bytes(4, "little")
    lp[4:6] = min(count, _UNKNOWN).to_bytes(2, "little")


# --- the node ------------------------------------------------------------------------------------


def node_new(elements: Sequence[bytes]) -> bytearray:
    """A node holding `elements` in order."""
    lp = bytearray(_HEADER)
    for element in elements:
        lp += encode(element)
    lp.append(_END)
    _set_header(lp, len(elements))
    return lp


def node_count(lp: bytearray) -> int:
    """How many elements the node holds."""
    count = lp[4] | lp[5] << 8
    return count if count != _UNKNOWN else len(_offsets(lp)) - 1


def node_push(lp: bytearray, element: bytes, tail: bool) -> None:
    """Add `element` at the tail (True) or the head."""
    count = node_count(lp)
    entry = encode(element)
    if tail:
        lp[len(lp) - 1:len(lp) - 1] = entry
    else:
        lp[_HEADER:_HEADER] = entry
    _set_header(lp, count + 1)


def node_pop(lp: bytearray, tail: bool) -> bytes:
    """Remove and return the tail's (True) or the head's element; the node is not empty."""
    count = node_count(lp)
    if count == 0:
        raise IndexError("pop from an empty list node")
    start = _prev(lp, len(lp) - 1) if tail else _HEADER
    value, after = _decode(lp, start)
    del lp[start:after]
    _set_header(lp, count - 1)
    return value


def node_get(lp: bytearray, index: int) -> bytes:
    """The element at `index` (0 <= index < count), walked from the nearer end."""
    count = node_count(lp)
    _check(index, count - 1)
    if index < count // 2:
        pos = _HEADER
        for _ in range(index):
            pos = _decode(lp, pos)[1]
    else:
        pos = len(lp) - 1
        for _ in range(count - index):
            pos = _prev(lp, pos)
    return _decode(lp, pos)[0]


def node_range(lp: bytearray, start: int, stop: int) -> list[bytes]:
    """The elements at [start, stop) (0 <= start, stop <= count; none when start >= stop)."""
    count = node_count(lp)
    _check(start, count)
    _check(stop, count)
    out: list[bytes] = []
    pos = _HEADER
    for i in range(stop):
        value, pos = _decode(lp, pos)
        if i >= start:
            out.append(value)
    return out


def node_matches(lp: bytearray, element: bytes) -> list[int]:
    """The indexes of the elements equal to `element`, ascending."""
    return [i for i, value in enumerate(node_range(lp, 0, node_count(lp))) if value == element]


def node_splice(lp: bytearray, start: int, stop: int, elements: Sequence[bytes]) -> None:
    """Replace the elements at [start, stop) by `elements` (0 <= start <= stop <= count)."""
    offsets = _offsets(lp)
    count = len(offsets) - 1
    _check(stop, count)
    _check(start, stop)
    lp[offsets[start]:offsets[stop]] = b"".join(encode(e) for e in elements)
    _set_header(lp, count - (stop - start) + len(elements))


__all__ = ["encode", "node_count", "node_get", "node_matches", "node_new", "node_pop",
           "node_push", "node_range", "node_splice"]
