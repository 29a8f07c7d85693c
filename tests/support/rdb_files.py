"""Hand-built RDB files of today's servers (Redis 8.8's RDB 14 with a type-27 stream and an
array, Redis 8.10's RDB 15 with templated hashes and a function library, Valkey 9's header, slot
import and hash), shared by the RDB codec's tests and the import CLI's."""

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


def templated_hashes() -> bytes:
    """Redis 8.10's templated hashes as an RDB 15 file holds them: two templates of the registry
    (opcode 242: id, field count, names), a key of each reference form (30: a listpack of the
    template id and the values; 32: the template id, then a value per field), a key of each
    self-contained form (29: a field-name format byte, 0 then a listpack of the names, then the
    listpack of id and values; 31: format 1, the count and the names, then the values; and 31
    with its names as a listpack), as Redis's hash-templates tests show their bytes."""
    lp = rdb.listpack
    return (b"\xf2" + L(0) + L(4) + b"".join(S(b"field%d" % i) for i in range(1, 5))
            + b"\xf2" + L(1) + L(2) + S(b"name") + S(b"email")
            + b"\x1e" + S(b"k1") + S(lp([0, b"1", b"2", b"3", b"4"]))
            + b"\x20" + S(b"k2") + L(1) + S(b"alice") + S(b"alice@example.com")
            + b"\x1d" + S(b"d1") + b"\x00" + S(lp([b"field1", b"field2"])) + S(lp([0, 1, 2]))
            + b"\x1f" + S(b"d2") + b"\x01" + L(2) + S(b"field1") + S(b"field2") + S(b"1")
            + S(b"2")
            + b"\x1f" + S(b"d3") + b"\x00" + S(lp([b"a", b"bb", b"ccc"])) + S(b"x" * 70)
            + S(b"y") + S(b"z"))


def rdb15_file() -> bytes:
    """An RDB 15 file (Redis 8.10): a function library, the templated hashes above among a
    type-27 stream and a string."""
    s = xnacked().dbs[0][b"s"]
    return closed(b"REDIS0015" + b"\xfa" + S(b"redis-ver") + S(b"8.10.0")
                   + b"\xf5" + S(LIBRARY)
                   + b"\xfe\x00\xfb\x07\x00" + templated_hashes()
                   + b"\x1b" + S(b"s") + rdb.write_stream(s, 27)
                   + b"\x00" + S(b"str") + S(b"v")
                   + b"\xff")


LIBRARY = (b"#!lua name=lib\n"
           b"redis.register_function('getk', function(keys, args) "
           b"return redis.call('GET', keys[1]) end)\n"
           b"redis.register_function{function_name='ro', callback=function() return 'ro' end, "
           b"flags={'no-writes'}}")
