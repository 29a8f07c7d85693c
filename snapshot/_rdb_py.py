"""The RDB codec's per-byte work, the pure-Python reference of `snapshot.rdb` (compiled twin:
`_rdb_c.pyx`; both are tested on the same inputs, valid and hostile).

Owns, byte-compatibly with Redis: CRC-64 (Jones polynomial, reflected, initial 0, no final
xor), LZF decompression, generic listpacks (decoded to ints and bytes, encoded with Redis's
smallest forms and backlens), and a stream value's two per-node walks: where the value ends
(`stream_end`, its structure followed, nothing decoded) and its nodes' bytes (`stream_nodes`,
keys and listpacks read, not checked). Malformed input raises RdbError, never anything else
(the walks return their first error, with its position, instead).

Must not touch: the RDB container, decoding stream metadata or groups, files or sockets
(`snapshot.rdb`, the facade, keeps those and takes these functions from the twin that runs),
or a stream node's listpack (`engine.model.packed_node` checks and keeps those bytes as they
are).
"""

from __future__ import annotations

import struct

import crcmod

from streamkeep.engine.model.listpack import as_int
from streamkeep.engine.wire.errors import StreamkeepError

_U64 = (1 << 64) - 1


class RdbError(StreamkeepError):
    """Not a valid RDB stream value or DUMP payload."""


# --- CRC-64 (Jones polynomial, reflected, initial 0, no final xor) -----------------------------

# crcmod's C extension: the polynomial with its leading bit, reflected. About 400 MB/s here, where
# a table loop in Python runs at about 9 MB/s (a dump.rdb's checksum covers the whole file).
_crc64 = crcmod.mkCrcFun(0x1AD93D23594C935A9, initCrc=0, rev=True, xorOut=0)


def crc64(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """The CRC-64 of `data`, continuing from `crc` (the CRC of what came before it)."""
    return _crc64(data, crc)  # type: ignore[no-any-return]


# --- LZF ----------------------------------------------------------------------------------------


def lzf_decompress(data: bytes, ulen: int) -> bytes:
    """LZF's `data` expanded to its announced `ulen` bytes (RdbError otherwise). A control byte
    under 32 is a literal run of ctrl + 1 bytes; otherwise a back reference: length ctrl >> 5
    (7: plus the next byte) + 2, distance ((ctrl & 31) << 8 | next byte) + 1, possibly
    overlapping what it writes."""
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        ctrl = data[i]
        i += 1
        if ctrl < 32:
            if i + ctrl + 1 > n:
                raise RdbError("bad LZF data")
            out += data[i:i + ctrl + 1]
            i += ctrl + 1
            continue
        length = ctrl >> 5
        if length == 7:
            if i >= n:
                raise RdbError("bad LZF data")
            length += data[i]
            i += 1
        if i >= n:
            raise RdbError("bad LZF data")
        ref = len(out) - ((ctrl & 31) << 8) - data[i] - 1
        i += 1
        if ref < 0:
            raise RdbError("bad LZF data")
        length += 2
        distance = len(out) - ref
        if distance >= length:
            out += out[ref:ref + length]
        else:  # overlaps what it writes: the last `distance` bytes repeated
            out += (out[ref:] * (length // distance + 1))[:length]
        if len(out) > ulen:  # back references grow the output ~130x the input: stop early
            raise RdbError("bad LZF length")
    if len(out) != ulen:
        raise RdbError("bad LZF length")
    return bytes(out)


# --- listpacks ----------------------------------------------------------------------------------


def listpack_items(lp: bytes) -> list[bytes | int]:
    """The elements of a listpack: ints for integer encodings, bytes for strings. The header's
    element count and the backlens are not checked (Redis's loader does not need them either);
    every element must lie inside the listpack and the last one end at its 0xFF."""
    if len(lp) < 7 or struct.unpack("<I", lp[:4])[0] != len(lp) or lp[-1] != 0xFF:
        raise RdbError("bad listpack header")
    out: list[bytes | int] = []
    append = out.append
    i, end = 6, len(lp) - 1
    while i < end:
        b = lp[i]
        # (The two common forms first: a 7-bit integer, a string under 64 bytes. An element's
        # back-length takes 1 byte below 128 bytes of element, 2 below 16383, ...)
        if b < 0x80:
            append(b)
            i += 2
            continue
        if b < 0xC0:
            n = b & 0x3F
            if i + 1 + n > end:
                raise RdbError("truncated listpack entry")
            append(lp[i + 1:i + 1 + n])
            i += 2 + n
            continue
        if b < 0xE0:
            v = ((b & 0x1F) << 8) | lp[i + 1]
            value: bytes | int = v - 8192 if v >= 4096 else v
            size = 2
        elif b < 0xF0:
            n = ((b & 0x0F) << 8) | lp[i + 1]
            value, size = lp[i + 2:i + 2 + n], 2 + n
        elif b == 0xF0:
            if i + 5 > end:  # its 4-byte length is cut short
                raise RdbError("truncated listpack entry")
            n = struct.unpack("<I", lp[i + 1:i + 5])[0]
            value, size = lp[i + 5:i + 5 + n], 5 + n
        elif b in _INT_FORMS:
            width, signed_max = _INT_FORMS[b]
            raw = int.from_bytes(lp[i + 1:i + 1 + width], "little")
            value, size = (raw - (signed_max << 1) if raw >= signed_max else raw), 1 + width
        else:
            raise RdbError(f"bad listpack encoding {b:#x}")
        if i + size > end:
            raise RdbError("truncated listpack entry")
        append(value)
        i += size + _backlen_size(size)
    if i != end:
        raise RdbError("bad listpack length")
    return out


_INT_FORMS = {0xF1: (2, 1 << 15), 0xF2: (3, 1 << 23), 0xF3: (4, 1 << 31), 0xF4: (8, 1 << 63)}


def _backlen_size(size: int) -> int:
    if size <= 127:
        return 1
    if size < 16383:
        return 2
    if size < 2097151:
        return 3
    if size < 268435455:
        return 4
    return 5


def _backlen(size: int) -> bytes:
    n = _backlen_size(size)
    groups = [(size >> (7 * k)) & 0x7F for k in range(n)][::-1]  # most significant first
    return bytes([groups[0]] + [g | 0x80 for g in groups[1:]])


def lp_element(value: bytes | int) -> bytes:
    """One listpack element (encoding, data, backlen): a string that is a strict int64 decimal
    and an int take the smallest integer form (an int outside int64 wraps to 64 bits)."""
    if isinstance(value, bytes):
        iv = as_int(value)
        if iv is None:
            n = len(value)
            if n < 64:
                enc = bytes((0x80 | n,)) + value
            elif n < 4096:
                enc = bytes((0xE0 | n >> 8, n & 0xFF)) + value
            else:
                enc = b"\xf0" + struct.pack("<I", n) + value
            return enc + _backlen(len(enc))
        value = iv
    if 0 <= value <= 127:
        enc = bytes((value,))
    elif -4096 <= value <= 4095:
        v = value & 0x1FFF
        enc = bytes((0xC0 | v >> 8, v & 0xFF))
    elif -(1 << 15) <= value < (1 << 15):
        enc = b"\xf1" + (value & 0xFFFF).to_bytes(2, "little")
    elif -(1 << 23) <= value < (1 << 23):
        enc = b"\xf2" + (value & 0xFFFFFF).to_bytes(3, "little")
    elif -(1 << 31) <= value < (1 << 31):
        enc = b"\xf3" + (value & 0xFFFFFFFF).to_bytes(4, "little")
    else:
        enc = b"\xf4" + (value & _U64).to_bytes(8, "little")
    return enc + _backlen(len(enc))


def listpack(items: list[bytes | int]) -> bytes:
    """A listpack of `items` (its header's count saturates at 65535, as Redis's does)."""
    body = b"".join(map(lp_element, items))
    total = 6 + len(body) + 1
    return struct.pack("<IH", total, min(len(items), 65535)) + body + b"\xff"


# --- a stream value's structure -----------------------------------------------------------------

# The RDB forms read here (Redis's rdbLoadLen and rdbGenericLoadStringObject): a length is one
# byte 00xxxxxx (6 bits), two bytes 01xxxxxx xxxxxxxx (14 bits), 0x80 and 4 bytes big-endian, or
# 0x81 and 8 bytes big-endian; 11xxxxxx is a string's special form: xxxxxx 0, 1, 2 an 8-, 16-,
# 32-bit little-endian integer, 3 LZF (compressed length, uncompressed length, the bytes). The
# cursor's errors are the facade's Reader's, with the same messages at the same positions (a
# read past the end leaves the position where that read started).


class _Cursor:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise RdbError("truncated")
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def first(self) -> tuple[int, bool]:
        """A length, or (True) a string's special form's number."""
        if self.pos >= len(self.data):
            raise RdbError("truncated")
        first = self.data[self.pos]
        self.pos += 1
        kind = first >> 6
        if kind == 0:
            return first & 0x3F, False
        if kind == 1:
            return (first & 0x3F) << 8 | self.take(1)[0], False
        if kind == 3:
            return first & 0x3F, True
        if first == 0x80:
            return struct.unpack(">I", self.take(4))[0], False
        if first == 0x81:
            return struct.unpack(">Q", self.take(8))[0], False
        raise RdbError(f"unknown length encoding {first:#x}")

    def length(self) -> int:
        value, special = self.first()
        if special:
            raise RdbError("a string encoding where a length was expected")
        return value

    def string(self) -> bytes:
        value, special = self.first()
        if not special:
            return self.take(value)
        if value <= 2:
            return b"%d" % int.from_bytes(self.take(1 << value), "little", signed=True)
        if value == 3:
            clen, ulen = self.length(), self.length()
            return lzf_decompress(self.take(clen), ulen)
        raise RdbError(f"unknown string encoding {value}")

    def skip_string(self) -> None:
        """Past a string, not decoded (an LZF one is not decompressed)."""
        value, special = self.first()
        if not special:
            self.take(value)
        elif value <= 2:
            self.take(1 << value)
        elif value == 3:
            clen = self.length()
            self.length()
            self.take(clen)
        else:
            raise RdbError(f"unknown string encoding {value}")

    def skip_id(self) -> None:
        self.length()  # milliseconds
        self.length()  # sequence


def stream_end(data: bytes, pos: int, rdb_type: int) -> tuple[int, str | None]:
    """Where the stream value of `rdb_type` (15, 19, 21, 26) starting at `data[pos]` ends, its
    structure followed but nothing decoded (an RDB file's reader finds its keys so; RESTORE
    decodes and checks each value): (end, None), or (the position, the message) of the first
    error. The value: its nodes (master ID, listpack: two strings each), length, last ID; from
    type 19 the first and max deleted IDs and entries added; its groups (name, last ID, from
    19 entries read; a PEL of 16-byte IDs with 8-byte delivery times and counts; consumers:
    name, seen time (from 21 an active time too, 8 bytes each), their 16-byte pending IDs);
    from 26 the idempotent producers (duration, max size; producers: name, and their IDs
    with entry IDs; added, duplicates)."""
    c = _Cursor(data, pos)
    try:
        for _ in range(c.length()):
            c.skip_string()  # the node's master ID
            c.skip_string()  # its listpack
        c.length()
        c.skip_id()
        if rdb_type >= 19:
            c.skip_id()
            c.skip_id()
            c.length()
        for _ in range(c.length()):
            c.skip_string()
            c.skip_id()
            if rdb_type >= 19:
                c.length()
            for _ in range(c.length()):
                c.take(24)  # ID, delivery time
                c.length()
            for _ in range(c.length()):
                c.skip_string()
                c.take(16 if rdb_type >= 21 else 8)  # seen (and active) time
                c.take(16 * c.length())
        if rdb_type >= 26:
            c.length()
            c.length()
            for _ in range(c.length()):
                c.skip_string()
                for _ in range(c.length()):
                    c.skip_string()
                    c.length()
                    c.length()
            c.length()
            c.length()
    except RdbError as err:
        return c.pos, str(err)
    return c.pos, None


def stream_nodes(data: bytes, pos: int) -> tuple[list[tuple[bytes, bytearray | None]], int,
                                                 str | None]:
    """A stream value's nodes, starting at `data[pos]` (their count, then each node's key and
    listpack: two strings of any form, LZF ones decompressed), neither checked: (the nodes as
    (key, listpack) pairs, the position after them, None), or on the first error (the nodes
    read before it, its position, its message), where a last pair (key, None) is a node whose
    key was read and its listpack not (the caller checks that key before the error, as a
    reader node by node would)."""
    c = _Cursor(data, pos)
    nodes: list[tuple[bytes, bytearray | None]] = []
    try:
        for _ in range(c.length()):
            key = c.string()
            nodes.append((key, None))
            nodes[-1] = (key, bytearray(c.string()))
    except RdbError as err:
        return nodes, c.pos, str(err)
    return nodes, c.pos, None
