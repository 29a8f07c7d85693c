"""The AOF's streaming decoder (aof.codec.scan_batches), which replay decodes segments with
batch by batch: it yields exactly the records scan returns, and the same end and damage; and
verify_scan (CRC and LSN only, for `streamkeep aof verify`) reaches scan's verdict on every LSN
encoding and under seeded random damage, and next_valid_record finds where records resume.
Each test runs against both twins of the record functions (`impl`: _codec_py and _codec_c).

The second half holds the twins' differential tests: they agree on every input (the same
bytes from encoding, the same records, ends, damage reports and errors from scanning) for
random records under random damage (flipped bytes, truncation, garbage, hostile length
fields), for arbitrary msgpack payloads carrying a valid CRC, and for argument types the
compiled fast paths hand back to the reference. The hostile-length fuzz runs the compiled
parser in a child process, so a crash fails the test instead of pytest."""

from __future__ import annotations

import random
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import crcmod.predefined
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.aof import codec
from streamkeep.aof.codec import HEADER_SIZE, ScanResult, encode_header
from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

impl = kernel_fixture("streamkeep.aof", "codec")


def _segment(records: list[tuple]) -> bytes:
    return encode_header(1, 1) + b"".join(codec.encode(*r) for r in records)


def _collect(impl: Any, data: bytes, batch_size: int
             ) -> tuple[list[tuple], ScanResult, list[int]]:
    result = ScanResult(end=HEADER_SIZE)
    out: list[tuple] = []
    sizes = []
    for batch in impl.scan_batches(data, HEADER_SIZE, 1, result, batch_size):
        sizes.append(len(batch))
        out += batch
    return out, result, sizes


@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_scan_batches_yields_what_scan_returns(impl: Any, batch_size: int) -> None:
    records = [(i, 100 + i, i % 3, [[b"XADD", b"s", b"%d-0" % i, b"f", b"v" * i]])
               for i in range(1, 41)]
    data = _segment(records)
    cases = {"clean": data}
    cut = len(data) - 5
    cases["torn tail"] = data[:cut]
    middle = len(_segment(records[:20])) + 12  # inside record 21's payload
    flipped = bytearray(data)
    flipped[middle] ^= 0xFF
    cases["damage with valid records after"] = bytes(flipped)
    for name, blob in cases.items():
        whole = impl.scan(blob, HEADER_SIZE, 1)
        out, result, sizes = _collect(impl, blob, batch_size)
        assert out == whole.records, name
        assert (result.end, result.damage) == (whole.end, whole.damage), name
        assert result.count == len(whole.records), name
        assert all(0 < size <= batch_size for size in sizes), name
    assert impl.scan(data, HEADER_SIZE, 1).damage is None
    assert len(impl.scan(cases["torn tail"], HEADER_SIZE, 1).records) == 39
    damaged = impl.scan(cases["damage with valid records after"], HEADER_SIZE, 1)
    assert len(damaged.records) == 20 and damaged.damage is not None
    assert damaged.damage.valid_after


def test_encode_parts_is_encode_without_copying_big_values(impl: Any) -> None:
    """A record with big arguments, framed in parts: the same bytes as encode() (any array and
    bin header size), and each big argument is the caller's object itself."""
    from streamkeep.aof.codec import BIG_ARG
    encode, encode_parts, has_big_arg = impl.encode, impl.encode_parts, impl.has_big_arg

    big, bigger = b"v" * BIG_ARG, b"w" * (BIG_ARG + 70_000)
    cases = [
        [[b"XADD", b"s", b"1-1", b"f", big]],
        [[b"XADD", b"s", b"1-1", *([b"f", b"x" * 300] * 9), b"g", bigger], [b"a"] * 17],
        [[b"k"] * 70_000, [bigger, big, b"", b"y" * 65_536]],
    ]
    for effects in cases:
        assert has_big_arg(effects)
        parts = encode_parts(2**40, 2**41, 15, effects)
        assert b"".join(parts) == encode(2**40, 2**41, 15, effects)
        assert any(part is big or part is bigger for part in parts)
        assert impl.encode_small(2**40, 2**41, 15, effects) is None
    small = [[b"XADD", b"s", b"1-1", b"f", b"v" * (BIG_ARG - 1)], []]
    assert not has_big_arg(small)
    assert impl.encode_small(1, 2, 0, small) == encode(1, 2, 0, small)


# --- verify_scan ---------------------------------------------------------------------------------

def _verify_segment(first_lsn: int, count: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    parts = [codec.encode_header(1, first_lsn)]
    for i in range(count):
        effects = [[b"XADD", b"s", b"%d-0" % i, b"f", rng.randbytes(rng.randint(0, 40))]]
        parts.append(codec.encode(first_lsn + i, 1_700_000_000_000 + 3 * i, i % 3, effects))
    return b"".join(parts)


def _verdict(result: codec.VerifyResult | codec.ScanResult) -> tuple:
    damage = result.damage
    return (result.end, result.count,
            None if damage is None else (damage.offset, damage.reason, damage.valid_after))


@pytest.mark.parametrize("first_lsn", [1, 100, 200, 65_500, 2**32 - 20, 2**40])
def test_clean_segments_every_lsn_width(impl: Any, first_lsn: int) -> None:
    data = _verify_segment(first_lsn, 60)
    result = impl.verify_scan(data, codec.HEADER_SIZE, first_lsn)
    assert _verdict(result) == (len(data), 60, None)
    assert (result.first_time_ms, result.last_time_ms) == (1_700_000_000_000,
                                                           1_700_000_000_000 + 3 * 59)
    wrong = impl.verify_scan(data, codec.HEADER_SIZE, first_lsn + 1)
    assert _verdict(wrong) == _verdict(impl.scan(data, codec.HEADER_SIZE, first_lsn + 1))
    assert wrong.count == 0 and wrong.damage is not None and wrong.damage.valid_after


def test_empty_segment(impl: Any) -> None:
    data = _verify_segment(5, 0)
    result = impl.verify_scan(data, codec.HEADER_SIZE, 5)
    assert _verdict(result) == (codec.HEADER_SIZE, 0, None)
    assert result.first_time_ms is None and result.last_time_ms is None


@pytest.mark.parametrize("seed", range(80))
def test_same_verdict_as_scan_under_damage(impl: Any, seed: int) -> None:
    rng = random.Random(seed)
    first_lsn = rng.choice([1, 120, 65_530, 70_000, 2**32 - 25])
    data = bytearray(_verify_segment(first_lsn, 50, seed))
    kind = rng.choice(["flip", "truncate", "append", "zeros"])
    if kind == "flip":
        data[rng.randrange(codec.HEADER_SIZE, len(data))] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        del data[rng.randrange(codec.HEADER_SIZE, len(data)):]
    elif kind == "append":
        data += rng.randbytes(rng.randint(1, 200))
    else:
        at = rng.randrange(codec.HEADER_SIZE, len(data))
        data[at:at + 64] = bytes(len(data[at:at + 64]))
    blob = bytes(data)
    assert _verdict(impl.verify_scan(blob, codec.HEADER_SIZE, first_lsn)) == \
        _verdict(impl.scan(blob, codec.HEADER_SIZE, first_lsn)), kind


def test_next_valid_record(impl: Any) -> None:
    data = bytearray(_verify_segment(10, 20))
    scan = impl.scan(bytes(data), codec.HEADER_SIZE, 10)
    offsets = [codec.HEADER_SIZE]
    pos = codec.HEADER_SIZE
    for _ in range(19):
        pos += codec.FRAME_SIZE + codec.FRAME.unpack_from(data, pos)[0]
        offsets.append(pos)
    assert scan.count == 20
    data[offsets[4] + 10] ^= 0xFF
    assert impl.next_valid_record(bytes(data), offsets[4], 14) == (offsets[5], 15)
    assert impl.next_valid_record(bytes(data), offsets[19], 30) is None


# --- the twins agree ---------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
HEADER = HEADER_SIZE
FIRST = 1_000
CRC = crcmod.predefined.mkCrcFun("crc-32c")
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def twins() -> tuple[ModuleType, ModuleType]:
    return pure_and_compiled("streamkeep.aof", "codec")


def _frame(payload: bytes) -> bytes:
    return struct.pack("<II", len(payload), CRC(payload)) + payload


def _py_segment(py: ModuleType, records: list[tuple]) -> bytes:
    return encode_header(1, FIRST) + b"".join(py.encode(*r) for r in records)


# --- strategies ----------------------------------------------------------------------------------

INT_EDGES = [0, 1, 31, 32, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1, 2**63,
             2**64 - 1, 2**64, -1, -32, -33, -128, -129, -32768, -32769, -2**31, -2**31 - 1,
             -2**63, -2**63 - 1]
ints = st.one_of(st.sampled_from(INT_EDGES), st.integers(-2**70, 2**70), st.integers(0, 300))
blobs = st.one_of(st.binary(max_size=40),
                  st.sampled_from([255, 256, 65535, 65536]).map(lambda n: b"x" * n))
# Mostly what the engine logs (bytes, ints in lists/tuples), sometimes what it never does.
odd_leaves = st.one_of(st.text(max_size=5), st.floats(allow_nan=False), st.none(), st.booleans(),
                       st.binary(max_size=4).map(bytearray), st.just([[b"deep"]]))
leaves = st.one_of(blobs, ints, odd_leaves) | blobs | blobs
effect = st.lists(leaves, max_size=20).flatmap(lambda xs: st.sampled_from([xs, tuple(xs)]))
effects = st.lists(effect, max_size=4).flatmap(lambda xs: st.sampled_from([xs, tuple(xs)]))
records = st.tuples(ints, ints, st.one_of(st.integers(0, 15), ints), effects)

XADD_EFFECTS = st.lists(st.lists(st.binary(max_size=30), min_size=1, max_size=9), min_size=1,
                        max_size=3)

# Arbitrary msgpack values (maps, floats, ext, deep nesting) for payloads with a valid CRC.
mp_leaves = st.one_of(st.none(), st.booleans(), ints.filter(lambda v: -2**63 <= v < 2**64),
                      st.floats(allow_nan=False), st.binary(max_size=20), st.text(max_size=10))
mp_values = st.recursive(mp_leaves, lambda kids: st.one_of(
    st.lists(kids, max_size=5), st.dictionaries(st.binary(max_size=3), kids, max_size=3)),
    max_leaves=30)


# --- encoding ------------------------------------------------------------------------------------

@SETTINGS
@given(record=records)
def test_encode_is_byte_identical(twins: tuple, record: tuple) -> None:
    py, c = twins
    assert outcome(c.encode, *record) == outcome(py.encode, *record)
    assert outcome(c.has_big_arg, record[3]) == outcome(py.has_big_arg, record[3])
    assert outcome(c.encode_small, *record) == outcome(py.encode_small, *record)


@SETTINGS
@given(record=records, data=st.data())
def test_encode_odd_argument_types(twins: tuple, record: tuple, data: st.DataObject) -> None:
    """Fields that are not ints, effects that are not lists: the reference's answer or error."""
    py, c = twins
    odd = data.draw(st.one_of(odd_leaves, st.just(True), st.just(object()), st.just({1: 2})))
    lsn, time_ms, db, effs = record
    for args in [(odd, time_ms, db, effs), (lsn, odd, db, effs), (lsn, time_ms, odd, effs),
                 (lsn, time_ms, db, odd), (lsn, time_ms, db, [odd]), (lsn, time_ms, db, [[odd]])]:
        assert outcome(c.encode, *args) == outcome(py.encode, *args)
        assert outcome(c.has_big_arg, args[3]) == outcome(py.has_big_arg, args[3])
        assert outcome(c.encode_small, *args) == outcome(py.encode_small, *args)


def test_big_args_and_parts(twins: tuple) -> None:
    py, c = twins
    big = b"v" * py.BIG_ARG
    for effs in ([[b"XADD", b"s", big, b"f"]], [[big, 5]], [[b"a"], [b"b" * (py.BIG_ARG - 1)]],
                 [[b"k"] * 70_000, [big, big, b"y" * 65_536]], [[b"a", big], "x"], []):
        assert outcome(c.has_big_arg, effs) == outcome(py.has_big_arg, effs)
        assert outcome(c.encode_parts, 2**40, 7, 3, effs) == \
            outcome(py.encode_parts, 2**40, 7, 3, effs)
        assert outcome(c.encode, 2**40, 7, 3, effs) == outcome(py.encode, 2**40, 7, 3, effs)
        assert outcome(c.encode_small, 2**40, 7, 3, effs) == \
            outcome(py.encode_small, 2**40, 7, 3, effs)


@SETTINGS
@given(data=st.binary(max_size=3000), crc=st.integers(0, 2**32 - 1), cut=st.integers(0, 3000))
def test_crc32c_is_crcmods(twins: tuple, data: bytes, crc: int, cut: int) -> None:
    py, c = twins
    assert c.crc32c(data) == py.crc32c(data) == CRC(data)
    assert c.crc32c(data, crc) == py.crc32c(data, crc) == CRC(data, crc)
    assert c.crc32c(data[cut:], c.crc32c(data[:cut])) == CRC(data)
    assert c.crc32c(bytearray(data)) == c.crc32c(memoryview(data)) == CRC(data)
    assert c._crc32c_portable(data) == CRC(data)  # the tables, whatever the CPU runs


def test_crc32c_odd_arguments(twins: tuple) -> None:
    py, c = twins
    for args in [("text",), (5,), (memoryview(b"abcd")[::2],), (b"abc", -1), (b"abc", 2**32),
                 (b"abc", "x"), (None,)]:
        assert outcome(c.crc32c, *args) == outcome(py.crc32c, *args), args
    assert c.crc32c(b"123456789") == 0xE3069283


# --- scanning ------------------------------------------------------------------------------------

def _scan_all(m: ModuleType, data: Any, start: int, first: int, batch_size: int) -> tuple:
    """Everything scan_batches shows: each batch, and the result after each and at the end."""
    def run() -> tuple:
        result = m.ScanResult(end=start)
        seen = []
        for batch in m.scan_batches(data, start, first, result, batch_size):
            seen.append((list(batch), result.end, result.count))
        return seen, result
    return outcome(run)


def _everything(m: ModuleType, data: Any, start: int, first: int, batch_size: int) -> dict:
    return {
        "scan": outcome(m.scan, data, start, first),
        "batches": _scan_all(m, data, start, first, batch_size),
        "verify": outcome(m.verify_scan, data, start, first),
        "verify_part": outcome(m.verify_scan, data, start, first, start + 100),
        "stream": outcome(m.decode_stream, data, start, first),
        "stream_limited": outcome(m.decode_stream, data, start, first, 3),
        "tail": outcome(m.frames_in_tail, data, start),
        "offsets": outcome(m.frame_offsets, data, start, 5),
        "resync": outcome(m.next_valid_record, data, start, first),
        "resync_low": outcome(m.next_valid_record, data, start, 0),
    }


def _same(py: ModuleType, c: ModuleType, data: Any, start: int = HEADER, first: int = FIRST,
          batch_size: int = 3) -> None:
    want = _everything(py, data, start, first, batch_size)
    got = _everything(c, data, start, first, batch_size)
    for key in want:
        assert got[key] == want[key], key


damage_kinds = st.sampled_from(["none", "flip", "truncate", "garbage", "insert", "length",
                                "zeros"])
HOSTILE_LENGTHS = [0, 1, 4, 5, 12, 13, 2**31 - 1, 2**31, 2**32 - 1, 2**30, 2**30 + 1]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(effs=st.lists(XADD_EFFECTS, min_size=0, max_size=12), kind=damage_kinds,
       data=st.data(), first=st.sampled_from([FIRST, 1, 200, 65_530, 2**32 - 3, 2**40]))
def test_same_outcome_under_damage(twins: tuple, effs: list, kind: str, data: st.DataObject,
                                   first: int) -> None:
    py, c = twins
    recs = [(first + i, 1_700_000_000_000 + i, i % 16, e) for i, e in enumerate(effs)]
    blob = bytearray(encode_header(1, first) + b"".join(py.encode(*r) for r in recs))
    at = data.draw(st.integers(HEADER, max(HEADER, len(blob) - 1)))
    if kind == "flip" and len(blob) > HEADER:
        blob[at] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "truncate":
        del blob[at:]
    elif kind == "garbage":
        blob += data.draw(st.binary(min_size=1, max_size=200))
    elif kind == "insert":
        blob[at:at] = data.draw(st.binary(min_size=1, max_size=20))
    elif kind == "length":
        length = data.draw(st.one_of(st.sampled_from(HOSTILE_LENGTHS),
                                     st.integers(0, 2**32 - 1),
                                     st.integers(-3, 3).map(lambda d: max(0, len(blob) - at + d))))
        blob[at:at + 4] = struct.pack("<I", length & 0xFFFFFFFF)
        if data.draw(st.booleans()):
            del blob[at + 4:]
    elif kind == "zeros":
        blob[at:at + 64] = bytes(len(blob[at:at + 64]))
    _same(py, c, bytes(blob), HEADER, first, data.draw(st.integers(1, 5)))
    _same(py, c, bytearray(blob), HEADER, first, 64)


@SETTINGS
@given(payloads=st.lists(st.one_of(mp_values.map(lambda v: msgpack.packb(v, use_bin_type=True)),
                                   st.binary(max_size=40)), min_size=1, max_size=5),
       data=st.data())
def test_any_payload_with_a_valid_crc(twins: tuple, payloads: list, data: st.DataObject) -> None:
    """Frames whose CRC matches but whose payload is anything msgpack (or not msgpack): the
    compiled decoder's objects or msgpack's errors are the reference's."""
    py, c = twins
    good = py.encode(FIRST, 5, 1, [[b"XADD", b"s"]])
    body = b"".join(_frame(p) for p in payloads)
    for blob in (good + body, body, good + body + good):
        _same(py, c, b"\0" * HEADER + blob, HEADER, FIRST, data.draw(st.integers(1, 4)))


def _record_payload(lsn: Any, time_ms: Any, db: Any, effs: Any) -> bytes:
    return msgpack.packb([lsn, time_ms, db, effs], use_bin_type=True)


def test_payload_shapes_the_fast_decoder_must_refuse_or_match(twins: tuple) -> None:
    py, c = twins
    cases = [
        _record_payload(FIRST, 5, 1, [[b"a", "text", 1.5, None, True, -7, 2**64 - 1, -2**63]]),
        _record_payload(FIRST, 5, 1, [[[[[b"deep"]]]]]),
        _record_payload(FIRST, 5, 1, {b"k": 1}),
        _record_payload(float(FIRST), 5, 1, []),
        _record_payload(FIRST, True, 1, []),
        _record_payload(FIRST, 5, 16, []),
        _record_payload(FIRST, 5, -1, []),
        _record_payload(FIRST, 5, False, []),
        _record_payload(FIRST + 1, 5, 1, []),
        msgpack.packb([FIRST, 5, 1], use_bin_type=True),
        msgpack.packb([FIRST, 5, 1, [], 9], use_bin_type=True),
        msgpack.packb(b"\x01\x02\x03\x04"),  # a 4-byte bin unpacks into four ints
        bytes([FIRST & 0x7F]),
        _record_payload(FIRST, 5, 1, []) + b"\x00",  # trailing bytes
        b"\x94\xcd" + FIRST.to_bytes(2, "big") + b"\x05\x01\xdd\xff\xff\xff\xff",  # huge count
        b"\x94\xcd" + FIRST.to_bytes(2, "big") + b"\x05\x01\x91\xc6\xff\xff\xff\xff",  # huge bin
        b"\x94\xcd" + FIRST.to_bytes(2, "big") + b"\x05\x01\x91\xda\x00\x05ab",  # short str 16
        b"\x94\xcd" + FIRST.to_bytes(2, "big") + b"\x05\x01\x91" + b"\x91" * 5000 + b"\xc0",
        b"\x94\xcd" + FIRST.to_bytes(2, "big") + b"\x05\x01\x91\xc1",  # never-used byte
        b"\x94\xcd" + FIRST.to_bytes(2, "big") + b"\x05\x01\x91\xd4\x01\x02",  # fixext
        b"\x94\xcd" + FIRST.to_bytes(2, "big") + b"\x05\x01\x91\xd6\xff\x00\x00\x00\x01",
    ]
    # Short payloads that open with the expected LSN (in each uint width) and go on with junk:
    # verify_scan's fast path vouches only for 13 bytes or more, the rest is scan's to judge.
    for n in range(12):
        cases += [b"\x94\xcd" + FIRST.to_bytes(2, "big") + b"\xc1" * n,
                  b"\x94\xcf" + FIRST.to_bytes(8, "big") + b"\xc1" * n,
                  b"\x94\xce" + FIRST.to_bytes(4, "big") + b"\x05\x01\x90" + b"\xc1" * n,
                  _record_payload(FIRST, 5, 1, []) + b"\xc0" * n]
    for payload in cases:
        for blob in (_frame(payload), py.encode(FIRST, 5, 1, []) + _frame(payload)):
            _same(py, c, b"\0" * HEADER + blob)
            _same(py, c, b"\0" * HEADER + blob, first=FIRST - 1)


def test_argument_types_the_fast_paths_hand_back(twins: tuple) -> None:
    py, c = twins
    data = _py_segment(py, [(FIRST + i, 1, 0, [[b"a"]]) for i in range(5)])
    for blob in (memoryview(data), "text", None, list(data)):
        for m_args in [("scan", (blob, HEADER, FIRST)), ("verify_scan", (blob, HEADER, FIRST)),
                       ("decode_stream", (blob, HEADER, FIRST)), ("frames_in_tail", (blob, 0)),
                       ("frame_offsets", (blob, HEADER, 2)),
                       ("next_valid_record", (blob, HEADER, FIRST))]:
            name, args = m_args
            assert outcome(getattr(c, name), *args) == outcome(getattr(py, name), *args), name
    for start in (-1, -40, len(data), len(data) + 5, True):
        _same(py, c, data, start)
    for first in (-5, 0, 2**64 + 3, 2**63):
        _same(py, c, data, HEADER, first)
    for size in (0, -1):
        assert outcome(_scan_all, c, data, HEADER, FIRST, size) == \
            outcome(_scan_all, py, data, HEADER, FIRST, size)
    for stop in (-5, 0, HEADER, HEADER + 1, len(data) - 1, len(data) + 100):
        assert outcome(c.verify_scan, data, HEADER, FIRST, stop) == \
            outcome(py.verify_scan, data, HEADER, FIRST, stop)
    for count in (-1, 0, 5, 6, 2**70):
        assert outcome(c.frame_offsets, data, HEADER, count) == \
            outcome(py.frame_offsets, data, HEADER, count)
    for limit in (-1, 0, 2, 2**70):
        assert outcome(c.decode_stream, data, HEADER, FIRST, limit) == \
            outcome(py.decode_stream, data, HEADER, FIRST, limit)


# --- hostile lengths -------------------------------------------------------------------------------

def _hostile_blobs() -> list[bytes]:
    """Frames whose length field is 0, tiny, huge, past the end or at 2**32 - 1 (negative if
    read signed), alone, after good records and before them."""
    from streamkeep.aof import _codec_py as py

    good = b"".join(py.encode(FIRST + i, 7, 0, [[b"XADD", b"s", b"v" * i]]) for i in range(3))
    blobs = []
    for length in [*HOSTILE_LENGTHS, 2**32 - 8, 2**32 - 9, 0x80000000, 0xFFFFFFF8]:
        for crc in (0, 0xFFFFFFFF, CRC(b"")):
            frame = struct.pack("<II", length, crc)
            for tail in (b"", b"\x94", good, b"\xff" * 40):
                blobs += [frame + tail, good + frame + tail, good[:20] + frame + good]
    return blobs


def test_hostile_lengths_same_report(twins: tuple) -> None:
    py, c = twins
    for blob in _hostile_blobs():
        _same(py, c, b"\0" * HEADER + blob)
        _same(py, c, b"\0" * HEADER + blob, first=FIRST + 3)


FUZZ_CHILD = textwrap.dedent("""
    import random, struct, sys
    from streamkeep.aof import _codec_c as c
    rng = random.Random(int(sys.argv[1]))
    good = b"".join(c.encode(1000 + i, 7, 0, [[b"XADD", b"s", b"v" * i]]) for i in range(20))
    for _ in range(int(sys.argv[2])):
        blob = bytearray(b"\\0" * 32 + good)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(32, len(blob))
            field = rng.choice([0, 1, 13, 2**31, 2**32 - 1, 2**30 + 1, len(blob) - at - 8,
                                len(blob) - at - 7, rng.getrandbits(32)])
            blob[at:at + 4] = struct.pack("<I", field & 0xFFFFFFFF)
        if rng.random() < 0.3:
            del blob[rng.randrange(32, len(blob)):]
        data = bytes(blob)
        c.scan(data, 32, 1000)
        c.verify_scan(data, 32, 1000)
        c.verify_scan(data, 32, 1000, rng.randrange(len(data) + 1))
        c.frames_in_tail(data, 32)
        c.next_valid_record(data, 32, 1000)
        try:
            c.decode_stream(data, 32, 1000)
        except Exception as exc:
            assert type(exc).__name__ == "FormatError", exc
        try:
            c.frame_offsets(data, 32, 25)
        except ValueError:
            pass
    print("ok")
""")


@pytest.mark.parametrize("seed", [1, 2])
def test_hostile_length_fuzz_in_a_child(twins: tuple, seed: int) -> None:
    """The compiled parser over thousands of damaged segments, in a child: a crash (a bad
    read) is a failed test, not a dead pytest."""
    done = subprocess.run([sys.executable, "-c", FUZZ_CHILD, str(seed), "2000"],
                          capture_output=True, text=True, cwd=ROOT.parent, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.slow
def test_hostile_length_fuzz_long(twins: tuple) -> None:
    done = subprocess.run([sys.executable, "-c", FUZZ_CHILD, "7", "50000"],
                          capture_output=True, text=True, cwd=ROOT.parent, timeout=900)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
