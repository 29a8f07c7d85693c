"""The AOF's streaming decoder (aof.codec.scan_batches), which replay decodes segments with
batch by batch: it yields exactly the records scan returns, and the same end and damage."""

from __future__ import annotations

import pytest

from streamkeep.aof.codec import HEADER_SIZE, ScanResult, encode, encode_header, scan, scan_batches


def _segment(records: list[tuple]) -> bytes:
    return encode_header(1, 1) + b"".join(encode(*r) for r in records)


def _collect(data: bytes, batch_size: int) -> tuple[list[tuple], ScanResult, list[int]]:
    result = ScanResult(end=HEADER_SIZE)
    out: list[tuple] = []
    sizes = []
    for batch in scan_batches(data, HEADER_SIZE, 1, result, batch_size):
        sizes.append(len(batch))
        out += batch
    return out, result, sizes


@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_scan_batches_yields_what_scan_returns(batch_size: int) -> None:
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
        whole = scan(blob, HEADER_SIZE, 1)
        out, result, sizes = _collect(blob, batch_size)
        assert out == whole.records, name
        assert (result.end, result.damage) == (whole.end, whole.damage), name
        assert result.count == len(whole.records), name
        assert all(0 < size <= batch_size for size in sizes), name
    assert scan(data, HEADER_SIZE, 1).damage is None
    assert len(scan(cases["torn tail"], HEADER_SIZE, 1).records) == 39
    damaged = scan(cases["damage with valid records after"], HEADER_SIZE, 1)
    assert len(damaged.records) == 20 and damaged.damage is not None
    assert damaged.damage.valid_after


def test_encode_parts_is_encode_without_copying_big_values() -> None:
    """A record with big arguments, framed in parts: the same bytes as encode() (any array and
    bin header size), and each big argument is the caller's object itself."""
    from streamkeep.aof.codec import BIG_ARG, encode_parts, has_big_arg

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
