"""codec.verify_scan (CRC and LSN only) reaches the verdict of codec.scan (what recovery does) on
every LSN encoding and under seeded random damage; codec.next_valid_record finds where valid
records resume."""

from __future__ import annotations

import random

import pytest

from streamkeep.aof import codec


def segment(first_lsn: int, count: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    parts = [codec.encode_header(1, first_lsn)]
    for i in range(count):
        effects = [[b"XADD", b"s", b"%d-0" % i, b"f", rng.randbytes(rng.randint(0, 40))]]
        parts.append(codec.encode(first_lsn + i, 1_700_000_000_000 + 3 * i, i % 3, effects))
    return b"".join(parts)


def verdict(result: codec.VerifyResult | codec.ScanResult) -> tuple:
    damage = result.damage
    return (result.end, result.count,
            None if damage is None else (damage.offset, damage.reason, damage.valid_after))


@pytest.mark.parametrize("first_lsn", [1, 100, 200, 65_500, 2**32 - 20, 2**40])
def test_clean_segments_every_lsn_width(first_lsn: int) -> None:
    data = segment(first_lsn, 60)
    result = codec.verify_scan(data, codec.HEADER_SIZE, first_lsn)
    assert verdict(result) == (len(data), 60, None)
    assert (result.first_time_ms, result.last_time_ms) == (1_700_000_000_000,
                                                           1_700_000_000_000 + 3 * 59)
    wrong = codec.verify_scan(data, codec.HEADER_SIZE, first_lsn + 1)
    assert verdict(wrong) == verdict(codec.scan(data, codec.HEADER_SIZE, first_lsn + 1))
    assert wrong.count == 0 and wrong.damage is not None and wrong.damage.valid_after


def test_empty_segment() -> None:
    data = segment(5, 0)
    result = codec.verify_scan(data, codec.HEADER_SIZE, 5)
    assert verdict(result) == (codec.HEADER_SIZE, 0, None)
    assert result.first_time_ms is None and result.last_time_ms is None


@pytest.mark.parametrize("seed", range(40))
def test_same_verdict_as_scan_under_damage(seed: int) -> None:
    rng = random.Random(seed)
    first_lsn = rng.choice([1, 120, 65_530])
    data = bytearray(segment(first_lsn, 50, seed))
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
    assert verdict(codec.verify_scan(blob, codec.HEADER_SIZE, first_lsn)) == \
        verdict(codec.scan(blob, codec.HEADER_SIZE, first_lsn)), kind


def test_next_valid_record() -> None:
    data = bytearray(segment(10, 20))
    scan = codec.scan(bytes(data), codec.HEADER_SIZE, 10)
    offsets = [codec.HEADER_SIZE]
    pos = codec.HEADER_SIZE
    for _ in range(19):
        pos += codec.FRAME_SIZE + codec.FRAME.unpack_from(data, pos)[0]
        offsets.append(pos)
    assert scan.count == 20
    data[offsets[4] + 10] ^= 0xFF
    assert codec.next_valid_record(bytes(data), offsets[4], 14) == (offsets[5], 15)
    assert codec.next_valid_record(bytes(data), offsets[19], 30) is None
