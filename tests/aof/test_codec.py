"""The AOF's streaming decoder (aof.codec.scan_batches), which replay decodes segments with
batch by batch: it yields exactly the records scan returns, and the same end and damage; and
verify_scan (CRC and LSN only, for `streamkeep aof verify`) reaches scan's verdict on every LSN
encoding and under seeded random damage, and next_valid_record finds where records resume.
Each test runs against both twins of the record functions (`impl`: _codec_py and _codec_c)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from streamkeep.aof import codec
from streamkeep.aof.codec import HEADER_SIZE, ScanResult, encode_header
from tests.support.kernels import kernel_fixture

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
    assert not has_big_arg([[b"XADD", b"s", b"1-1", b"f", b"v" * (BIG_ARG - 1)], []])


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
