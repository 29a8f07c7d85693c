"""The packed blobs of the older RDB types (snapshot.rdb_packed): ziplists written as Redis 6
writes them (every integer form, the 5-byte previous-entry length past 253 bytes, the count
saturating at 65535) and read back with every check, zipmaps, intsets at each width; hostile
bytes refused with RdbError only."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.snapshot.rdb import RdbError
from streamkeep.snapshot.rdb_packed import (
    as_bytes,
    groups,
    intset,
    intset_values,
    ziplist,
    ziplist_items,
    zipmap_pairs,
)


def test_ziplist_integer_forms_and_strings() -> None:
    values = [b"0", b"12", b"13", b"-1", b"127", b"-128", b"300", b"-32768", b"70000",
              b"-8388608", b"8388608", b"2147483647", b"-2147483649",
              b"9223372036854775807", b"007", b"+1", b"-0", b"x" * 63, b"y" * 64, b"z" * 16384]
    zl = ziplist(values)
    items = ziplist_items(zl)
    assert [as_bytes(v) for v in items] == values
    assert [type(v) for v in items[:14]] == [int] * 14  # strict decimals: integer entries
    assert items[14:17] == [b"007", b"+1", b"-0"]  # not canonical: strings
    head = struct.unpack_from("<IIH", zl)
    assert head[0] == len(zl) and head[2] == len(values)
    # An entry after one of 254 bytes or more gives its previous length in 5 bytes.
    zl = ziplist([b"a" * 300, b"b"])
    assert zl[10 + 1 + 2 + 300] == 0xFE  # (the second entry: a 5-byte previous length)


def test_ziplist_count_saturates() -> None:
    zl = ziplist([b"a"] * 65536)
    assert struct.unpack_from("<H", zl, 8)[0] == 0xFFFF and len(ziplist_items(zl)) == 65536


@pytest.mark.parametrize("damage", [
    lambda zl: zl[:-1] + b"\x00",  # no end marker
    lambda zl: struct.pack("<I", len(zl) + 1) + zl[4:],  # a wrong byte count
    lambda zl: zl[:4] + struct.pack("<I", 11) + zl[8:],  # a wrong tail offset
    lambda zl: zl[:8] + struct.pack("<H", 5) + zl[10:],  # a wrong count
    lambda zl: zl[:10] + b"\x05" + zl[11:],  # the first entry's previous length is not 0
])
def test_ziplist_checks(damage) -> None:  # type: ignore[no-untyped-def]
    zl = ziplist([b"a", b"1", b"bb"])
    assert ziplist_items(zl) == [b"a", 1, b"bb"]
    with pytest.raises(RdbError):
        ziplist_items(damage(zl))


def test_zipmaps() -> None:
    big = b"v" * 300
    zm = (b"\x02" + b"\x01f\x03\x02abc\x00\x00" + b"\x01g\xfe" + struct.pack("<I", 300)
          + b"\x00" + big + b"\xff")
    assert zipmap_pairs(zm) == [(b"f", b"abc"), (b"g", big)]
    for bad in (b"", b"\x01", b"\x01\x05f\xff", b"\x01\x01f\x01\x05v\xff"):
        with pytest.raises(RdbError):
            zipmap_pairs(bad)


def test_intsets() -> None:
    for values, width in (([], 2), ([-32768, 32767], 2), ([-32769], 4), ([1 << 31], 8)):
        blob = intset(values)
        assert struct.unpack_from("<I", blob)[0] == width and intset_values(blob) == values
    for bad in (b"", struct.pack("<II", 3, 0), struct.pack("<IIh", 2, 2, 1),
                struct.pack("<IIhh", 2, 2, 2, 1)):
        with pytest.raises(RdbError):
            intset_values(bad)


def test_groups_divide_or_refuse() -> None:
    assert groups([b"a", 1, b"b", 2], 2, "x") == [[b"a", 1], [b"b", 2]]
    with pytest.raises(RdbError, match="x: an odd number"):
        groups([b"a", 1, b"b"], 2, "x")


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=200), seed=st.binary(min_size=1, max_size=40))
def test_hostile_blobs_raise_rdb_error_only(data: bytes, seed: bytes) -> None:
    zl = bytearray(ziplist([seed, b"12", seed * 3]))
    zl[data[0] % len(zl) if data else 0] = data[1] if len(data) > 1 else 0
    for blob in (data, bytes(zl)):
        for reader in (ziplist_items, zipmap_pairs, intset_values):
            with contextlib.suppress(RdbError):
                reader(blob)
