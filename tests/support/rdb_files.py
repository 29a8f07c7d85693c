"""Hand-built RDB files of today's servers (Redis 8.8's RDB 14 with a type-27 stream and an
array, Valkey 9's header, slot import and hash), shared by the RDB codec's tests and the import
CLI's."""

from __future__ import annotations

import struct

from streamkeep import Engine
from streamkeep.snapshot import rdb

L, S = rdb.encode_length, rdb.encode_string


def id_bytes(ms: int, seq: int = 0) -> bytes:
    return struct.pack(">QQ", ms, seq)  # as the PEL's IDs: big-endian


def xnacked() -> Engine:
    """Five entries, three delivered to c, the middle one (2-0) then released by XNACK."""
    e = Engine(clock=lambda: 1_700_000_000_000)
    for i in range(1, 6):
        e.execute("XADD", "s", f"{i}-0", "f", str(i))
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "3", "STREAMS", "s", ">")
    assert e.execute("XNACK", "s", "g", "FAIL", "IDS", "1", "2-0") == 1
    return e


def array_value() -> bytes:
    """A type-28 value: 4 elements, an insert index (9), then each element's index, its tag and
    the element (an integer, a double, a short string, a string)."""
    return (L(4) + L(1) + L(9)
            + L(0) + L(1) + struct.pack("<q", -5)
            + L(3) + L(2) + struct.pack("<d", 2.5)
            + L(5) + L(3) + S(b"short")
            + L(9) + L(0) + S(b"a longer element, over seven bytes"))


def closed(body: bytes) -> bytes:
    return body + struct.pack("<Q", rdb.crc64(body))


def rdb14_file() -> bytes:
    s = xnacked().dbs[0][b"s"]
    key_meta = b"\xf3" + L(1) + b"\x01\x02\x03\x04" + L(2) + L(7) + L(0)  # a class: uint 7, end
    return closed(b"REDIS0014" + b"\xfa" + S(b"redis-ver") + S(b"8.8.0")
                   + b"\xfe\x00\xfb\x03\x00"
                   + b"\x1b" + S(b"s") + rdb.write_stream(s, 27)
                   + b"\x1c" + S(b"arr") + array_value()
                   + key_meta + b"\x00" + S(b"str") + S(b"v")
                   + b"\xff")


def valkey_file() -> bytes:
    e = Engine(clock=lambda: 1_700_000_000_000)
    e.execute("XADD", "s", "1-1", "f", "v")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    slot_import = b"\xf3" + S(b"j" * 40) + L(2) + L(0) + L(99) + L(200) + L(5460)
    hash2 = (b"\x16" + S(b"h") + L(2) + S(b"f1") + S(b"v1") + struct.pack("<q", -1)
             + S(b"f2") + S(b"v2") + struct.pack("<q", 1_800_000_000_000))
    return closed(b"VALKEY080" + b"\xfa" + S(b"valkey-ver") + S(b"9.0.0") + slot_import
                   + b"\xfe\x00\xfb\x03\x00" + hash2
                   + b"\x15" + S(b"s") + rdb.write_stream(e.dbs[0][b"s"], 21)
                   + b"\x00" + S(b"n") + S(b"12") + b"\xff")
