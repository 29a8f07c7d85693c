"""The RDB codec's pieces, without a server: CRC-64, lengths and strings, listpacks, LZF, the
file container; damaged files refused with RdbError only. (Against redis-server:
tests/differential/test_dump_restore.py and tests/tools/test_redisimport.py.)"""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep import Engine
from streamkeep.snapshot import rdb
from tests.support.kernels import kernel_fixture
from tests.support.rdb_files import (
    array_value,
    closed,
    id_bytes,
    rdb14_file,
    valkey_file,
    xnacked,
)

# The codec's per-byte functions, pure and compiled (tests/snapshot/test__rdb_py.py compares
# the two on random and hostile input).
codec = kernel_fixture("streamkeep.snapshot", "rdb")


def test_crc64_check_value(codec) -> None:
    assert codec.crc64(b"123456789") == 0xE9C6D914C4B8D9CA


@pytest.mark.parametrize("n", [0, 63, 64, 16383, 16384, 2**32 - 1, 2**32, 2**64 - 1])
def test_lengths_round_trip(n: int) -> None:
    assert rdb.Reader(rdb.encode_length(n)).length() == n


@pytest.mark.parametrize("s,encoded", [(b"64", b"\xc0\x40"), (b"-129", b"\xc1\x7f\xff"),
                                       (b"007", b"\x03007"), (b"70000", b"\xc2\x70\x11\x01\x00"),
                                       (b"12345678901", b"\x0b12345678901")])
def test_strings_use_redis_integer_encodings(s: bytes, encoded: bytes) -> None:
    assert rdb.encode_string(s) == encoded
    assert rdb.Reader(encoded).string() == s


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(st.one_of(st.binary(max_size=5000), st.integers(-(2**63), 2**63 - 1)),
                      max_size=40))
def test_listpacks_round_trip(codec, items: list) -> None:
    decoded = codec.listpack_items(codec.listpack(items))
    assert [x if isinstance(x, bytes) else b"%d" % x for x in decoded] == \
        [x if isinstance(x, bytes) else b"%d" % x for x in items]


def test_the_reference_listpack_entry(codec) -> None:
    # "C" is 81 43 with backlen 02 (the reference's example); 21 becomes the uint 0x15.
    assert codec.listpack([b"C", b"21"]) == b"\x0c\x00\x00\x00\x02\x00\x81C\x02\x15\x01\xff"


def test_lzf_back_references_may_overlap(codec) -> None:
    # literal "ab", then a back reference of length 4 at distance 2: "ababab"
    assert codec.lzf_decompress(b"\x01ab\x40\x01", 6) == b"ababab"
    with pytest.raises(rdb.RdbError, match="bad LZF data"):
        codec.lzf_decompress(b"\x01ab\x40\x09", 6)


def _rdb_file() -> bytes:
    e = Engine(clock=lambda: 1_700_000_000_000)
    for i in range(150):
        e.execute("XADD", "s", f"{i + 1}-0", "f", str(i))
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    value = rdb.write_stream(e.dbs[0][b"s"], 19)
    length = rdb.encode_length
    # A module's typed values (RedisModule_Save*): unsigned, string, double, float, signed, end.
    module_data = (length(2) + length(7) + length(5) + rdb.encode_string(b"module text")
                   + length(4) + struct.pack("<d", 1.5) + length(3) + struct.pack("<f", 2.5)
                   + length(1) + length(9) + length(0))
    module_id = length(0x1234567890ABCDEF)
    body = (b"REDIS0010" + b"\xfa" + rdb.encode_string(b"redis-ver") + rdb.encode_string(b"7.0.15")
            + b"\xf7" + module_id + length(2) + length(1) + module_data  # module aux, before keys
            + b"\xfe\x00\xfb\x06\x00" + b"\x00" + rdb.encode_string(b"str")
            + rdb.encode_string(b"hello") + b"\x07" + rdb.encode_string(b"mod") + module_id
            + module_data + b"\x13" + rdb.encode_string(b"s") + value
            # Hashes with field TTLs (7.4+): as a dict (type 24, and 22 before GA), a listpack
            # (23 before GA).
            + b"\x18" + rdb.encode_string(b"h24") + struct.pack("<Q", 1_800_000_000_000)
            + length(2) + length(0) + rdb.encode_string(b"f") + rdb.encode_string(b"v")
            + length(5) + rdb.encode_string(b"g") + rdb.encode_string(b"w")
            + b"\x16" + rdb.encode_string(b"h22") + length(1) + length(1_800_000_000_000)
            + rdb.encode_string(b"f") + rdb.encode_string(b"v")
            + b"\x17" + rdb.encode_string(b"h23") + rdb.encode_string(rdb.listpack([b"f", b"v"]))
            + b"\xf7" + module_id + length(2) + length(2) + module_data  # and after them
            + b"\xff")
    return body + struct.pack("<Q", rdb.crc64(body))


def test_a_file_reads_with_its_keys() -> None:
    version, aux, keys = rdb.read_rdb(_rdb_file())
    assert version == 10 and aux == {b"redis-ver": b"7.0.15"}
    # Module aux data and a module's value (Redis 8 writes them) are skipped over, the value
    # listed as a key of its type.
    assert [(k.key, k.rdb_type) for k in keys] == [(b"str", 0), (b"mod", 7), (b"s", 19),
                                                   (b"h24", 24), (b"h22", 22), (b"h23", 23)]
    s = rdb.load_payload(rdb.payload_from(19, keys[2].value, 10))
    assert s.length == 150 and len(s.groups[b"g"].pel) == 2


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_damaged_files_raise_rdb_error_only(data) -> None:
    raw = bytearray(_rdb_file())
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    with contextlib.suppress(rdb.RdbError):  # anything else fails the example
        rdb.read_rdb(bytes(raw))


def test_the_header_and_its_version() -> None:
    assert rdb.rdb_version(b"REDIS0011\xfa") == 11
    for head, said in [(b"REDIS0016", "RDB version 16 is not one streamkeep reads"),
                       (b"REDIS0000", "RDB version 0 is not one"),
                       (b"REDISx011", "REDIS magic without a version number"),
                       (b"REDIS01", "truncated at byte 7, inside the RDB header"),
                       (b"redis0011", "not an RDB file")]:
        with pytest.raises(rdb.RdbError, match=said):
            rdb.rdb_version(head)


def test_a_cut_file_names_the_byte_it_ends_at_and_what_it_was_reading() -> None:
    data = _rdb_file()
    keys = rdb.read_rdb(data)[2]
    assert [k.offset for k in keys][:1] == [data.index(b"\x00\x03str")]  # where each key starts
    inside = set()
    for cut in range(9, len(data)):
        with pytest.raises(rdb.RdbError) as refused:
            rdb.read_rdb(data[:cut])
        message = str(refused.value)
        assert message.startswith(f"truncated at byte {cut}, inside "), (cut, message)
        inside.add(message.split(", inside ", 1)[1].split(" at byte")[0])
    assert {'the value of stream key "s" (type 19)', "an AUX field",
            "the checksum after the end-of-RDB marker",
            "the next key or opcode (the file has no end-of-RDB marker)"} <= inside


def test_damage_names_its_byte_offset() -> None:
    data = bytearray(_rdb_file())
    data[data.index(b"\xfe\x00")] = 0xEE  # an opcode that does not exist
    with pytest.raises(rdb.RdbError, match=r"unknown RDB opcode or type 238 at byte \d+"):
        rdb.read_rdb(bytes(data))
    good = _rdb_file()
    with pytest.raises(rdb.RdbError, match=r"checksum mismatch: the CRC-64 at byte \d+"):
        rdb.read_rdb(good[:-1] + bytes([good[-1] ^ 1]))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_refusal_of_a_damaged_file_says_where(data) -> None:
    raw = bytearray(_rdb_file())
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(9, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del raw[data.draw(st.integers(9, len(raw) - 1)):]
    try:
        rdb.read_rdb(bytes(raw))
    except rdb.RdbError as err:
        assert " at byte " in str(err), str(err)


# --- string keys and TTLs ---------------------------------------------------------------------

# "streamkeep streamkeep ... " as Redis's LZF writes it: a literal, then back references.
_LZF_VALUE = b"streamkeep " * 40


def _lzf(value: bytes, period: int) -> bytes:
    """`value` (repeating every `period` bytes) LZF-encoded as Redis's lzf_compress would: the
    first period as a literal, then back references of that distance (each at most 264 bytes
    long)."""
    out = bytearray(bytes((period - 1,)) + value[:period])
    left = len(value) - period
    while left:
        n = min(left, 264)
        if n < 9:
            out += bytes(((n - 2) << 5, period - 1))
        else:
            out += bytes((7 << 5, n - 9, period - 1))
        left -= n
    return bytes(out)


def _strings_file() -> bytes:
    """Strings in every encoding Redis writes (raw, int8/16/32, LZF value and LZF key), TTLs
    in both forms (EXPIRETIME_MS, and the old EXPIRETIME in seconds) before strings and a
    stream."""
    e = Engine(clock=lambda: 1_700_000_000_000)
    e.execute("XADD", "s", "1-1", "f", "v")
    lzf = _lzf(_LZF_VALUE, 11)
    length = rdb.encode_length
    long_key = b"key" * 10
    body = (b"REDIS0010" + b"\xfe\x00\xfb" + length(8) + length(3)
            + b"\x00" + rdb.encode_string(b"raw") + rdb.encode_string(b"hello")
            + b"\x00" + rdb.encode_string(b"i8") + b"\xc0\xf9"
            + b"\x00" + rdb.encode_string(b"i16") + b"\xc1" + struct.pack("<h", 1234)
            + b"\xfc" + struct.pack("<q", 1_800_000_000_123)
            + b"\x00" + rdb.encode_string(b"i32") + b"\xc2" + struct.pack("<i", -2_000_000_000)
            + b"\xfd" + struct.pack("<I", 1_800_000_000)
            + b"\x00" + rdb.encode_string(b"lzf") + b"\xc3" + length(len(lzf))
            + length(len(_LZF_VALUE)) + lzf
            + b"\x00" + b"\xc3" + length(len(_lzf(long_key, 3))) + length(len(long_key))
            + _lzf(long_key, 3) + rdb.encode_string(b"v")
            + b"\xfc" + struct.pack("<q", 1_900_000_000_000)
            + b"\x13" + rdb.encode_string(b"s") + rdb.write_stream(e.dbs[0][b"s"], 19)
            + b"\x00" + rdb.encode_string(b"empty") + rdb.encode_string(b"")
            + b"\xff")
    return body + struct.pack("<Q", rdb.crc64(body))


def test_strings_of_every_encoding_and_ttls_of_both_forms() -> None:
    _version, _aux, keys = rdb.read_rdb(_strings_file())
    got = {k.key: (k.rdb_type, k.expire_ms) for k in keys}
    assert got == {b"raw": (0, None), b"i8": (0, None), b"i16": (0, None),
                   b"i32": (0, 1_800_000_000_123), b"lzf": (0, 1_800_000_000_000),
                   b"key" * 10: (0, None), b"s": (19, 1_900_000_000_000), b"empty": (0, None)}
    values = {k.key: rdb.string_value(k.value) for k in keys if k.rdb_type == 0}
    assert values == {b"raw": b"hello", b"i8": b"-7", b"i16": b"1234", b"i32": b"-2000000000",
                      b"lzf": _LZF_VALUE, b"key" * 10: b"v", b"empty": b""}
    # The writer: each string and TTL read back the same (integers encoded as Redis does).
    e = Engine()
    e.execute("XADD", "s", "1-1", "f", "v")
    items = [(b"n", b"-2000000000", 5), (b"s", e.dbs[0][b"s"], 7), (b"x", b"007", None)]
    _v, _a, back = rdb.read_rdb(b"".join(rdb.write_rdb(10, [], [(0, 3, 2, items)])))
    assert [(k.key, k.rdb_type, k.expire_ms, k.value[:1]) for k in back] == [
        (b"n", 0, 5, b"\xc2"), (b"s", 19, 7, b"\x01"), (b"x", 0, None, b"\x03")]


def test_hostile_string_lengths_are_refused_naming_the_key_and_offset() -> None:
    head = b"REDIS0010\xfe\x00"
    at = len(head)
    huge = b"\x81" + struct.pack(">Q", (1 << 64) - 1)
    for value, said in [
        (huge, "truncated at byte {size}, inside the value of string key \"k\" (type 0) at "
               "byte {at}"),
        # LZF announcing 2^64-1 bytes from 2: refused before anything that size is made
        (b"\xc3\x03" + huge + b"\x01ab", "bad LZF length at byte {end}, inside the value of "
                                          "string key \"k\" (type 0) at byte {at}"),
        (b"\xc3" + huge + b"\x05", "truncated at byte {size}, inside the value of string key"),
        (b"\xc3\x02\x06\x40\x09", "bad LZF data at byte {end}, inside the value of string key"),
        (b"\xc4", "unknown string encoding 4 at byte {end}, inside the value of string key"),
        (b"\xc2\x01", "truncated at byte {size}, inside the value of string key"),
    ]:
        data = head + b"\x00\x01k" + value
        with pytest.raises(rdb.RdbError) as refused:
            rdb.read_rdb(data)
        expected = said.format(size=len(data), at=at, end=len(data))
        assert str(refused.value).startswith(expected), (value, str(refused.value))
    with pytest.raises(rdb.RdbError, match=r"truncated at byte 18, inside an expiry \(ms\) at byte 11"):
        rdb.read_rdb(head + b"\xfc\x01\x02\x03\x04\x05\x06")


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_damaged_string_files_raise_rdb_error_saying_where(data) -> None:
    raw = bytearray(_strings_file()[:-8])
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(9, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw += struct.pack("<Q", rdb.crc64(bytes(raw)))  # the damage gets past the checksum
    if data.draw(st.booleans()):
        del raw[data.draw(st.integers(9, len(raw) - 1)):]
    try:
        _v, _a, keys = rdb.read_rdb(bytes(raw))
    except rdb.RdbError as err:
        assert " at byte " in str(err), str(err)
        return
    for key in keys:  # what the file's structure passed decodes or is refused, nothing else
        if key.rdb_type == 0:
            with contextlib.suppress(rdb.RdbError):
                rdb.string_value(key.value)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=st.binary(max_size=40), ulen=st.integers(0, 1 << 64))
def test_lzf_of_arbitrary_bytes_and_lengths_is_refused_or_read(codec, value: bytes,
                                                               ulen: int) -> None:
    try:
        out = codec.lzf_decompress(value, ulen)
    except rdb.RdbError as err:
        assert str(err) in ("bad LZF data", "bad LZF length")
    else:
        assert len(out) == ulen <= 264 * len(value)


# --- which version a stream needs ----------------------------------------------------------------

def _made(*commands: tuple[str, ...]) -> Engine:
    engine = Engine()
    for i in range(1, 11):
        engine.execute("XADD", "s", f"{i}-0", "f", str(i))
    for argv in commands:
        engine.execute(*argv)
    return engine


# (commands after ten XADDs to s, the version it needs, what needs it)
NEEDS = {
    "plain": ((), 9, ""),
    # (created at $: entries-read is unknown, -1, which type 15's loader would estimate)
    "a group created at the end": ((("XGROUP", "CREATE", "s", "g", "$"),), 10, "entries-read"),
    "a group created with its count": ((("XGROUP", "CREATE", "s", "g", "$", "ENTRIESREAD",
                                         "10"),), 9, ""),
    "a group that read all": ((("XGROUP", "CREATE", "s", "g", "0"),
                               ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")), 9, ""),
    "a group behind": ((("XGROUP", "CREATE", "s", "g", "0"),
                        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "3", "STREAMS", "s", ">")),
                       10, "entries-read"),
    "a deletion": ((("XDEL", "s", "4-0"),), 10, "last deleted"),
    "a trim": ((("XTRIM", "s", "MAXLEN", "5"),), 10, "entries ever added"),
    "a consumer created": ((("XGROUP", "CREATE", "s", "g", "$", "ENTRIESREAD", "10"),
                            ("XGROUP", "CREATECONSUMER", "s", "g", "idle")), 11, "active time"),
    "idempotent producers": ((("XADD", "s", "IDMP", "p1", "i1", "*", "f", "v"),), 13, "IDMP"),
}


def _round_trip(s: object, version: int) -> list:
    from streamkeep.engine.model.digest import stream_state

    data = rdb.write_stream(s, rdb.TYPE_STREAM[version])  # type: ignore[arg-type]
    return stream_state(rdb.read_stream(rdb.Reader(data), rdb.TYPE_STREAM[version]))


@pytest.mark.parametrize("case", sorted(NEEDS))
def test_the_version_needed_holds_the_stream_and_the_one_before_does_not(case: str) -> None:
    from streamkeep.engine.model.digest import stream_state

    commands, version, why = NEEDS[case]
    s = _made(*commands).dbs[0][b"s"]
    assert rdb.version_needed(s)[0] == version
    assert why in rdb.version_needed(s)[1]
    assert _round_trip(s, version) == stream_state(s)
    older = {10: 9, 11: 10, 13: 11}.get(version)  # (12 writes what 11 does)
    if older is not None:
        assert _round_trip(s, older) != stream_state(s)
    assert rdb.REDIS_LOADING[version].startswith("Redis ")


def test_entries_xnack_released_take_the_newest_version() -> None:
    engine = _made(("XGROUP", "CREATE", "s", "g", "0"),
                   ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
                   ("XNACK", "s", "g", "FAIL", "IDS", "1", "3-0"))
    version, why = rdb.version_needed(engine.dbs[0][b"s"])
    assert version == 14 and "XNACK" in why and '"g"' in why


def test_a_key_named_in_a_message_keeps_the_message_one_line() -> None:
    shown = rdb.key_text(b"a\nb\r\x01\xff" + b"k" * 80)
    assert shown.startswith('"a\\nb\\r\\x01\\xff') and shown.endswith('k..."')
    assert shown.isprintable()


# --- RDB 14 and 15 (Redis 8.8, 8.10), Valkey 9, the codec registry --------------------------------
# Layouts from public parsers of RDB 14 (redis/librdb 2.3.0's NACK zone and array), the Valkey 9
# sources' notes (VALKEY080, type 22's fields with their expiries, the slot-import opcode), Redis
# 8.6's key metadata (opcode 243): hand-built here byte by byte.

L, S = rdb.encode_length, rdb.encode_string
_id, _xnacked, _closed = id_bytes, xnacked, closed
_rdb14_file, _valkey_file, _array = rdb14_file, valkey_file, array_value


def test_type_27_is_type_26_with_each_groups_nack_zone() -> None:
    s = _xnacked().dbs[0][b"s"]
    v26, v27 = rdb.write_stream(s, 26), rdb.write_stream(s, 27)
    # The one group is the value's last before the IDMP tail (five zero lengths: no IDMP); its
    # NACK zone follows its consumers: a count, then 16-byte IDs.
    assert v26.endswith(L(0) * 5)
    assert v27 == v26[:-5] + L(1) + _id(2) + v26[-5:]
    back = rdb.read_stream(rdb.Reader(v27), 27)
    pel = back.groups[b"g"].pel
    assert sorted(pel) == [1 << 64, 2 << 64, 3 << 64]
    assert pel[2 << 64].consumer is None and pel[1 << 64].consumer is not None
    r = rdb.Reader(v27)
    rdb.skip_stream(r, 27)
    assert r.pos == len(v27)


def test_an_rdb_14_file_reads_its_stream_skips_the_array_and_the_key_metadata() -> None:
    version, aux, keys = rdb.read_rdb(_rdb14_file())
    assert version == 14 and aux == {b"redis-ver": b"8.8.0"}
    assert [(k.key, k.rdb_type) for k in keys] == [(b"s", 27), (b"arr", 28), (b"str", 0)]
    assert rdb.string_value(keys[2].value) == b"v"
    assert rdb.describe_skipped(keys) == 'array 1 ("arr")'
    original = _xnacked()
    e = Engine(clock=lambda: 1_700_000_000_000)
    assert e.execute("RESTORE", "s", "0", rdb.payload_from(27, keys[0].value, 14)) == "OK"
    for argv in (("XPENDING", "s", "g", "-", "+", "10"), ("XRANGE", "s", "-", "+"),
                 ("XINFO", "STREAM", "s", "FULL")):
        assert e.execute(*argv) == original.execute(*argv)


@pytest.mark.parametrize("nacked,said", [(_id(9), "not an unowned pending entry"),
                                         (_id(1), "not an unowned pending entry"),
                                         (_id(2) + _id(2), "not an unowned pending entry")])
def test_a_nack_zone_naming_no_released_entry_is_refused(nacked: bytes, said: str) -> None:
    s = _xnacked().dbs[0][b"s"]
    v26 = rdb.write_stream(s, 26)
    bad = v26[:-5] + L(len(nacked) // 16) + nacked + v26[-5:]
    with pytest.raises(rdb.RdbError, match=said):
        rdb.load_payload(rdb.payload_from(27, bad, 14))


def test_a_valkey_9_file_reads_with_its_header_slot_import_and_hash() -> None:
    data = _valkey_file()
    assert rdb.rdb_version(data) == 80
    version, aux, keys = rdb.read_rdb(data)
    assert version == 80 and aux == {b"valkey-ver": b"9.0.0"}
    assert [(k.key, k.rdb_type) for k in keys] == [(b"h", 22), (b"s", 21), (b"n", 0)]
    assert rdb.describe_skipped(keys) == 'hash 1 ("h")'
    e = Engine()
    # A DUMP payload under Valkey 9's footer (80): its types are RDB 11's.
    assert e.execute("RESTORE", "s", "0", rdb.payload_from(21, keys[1].value, 80)) == "OK"
    assert e.execute("XRANGE", "s", "-", "+") == [[b"1-1", [b"f", b"v"]]]
    for head, said in [(b"VALKEY081", "Valkey RDB version 81 is not one"),
                       (b"VALKEYx80", "VALKEY magic without a version number"),
                       (b"VALKEY0", "truncated at byte 7, inside the RDB header")]:
        with pytest.raises(rdb.RdbError, match=said):
            rdb.rdb_version(head)


def test_redis_8_10_layouts_unknown_here_are_refused_naming_them() -> None:
    templated = _closed(b"REDIS0015\xfe\x00\x1d" + S(b"h") + L(0) + b"\xff")
    with pytest.raises(rdb.RdbError, match=r"a templated hash \(RDB type 29, Redis 8.10\)"):
        rdb.read_rdb(templated)
    registry = _closed(b"REDIS0015\xf2" + L(0) + b"\xff")
    with pytest.raises(rdb.RdbError, match="a hash template registry .opcode 242"):
        rdb.read_rdb(registry)
    # (what a Redis 8.10 file holds otherwise reads as RDB 14's)
    assert rdb.read_rdb(_closed(b"REDIS0015" + _rdb14_file()[9:-9] + b"\xff"))[0] == 15


@pytest.mark.parametrize("version", sorted(rdb.TYPE_STREAM))
def test_every_version_written_reads_back(version: int) -> None:
    from streamkeep.engine.model.digest import stream_state

    original = _xnacked()
    s = original.dbs[0][b"s"]
    data = b"".join(rdb.write_rdb(version, [(b"redis-ver", b"x")], [
        (0, 2, 1, [(b"s", s, None), (b"k", b"12345", 1_900_000_000_000)])]))
    assert data[:9] == b"REDIS%04d" % version
    got, _aux, keys = rdb.read_rdb(data)
    assert got == version
    assert [(k.key, k.rdb_type, k.expire_ms) for k in keys] == [
        (b"s", rdb.TYPE_STREAM[version], None), (b"k", 0, 1_900_000_000_000)]
    assert rdb.string_value(keys[1].value) == b"12345"
    back = rdb.load_payload(rdb.payload_from(keys[0].rdb_type, keys[0].value, version))
    if version >= rdb.version_needed(s)[0]:  # 14 and 15: every field, the NACK zone too
        assert stream_state(back) == stream_state(s)
    assert [n.master for n in back.nodes] == [n.master for n in s.nodes]
    assert back.groups[b"g"].pel[2 << 64].consumer is None  # (types up to 26: kept unowned)


def test_the_registry_finds_a_codec_by_type_number() -> None:
    # strings and streams here; the other types' codecs once snapshot.rdb_types is imported
    assert rdb.stored_types() >= frozenset({0, 15, 19, 21, 26, 27})
    from streamkeep.snapshot import rdb_types  # noqa: F401
    assert rdb.stored_types() >= frozenset({0, 3, 5, 12, 15, 17, 19, 21, 26, 27})
    codec = rdb.value_codec(27)
    assert codec is not None and codec.name == "stream" and rdb.value_codec(28) is None
    assert rdb.value_codec(0).read(rdb.Reader(S(b"-12")), 0) == b"-12"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="taken"):
        rdb.register_value_codec((27,), codec.read, codec.write, name="stream")


def test_a_registered_codec_is_read_through_and_counted_no_more() -> None:
    """What a module adding a type does: its keys are then kept, not skipped."""
    data = _rdb14_file()
    try:
        rdb.register_value_codec((28,), lambda r, t: rdb._skip_array(r),
                                 lambda v, version: (28, b""), name="array")
        keys = rdb.read_rdb(data)[2]
        assert rdb.describe_skipped(keys) == ""
        assert keys[1].value == _array()
    finally:
        del rdb._CODECS[28]
    assert rdb.describe_skipped(rdb.read_rdb(data)[2]) == 'array 1 ("arr")'


def _hostile(data: bytes, at: bytes, value: bytes) -> bytes:
    """`data` with the length at the first `at` after byte 9 replaced by `value`, re-summed."""
    i = data.index(at, 9) + len(at)
    return _closed(data[:i] + value + data[i + 1:-9] + b"\xff")


def _nack_count_at(data: bytes) -> bytes:
    """What precedes the NACK zone's count of the type-27 value in `data` (its last 22 bytes
    are the count, the ID 2-0 and the five zero lengths of no IDMP)."""
    v27 = rdb.write_stream(_xnacked().dbs[0][b"s"], 27)
    assert v27 in data
    return v27[-40 - 22:-22]


# (which file, the bytes just before the length made hostile)
HOSTILE = {
    "nack count": (_rdb14_file, lambda: _nack_count_at(_rdb14_file())),
    "array count": (_rdb14_file, lambda: b"\x1c" + S(b"arr")),
    "array insert flag": (_rdb14_file, lambda: b"\x1c" + S(b"arr") + L(4)),
    "array tag": (_rdb14_file, lambda: b"\x1c" + S(b"arr") + L(4) + L(1) + L(9) + L(0)),
    "key meta classes": (_rdb14_file, lambda: _array() + b"\xf3"),
    "slot ranges": (_valkey_file, lambda: S(b"j" * 40)),
    "valkey hash fields": (_valkey_file, lambda: b"\x16" + S(b"h")),
}


@pytest.mark.parametrize("where", sorted(HOSTILE))
@pytest.mark.parametrize("value", [L(2**32 - 1), L(2**64 - 1), b"\x81" + b"\xff" * 8])
def test_hostile_lengths_in_the_new_layouts_are_refused_saying_where(where: str,
                                                                    value: bytes) -> None:
    made, before = HOSTILE[where]
    with pytest.raises(rdb.RdbError, match=" at byte "):
        rdb.read_rdb(_hostile(made(), before(), value))
    if where == "nack count":  # and RESTORE's full read of the value
        v27 = rdb.write_stream(_xnacked().dbs[0][b"s"], 27)
        with pytest.raises(rdb.RdbError):
            rdb.load_payload(rdb.payload_from(27, v27[:-22] + value + v27[-21:], 14))


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_damaged_rdb_14_and_valkey_files_raise_rdb_error_only(data) -> None:
    raw = bytearray(data.draw(st.sampled_from([_rdb14_file(), _valkey_file()])))
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    with contextlib.suppress(rdb.RdbError):  # anything else fails the example
        for key in rdb.read_rdb(bytes(raw))[2]:
            if key.rdb_type in rdb.STREAM_TYPES:
                rdb.load_payload(rdb.payload_from(key.rdb_type, key.value, 14))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_damaged_type_27_payloads_raise_rdb_error_only(data) -> None:
    raw = bytearray(rdb.write_stream(_xnacked().dbs[0][b"s"], 27))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    with contextlib.suppress(rdb.RdbError):
        rdb.load_payload(rdb.payload_from(27, bytes(raw), 14))
    r = rdb.Reader(bytes(raw))
    with contextlib.suppress(rdb.RdbError):
        rdb.skip_stream(r, 27)


# --- function libraries and Redis 8.10's (RDB 15) types -------------------------------------

def test_function_records_are_read_with_where_they_are_and_written_from_rdb_10() -> None:
    from tests.support.rdb_files import LIBRARY

    other = b"#!lua name=other\nredis.register_function('f', function() return 1 end)"
    data = b"".join(rdb.write_rdb(10, [(b"redis-ver", b"7.0.0")],
                                  [(0, 1, [(b"k", b"v")])], [LIBRARY, other]))
    contents = rdb.read_rdb_contents(data)
    assert [lib.code for lib in contents.libraries] == [LIBRARY, other]
    first = contents.libraries[0].offset
    assert data[first] == rdb.RDB_OPCODE_FUNCTION2 and data.index(b"\xf5") == first
    assert data.index(b"\xf5") < data.index(b"\xfe")  # after the AUX fields, before the keys
    assert rdb.read_rdb(data)[2] == contents.keys  # (read_rdb: the keys, as before)
    assert contents.end == len(data)
    with pytest.raises(rdb.RdbError, match="RDB version 9 cannot hold a function library"):
        b"".join(rdb.write_rdb(9, [], [], [LIBRARY]))


def test_a_pre_release_function_record_is_refused_as_redis_refuses_it() -> None:
    data = _closed(b"REDIS0010\xf6" + S(b"lib") + S(b"LUA") + L(0) + S(b"code") + b"\xff")
    with pytest.raises(rdb.RdbError, match=r"Redis 7.0's release candidates \(opcode 246\) at "
                                           r"byte 9"):
        rdb.read_rdb_contents(data)


def test_an_rdb_15_file_skips_its_templated_hashes_through_the_registry() -> None:
    from tests.support.rdb_files import LIBRARY, rdb15_file

    contents = rdb.read_rdb_contents(rdb15_file())
    assert contents.version == 15 and [lib.code for lib in contents.libraries] == [LIBRARY]
    assert [(k.key, k.rdb_type) for k in contents.keys] == [
        (b"k1", 30), (b"k2", 32), (b"d1", 29), (b"d2", 31), (b"d3", 31), (b"s", 27),
        (b"str", 0)]
    assert rdb.string_value(contents.keys[-1].value) == b"v"
    assert rdb.describe_skipped(contents.keys) == \
        'templated hash 5 ("k1", "k2", "d1", "d2", "d3")'
    e = Engine(clock=lambda: 1_700_000_000_000)
    assert e.execute("RESTORE", "s", "0", rdb.payload_from(27, contents.keys[5].value, 15)) \
        == "OK"
    assert e.execute("XRANGE", "s", "-", "+") == _xnacked().execute("XRANGE", "s", "-", "+")


def _rdb15(body: bytes) -> bytes:
    return _closed(b"REDIS0015\xfe\x00" + body + b"\x00" + S(b"after") + S(b"v") + b"\xff")


@pytest.mark.parametrize("body,said", [
    (b"\x20" + S(b"h") + L(7) + S(b"v"), "hash template 7 is not in the file's template "
                                         "registry"),
    (b"\x1e" + S(b"h") + S(rdb.listpack([5, b"v"])), "hash template 5 is not in the file's"),
    (b"\x1e" + S(b"h") + S(rdb.listpack([b"x", b"v"])), "hash template b'x' is not in"),
    (b"\xf2" + L(0) + L(1) + S(b"a") + b"\xf2" + L(0) + L(1) + S(b"b"),
     "hash template 0 is registered twice"),
    (b"\xf2" + L(3) + L(0), "hash template 3 has no field"),
    (b"\x1d" + S(b"h") + b"\x02" + S(b"x"), "unknown field-name format 2"),
    (b"\x1f" + S(b"h") + b"\x00" + S(b"not a listpack"), "templated hash .RDB type 31"),
])
def test_templated_hashes_that_cannot_be_read_past_are_refused_saying_why(body: bytes,
                                                                         said: str) -> None:
    with pytest.raises(rdb.RdbError, match=said) as refused:
        rdb.read_rdb(_rdb15(body))
    assert " at byte " in str(refused.value)
    # (the registry and the types are RDB 15's: an older file holds neither)
    with pytest.raises(rdb.RdbError, match="unknown RDB opcode or type 242"):
        rdb.read_rdb(_closed(b"REDIS0014\xf2" + L(0) + L(1) + S(b"a") + b"\xff"))


def test_a_templated_hash_cut_short_is_a_file_cut_short() -> None:
    from tests.support.rdb_files import rdb15_file

    data = rdb15_file()
    cut = data.index(b"\x1f" + S(b"d2")) + 6
    with pytest.raises(rdb.RdbError, match=rf"^truncated at byte {cut}, inside the value of "
                                           r"templated hash key \"d2\" \(type 31\)"):
        rdb.read_rdb(data[:cut])


def test_a_gcra_value_is_still_refused_naming_why() -> None:
    with pytest.raises(rdb.RdbError, match=r"a GCRA rate limiter \(RDB type 33, Redis 8.10\): a "
                                           r"type Redis 8.10 itself neither writes nor loads"):
        rdb.read_rdb(_rdb15(b"\x21" + S(b"limiter") + L(0)))


# (the bytes of templated_hashes() just before the length made hostile)
HOSTILE_15 = {
    "registry field count": b"\xf2" + L(1),
    "array ref template id": b"\x20" + S(b"k2"),
    "self-contained field count": b"\x1f" + S(b"d2") + b"\x01",
    "self-contained names listpack": b"\x1f" + S(b"d3") + b"\x00",
    "reference listpack": b"\x1e" + S(b"k1"),
}


@pytest.mark.parametrize("where", sorted(HOSTILE_15))
@pytest.mark.parametrize("value", [L(2**32 - 1), L(2**64 - 1), b"\x81" + b"\xff" * 8,
                                   L(2**14 - 1)])
def test_hostile_lengths_in_rdb_15_layouts_are_refused_saying_where(where: str,
                                                                   value: bytes) -> None:
    from tests.support.rdb_files import rdb15_file

    with pytest.raises(rdb.RdbError, match=" at byte "):
        rdb.read_rdb(_hostile(rdb15_file(), HOSTILE_15[where], value))


@pytest.mark.parametrize("tid", [2**32 - 1, 2**63 - 1, 2**64 - 1])
def test_any_template_id_is_taken_as_redis_takes_it(tid: int) -> None:
    # (Redis's registry maps any id to its template: only an id no template has is refused)
    lp_form = (b"\x1e" + S(b"a") + S(rdb.listpack([tid, b"v"]))) if tid < 2**63 else b""
    keys = rdb.read_rdb(_rdb15(b"\xf2" + L(tid) + L(1) + S(b"f") + lp_form
                               + b"\x20" + S(b"b") + L(tid) + S(b"v")))[2]
    assert [k.key for k in keys] == [b"a", b"b", b"after"][not lp_form:]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_damaged_rdb_15_files_raise_rdb_error_only(data) -> None:
    from tests.support.rdb_files import rdb15_file

    raw = bytearray(rdb15_file())
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    if data.draw(st.booleans()):  # the checksum made right again: the damage is read
        raw = bytearray(_closed(bytes(raw[:-8])))
    with contextlib.suppress(rdb.RdbError):  # anything else fails the example
        rdb.read_rdb_contents(bytes(raw))
