"""Packed stream nodes, the pure-Python reference of `engine.model.packed_node` (compiled twin:
`_packed_node_c.pyx`; both are tested on the same inputs).

A packed node is a `bytearray` holding exactly the listpack Redis keeps for one stream node
(src/t_stream.c, src/listpack.c):

    header   total bytes (u32 LE), element count (u16 LE, 65535 once it is no longer known)
    master   live count, deleted count, field count, the field names, 0
    entry    flags (1: deleted, 2: the master's field names), ms delta, seq delta (from the
             master ID, uint64 arithmetic stored as int64), then the values alone (flag 2) or
             the field count and the names and values, then the entry's element count
    end      0xFF

Every element is an integer when its text is a strict int64 decimal (Redis's string2ll), in
the smallest of the 7/13/16/24/32/64-bit forms, else a string with a 6/12/32-bit length; each
is followed by its backlen. A deleted entry keeps its values, as in Redis: only its flag and
the master's two counters change.

The master ID is not in the listpack (Redis keys the node by it in the rax): every function
takes it as `master`, the 128-bit int `ms << 64 | seq`.

Must not touch: anything but one node's bytes (no stream, no node splitting decisions, no
engine state).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from streamkeep.engine.model.listpack import as_int
from streamkeep.engine.wire.errors import StreamkeepError

Fields = tuple[bytes, ...]
_U64 = (1 << 64) - 1
_UNKNOWN = 65535  # the header's element count once it no longer fits
DELETED = 1
SAMEFIELDS = 2


# --- elements -----------------------------------------------------------------------------------


def _backlen(size: int) -> bytes:
    """The backlen after an element of `size` encoded bytes: 7 bits a byte, read backwards."""
    if size <= 127:
        return bytes((size,))
    if size < 16383:
        return bytes((size >> 7, (size & 127) | 128))
    if size < 2097151:
        return bytes((size >> 14, ((size >> 7) & 127) | 128, (size & 127) | 128))
    if size < 268435455:
        return bytes((size >> 21, ((size >> 14) & 127) | 128, ((size >> 7) & 127) | 128,
                      (size & 127) | 128))
    return bytes((size >> 28, ((size >> 21) & 127) | 128, ((size >> 14) & 127) | 128,
                  ((size >> 7) & 127) | 128, (size & 127) | 128))


def int_element(v: int) -> bytes:
    """One integer element (an int outside int64 wraps, as Redis's uint64 deltas do)."""
    v &= _U64
    if v >= 1 << 63:
        v -= 1 << 64
    if 0 <= v <= 127:
        enc = bytes((v,))
    elif -4096 <= v <= 4095:
        u = v & 0x1FFF
        enc = bytes((0xC0 | u >> 8, u & 0xFF))
    elif -(1 << 15) <= v < (1 << 15):
        enc = b"\xf1" + (v & 0xFFFF).to_bytes(2, "little")
    elif -(1 << 23) <= v < (1 << 23):
        enc = b"\xf2" + (v & 0xFFFFFF).to_bytes(3, "little")
    elif -(1 << 31) <= v < (1 << 31):
        enc = b"\xf3" + (v & 0xFFFFFFFF).to_bytes(4, "little")
    else:
        enc = b"\xf4" + (v & _U64).to_bytes(8, "little")
    return enc + _backlen(len(enc))


def str_element(s: bytes) -> bytes:
    """One element holding `s`: an integer when it is a strict int64 decimal."""
    iv = as_int(s)
    if iv is not None:
        return int_element(iv)
    n = len(s)
    if n < 64:
        enc = bytes((0x80 | n,)) + s
    elif n < 4096:
        enc = bytes((0xE0 | n >> 8, n & 0xFF)) + s
    else:
        enc = b"\xf0" + struct.pack("<I", n) + s
    return enc + _backlen(len(enc))


def _element(lp: bytearray | bytes, i: int) -> tuple[int | bytes, int]:
    """The element at offset `i` (an int, or the bytes of a string) and the next one's offset."""
    b = lp[i]
    if b < 0x80:
        return b, i + 2
    if b < 0xC0:
        n = b & 0x3F
        return bytes(lp[i + 1:i + 1 + n]), i + 2 + n
    if b < 0xE0:
        v = ((b & 0x1F) << 8) | lp[i + 1]
        return (v - 8192 if v >= 4096 else v), i + 3
    if b < 0xF0:
        n = ((b & 0x0F) << 8) | lp[i + 1]
        size = 2 + n
        return bytes(lp[i + 2:i + size]), i + size + len(_backlen(size))
    if b == 0xF0:
        n = struct.unpack_from("<I", lp, i + 1)[0]
        size = 5 + n
        return bytes(lp[i + 5:i + size]), i + size + len(_backlen(size))
    width = {0xF1: 2, 0xF2: 3, 0xF3: 4, 0xF4: 8}[b]
    raw = int.from_bytes(lp[i + 1:i + 1 + width], "little")
    if raw >= 1 << (8 * width - 1):
        raw -= 1 << (8 * width)
    return raw, i + 1 + width + 1


def _text(x: int | bytes) -> bytes:
    return x if isinstance(x, bytes) else b"%d" % x


# --- building and appending -----------------------------------------------------------------------


def _entry_elements(master: int, names: Fields, sid: int, fields: Fields, flags: int) -> bytes:
    dms = (sid >> 64) - (master >> 64)
    dseq = (sid & _U64) - (master & _U64)
    n = len(fields) >> 1
    if n == len(names) and fields[0::2] == names:
        parts = [int_element(flags | SAMEFIELDS), int_element(dms), int_element(dseq)]
        parts += map(str_element, fields[1::2])
        parts.append(int_element(n + 3))
    else:
        parts = [int_element(flags), int_element(dms), int_element(dseq), int_element(n)]
        parts += map(str_element, fields)
        parts.append(int_element(2 * n + 4))
    return b"".join(parts)


def _set_header(lp: bytearray, count: int) -> None:
    struct.pack_into("<IH", lp, 0, len(lp), count)


def new_node(names: Fields) -> bytearray:
    """An empty node (no entry yet) whose master entry has these field names: the stream's
    XADD starts a node with it, then appends its first entry."""
    parts = [int_element(0), int_element(0), int_element(len(names))]
    parts += map(str_element, names)
    parts.append(int_element(0))
    lp = bytearray(6) + b"".join(parts) + b"\xff"
    _set_header(lp, 4 + len(names))
    return lp


def build(ids: list[int], fields: list[Fields | None], names: Fields | None = None) -> bytearray:
    """A node of these entries (ascending IDs, each a flat field tuple, None for a deleted
    entry whose values are gone: it is written with the master's names and empty values);
    its master ID is the first ID, its master fields `names` or else the first entry's."""
    if not ids or len(ids) != len(fields):
        raise ValueError("a node holds at least one entry, one field tuple per ID")
    if names is None:
        first = fields[0]
        if first is None:
            raise ValueError("a node whose first entry is deleted needs its master's names")
        names = tuple(first[0::2])
    master = ids[0]
    deleted = sum(f is None for f in fields)
    parts = [int_element(len(ids) - deleted), int_element(deleted), int_element(len(names))]
    parts += map(str_element, names)
    parts.append(int_element(0))
    count = 4 + len(names)
    blank = tuple(x for name in names for x in (name, b""))
    for sid, f in zip(ids, fields, strict=True):
        flags = 0
        if f is None:
            f, flags = blank, DELETED
        n = len(f) >> 1
        count += 4 + n if n == len(names) and f[0::2] == names else 5 + 2 * n
        parts.append(_entry_elements(master, names, sid, f, flags))
    lp = bytearray(6) + b"".join(parts) + b"\xff"
    _set_header(lp, min(count, _UNKNOWN))
    return lp


def _master_span(lp: bytearray) -> tuple[int, int, int, int, Fields, int]:
    """(live, deleted, offset after live, offset after deleted, names, first entry offset)."""
    live, i = _element(lp, 6)
    deleted, j = _element(lp, i)
    nfields, k = _element(lp, j)
    names = []
    for _ in range(int(nfields)):
        name, k = _element(lp, k)
        names.append(_text(name))
    _zero, k = _element(lp, k)
    return int(live), int(deleted), i, j, tuple(names), k


def _set_counters(lp: bytearray, live: int, deleted: int) -> None:
    """Rewrite the master's two counters (their encodings may change size: the rest moves)."""
    _old_live, _old_deleted, i, j, _names, _first = _master_span(lp)
    lp[6:j] = int_element(live) + int_element(deleted)
    count = struct.unpack_from("<H", lp, 4)[0]
    _set_header(lp, count)


def append(lp: bytearray, master: int, names: Fields, sid: int, fields: Fields) -> None:
    """Add the entry `sid` (above every ID in the node) in place: the open tail node's XADD.
    `names` are the master's field names (the caller keeps them; `names(lp)` reads them)."""
    n = len(fields) >> 1
    added = 4 + n if n == len(names) and fields[0::2] == names else 5 + 2 * n
    lp[-1:] = _entry_elements(master, names, sid, fields, 0) + b"\xff"
    count = struct.unpack_from("<H", lp, 4)[0]
    _set_header(lp, min(count + added, _UNKNOWN) if count != _UNKNOWN else _UNKNOWN)
    live, deleted = counts(lp)
    _set_counters(lp, live + 1, deleted)


def counts(lp: bytearray) -> tuple[int, int]:
    """(live entries, deleted entries), from the master entry."""
    live, i = _element(lp, 6)
    deleted, _j = _element(lp, i)
    return int(live), int(deleted)


def names(lp: bytearray) -> Fields:
    """The master entry's field names."""
    return _master_span(lp)[4]


# --- reading --------------------------------------------------------------------------------------


def _walk(lp: bytearray, master: int) -> Iterator[tuple[int, int, int, Fields]]:
    """Every entry, tombstones included: (ID, offset of its flags element, flags, fields)."""
    _live, _deleted, _i, _j, master_names, pos = _master_span(lp)
    ms0, seq0 = master >> 64, master & _U64
    end = len(lp) - 1
    while pos < end:
        at = pos
        flags, pos = _element(lp, pos)
        dms, pos = _element(lp, pos)
        dseq, pos = _element(lp, pos)
        sid = ((ms0 + int(dms)) & _U64) << 64 | ((seq0 + int(dseq)) & _U64)
        flat: list[bytes] = []
        if int(flags) & SAMEFIELDS:
            for name in master_names:
                value, pos = _element(lp, pos)
                flat += (name, _text(value))
        else:
            n, pos = _element(lp, pos)
            for _ in range(2 * int(n)):
                x, pos = _element(lp, pos)
                flat.append(_text(x))
        _count, pos = _element(lp, pos)
        yield sid, at, int(flags), tuple(flat)


def entries(lp: bytearray, master: int) -> list[tuple[int, Fields, bool]]:
    """Every entry in ID order, tombstones included (their values kept): (ID, fields, deleted)."""
    return [(sid, f, bool(flags & DELETED)) for sid, _at, flags, f in _walk(lp, master)]


def read_range(lp: bytearray, master: int, start: int, end: int, count: int = 0,
               rev: bool = False) -> tuple[list[bytes], list[Fields]]:
    """The live entries with start <= ID <= end, as XRANGE (XREVRANGE when `rev`) replies
    them: their IDs as `ms-seq` bytes and their flat field tuples; `count` 0 means all."""
    picked = [(sid, f) for sid, _at, flags, f in _walk(lp, master)
              if not flags & DELETED and start <= sid <= end]
    if rev:
        picked.reverse()
    if count > 0:
        del picked[count:]
    return [b"%d-%d" % (sid >> 64, sid & _U64) for sid, _f in picked], [f for _s, f in picked]


# --- deleting -------------------------------------------------------------------------------------


def mark_deleted(lp: bytearray, master: int, sid: int) -> bool:
    """XDEL of `sid` in place, as Redis does it: its flags get the deleted bit (the same
    one-byte size), the master's live count goes down and its deleted count up. False when
    the node has no live entry `sid`."""
    for entry_id, at, flags, _f in _walk(lp, master):
        if entry_id == sid:
            if flags & DELETED:
                return False
            lp[at] = flags | DELETED  # a 7-bit integer element: its byte is its value
            live, deleted = counts(lp)
            _set_counters(lp, live - 1, deleted + 1)
            return True
        if entry_id > sid:
            break
    return False


def entry_bytes(lp: bytearray) -> int:
    """The node's listpack size (what Redis's MEMORY USAGE counts for it, allocator aside)."""
    return len(lp)


def _bulk(s: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(s), s)


def range_reply(lp: bytearray, master: int, start: int, end: int, count: int, rev: bool,
                out: bytearray, sids: list[int] | None = None) -> int:
    """read_range's entries written to `out` as the elements of XRANGE's RESP reply (RESP2 and
    RESP3 alike: each entry an array of its ID and its flat fields), decoding nothing into
    Python objects; the number of entries (the caller writes the outer array's header).
    `sids`, when given, gets each entry's ID as an int (XREADGROUP's PEL needs them)."""
    picked = [(sid, f) for sid, _at, flags, f in _walk(lp, master)
              if not flags & DELETED and start <= sid <= end]
    if rev:
        picked.reverse()
    if count > 0:
        del picked[count:]
    if sids is not None:
        sids += (sid for sid, _f in picked)
    ids = [b"%d-%d" % (sid >> 64, sid & _U64) for sid, _f in picked]
    fields = [f for _s, f in picked]
    for idb, f in zip(ids, fields, strict=True):
        out += b"*2\r\n" + _bulk(idb) + b"*%d\r\n" % len(f) + b"".join(map(_bulk, f))
    return len(ids)


# --- lookups for the stream model -------------------------------------------------------------


def find(lp: bytearray, master: int, sid: int) -> Fields | None:
    """The fields of the live entry `sid`, None when the node has no such live entry."""
    for entry_id, _at, flags, f in _walk(lp, master):
        if entry_id >= sid:
            return f if entry_id == sid and not flags & DELETED else None
    return None


def ids(lp: bytearray, master: int) -> list[int]:
    """Every entry's ID in order, deleted entries included."""
    return [sid for sid, _at, _flags, _f in _walk(lp, master)]


def last_id(lp: bytearray, master: int) -> int:
    """The last entry's ID, deleted or not (the master ID for a node with no entry)."""
    last = master
    for sid, _at, _flags, _f in _walk(lp, master):
        last = sid
    return last


def delete_many(lp: bytearray, master: int, sids: list[int]) -> int:
    """mark_deleted for each of `sids` (ascending), one walk; how many were live."""
    wanted = set(sids)
    marked = 0
    for entry_id, at, flags, _f in _walk(lp, master):
        if entry_id in wanted and not flags & DELETED:
            lp[at] = flags | DELETED
            marked += 1
    if marked:
        live, deleted = counts(lp)
        _set_counters(lp, live - marked, deleted + marked)
    return marked


# --- untrusted bytes ------------------------------------------------------------------------------


class Invalid(StreamkeepError, ValueError):
    """The bytes are not a stream node listpack (the message says where and why). A
    ValueError too: a snapshot reader reports it among the undecodable values."""


def _checked_element(lp: bytes | bytearray, i: int, end: int) -> tuple[int | bytes, int]:
    """`_element`, every length and the backlen checked against the buffer's end."""
    if i >= end:
        raise Invalid(f"element at offset {i} runs past the end")
    b = lp[i]
    if b < 0x80:
        size = 1
    elif b < 0xC0:
        size = 1 + (b & 0x3F)
    elif b < 0xE0:
        size = 2
    elif b < 0xF0:
        if i + 1 >= end:
            raise Invalid(f"element at offset {i} runs past the end")
        size = 2 + (((b & 0x0F) << 8) | lp[i + 1])
    elif b == 0xF0:
        if i + 5 > end:
            raise Invalid(f"element at offset {i} runs past the end")
        size = 5 + struct.unpack_from("<I", lp, i + 1)[0]
    elif b in (0xF1, 0xF2, 0xF3, 0xF4):
        size = 1 + {0xF1: 2, 0xF2: 3, 0xF3: 4, 0xF4: 8}[b]
    else:
        raise Invalid(f"element at offset {i} has an unknown encoding 0x{b:02x}")
    back = _backlen(size)
    if i + size + len(back) > end:
        raise Invalid(f"element at offset {i} runs past the end")
    if lp[i + size:i + size + len(back)] != back:
        raise Invalid(f"element at offset {i} has a wrong backlen")
    value, nxt = _element(lp, i)
    return value, nxt


def _checked_int(lp: bytes | bytearray, i: int, end: int, what: str) -> tuple[int, int]:
    value, nxt = _checked_element(lp, i, end)
    if not isinstance(value, int):
        raise Invalid(f"{what} at offset {i} is not an integer")
    return value, nxt


def validate(lp: bytes | bytearray, master: int) -> tuple[int, int, int]:
    """Check every byte of a node from outside (an RDB, a RESTORE payload, a snapshot) before
    any other function here reads it: the listpack's structure, each element's encoding and
    backlen, the master entry, each entry's shape and element count, IDs ascending from the
    master, and the master's counters against the entries. Returns (entries, live entries,
    last ID); raises Invalid. Linear in the node's size."""
    end = len(lp)
    if end < 7:
        raise Invalid("shorter than a listpack header and its end byte")
    total, count = struct.unpack_from("<IH", lp, 0)
    if total != end:
        raise Invalid(f"the header says {total} bytes, the node has {end}")
    if lp[end - 1] != 0xFF:
        raise Invalid("no end byte")
    end -= 1
    elements = 0
    live, i = _checked_int(lp, 6, end, "the live count")
    deleted, i = _checked_int(lp, i, end, "the deleted count")
    nnames, i = _checked_int(lp, i, end, "the master's field count")
    if live < 0 or deleted < 0 or nnames < 0 or nnames > end:
        raise Invalid("the master entry has a negative or impossible count")
    for _ in range(nnames):
        _name, i = _checked_element(lp, i, end)
    zero, i = _checked_int(lp, i, end, "the master's terminator")
    if zero != 0:
        raise Invalid("the master entry does not end with 0")
    elements += 4 + nnames
    ms0, seq0 = master >> 64, master & _U64
    entries = seen_live = 0
    prev = -1
    while i < end:
        at = i
        flags, i = _checked_int(lp, i, end, "an entry's flags")
        if flags & ~(DELETED | SAMEFIELDS) or not 0 <= flags <= 3:
            raise Invalid(f"the entry at offset {at} has unknown flags {flags}")
        dms, i = _checked_int(lp, i, end, "an ID's ms delta")
        dseq, i = _checked_int(lp, i, end, "an ID's seq delta")
        sid = ((ms0 + dms) & _U64) << 64 | ((seq0 + dseq) & _U64)
        if sid < master or sid <= prev:
            raise Invalid(f"the entry at offset {at} has an ID out of order")
        prev = sid
        if flags & SAMEFIELDS:
            n = nnames
            for _ in range(nnames):
                _v, i = _checked_element(lp, i, end)
            expect = nnames + 3
            elements += 4 + nnames
        else:
            n, i = _checked_int(lp, i, end, "an entry's field count")
            if n < 0 or n > end:
                raise Invalid(f"the entry at offset {at} has an impossible field count")
            for _ in range(2 * n):
                _v, i = _checked_element(lp, i, end)
            expect = 2 * n + 4
            elements += 5 + 2 * n
        lp_count, i = _checked_int(lp, i, end, "an entry's element count")
        if lp_count != expect:
            raise Invalid(f"the entry at offset {at} has a wrong element count")
        entries += 1
        if not flags & DELETED:
            seen_live += 1
    if (live, deleted) != (seen_live, entries - seen_live):
        raise Invalid(f"the master counts {live} live and {deleted} deleted entries, the node "
                      f"has {seen_live} and {entries - seen_live}")
    if count != _UNKNOWN and count != elements:
        raise Invalid(f"the header counts {count} elements, the node has {elements}")
    return entries, live, prev if entries else master
