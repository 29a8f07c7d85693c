"""engine.model.listpack: the compiled kernel against its pure-Python reference.

Each test runs on both twins (`impl`); the hypothesis tests feed the same input to both and
require the same outcome, errors included. Listpack sizes are also checked against the
encoding itself: snapshot.rdb's listpack writer, whose output redis-server loads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

listpack_impl = kernel_fixture("streamkeep.engine.model", "listpack")

INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
U64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
NUMERIC = st.one_of(INT64.map(lambda v: b"%d" % v), st.integers().map(lambda v: b"%d" % v),
                    st.sampled_from([b"0", b"-0", b"00", b"01", b"-", b"+1", b" 1", b"1 ",
                                     b"9223372036854775807", b"9223372036854775808",
                                     b"-9223372036854775808", b"-9223372036854775809",
                                     b"18446744073709551616", b"99999999999999999999",
                                     b"\xd9\xa1", b"1\x00"]))
VALUES = st.one_of(NUMERIC, st.binary(max_size=70), st.binary(min_size=4090, max_size=4100))


@pytest.mark.parametrize("value,size", [
    (0, 2), (127, 2), (128, 3), (-1, 3), (-4096, 3), (4095, 3), (4096, 4), (-32769, 5),
    (8388607, 5), (8388608, 6), ((1 << 31) - 1, 6), (1 << 31, 10), (-(1 << 63), 10),
    ((1 << 63) - 1, 10)])
def test_int_size(listpack_impl, value: int, size: int) -> None:
    assert listpack_impl.int_size(value) == size


@pytest.mark.parametrize("text,size", [
    (b"", 2), (b"a", 3), (b"0", 2), (b"-0", 4), (b"007", 5), (b"123", 2), (b"128", 3), (b"-5", 3),
    (b"x" * 62, 64), (b"x" * 63, 65), (b"x" * 64, 67), (b"x" * 125, 128), (b"x" * 126, 130),
    (b"9223372036854775807", 10), (b"9223372036854775808", 21)])
def test_str_size(listpack_impl, text: bytes, size: int) -> None:
    assert listpack_impl.str_size(text) == size


def test_entry_size_same_fields_and_other_fields(listpack_impl) -> None:
    ms, seq = 1_700_000_000_000, 0
    same = listpack_impl.entry_size(ms, seq, (b"f",), ms + 5, 1, (b"f", b"hello"))
    assert same == 2 + 2 + 2 + 7 + 2  # flags, deltas, value, count
    other = listpack_impl.entry_size(ms, seq, (b"f",), ms + 5, 1, (b"g", b"hello"))
    assert other == 2 + 2 + 2 + 2 + 3 + 7 + 2  # flags, deltas, count, name, value, lp-count
    # a delta below the master's (an ID moved back by XSETID ... no: seq resets) wraps
    assert listpack_impl.entry_size(ms, 5, (b"f",), ms, 0, (b"f", b"v")) == 2 + 2 + 3 + 3 + 2


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_str_size_twins_agree(value: bytes) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "listpack")
    assert outcome(pure.str_size, value) == outcome(compiled.str_size, value)
    assert outcome(pure.as_int, value) == outcome(compiled.as_int, value)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(1 << 70), max_value=1 << 70))
def test_int_size_twins_agree(value: int) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "listpack")
    assert outcome(pure.int_size, value) == outcome(compiled.int_size, value)


@settings(max_examples=300, deadline=None)
@given(U64, U64, U64, U64, st.lists(st.binary(max_size=6), min_size=1, max_size=4),
       st.data())
def test_entry_size_twins_agree(mms, mseq, ms, seq, names, data) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "listpack")
    master = tuple(names)
    same = data.draw(st.booleans())
    fields_names = master if same else tuple(data.draw(
        st.lists(st.binary(max_size=6), min_size=1, max_size=4)))
    values = data.draw(st.lists(VALUES, min_size=len(fields_names),
                                max_size=len(fields_names)))
    fields = tuple(x for pair in zip(fields_names, values, strict=True) for x in pair)
    assert outcome(pure.entry_size, mms, mseq, master, ms, seq, fields) == \
        outcome(compiled.entry_size, mms, mseq, master, ms, seq, fields)


def test_sizes_match_the_listpack_encoding(listpack_impl) -> None:
    """str_size is what snapshot.rdb's listpack writer (Redis's format) spends per element."""
    from streamkeep.snapshot import rdb

    for value in [b"", b"a", b"0", b"-1", b"127", b"128", b"-4096", b"70000", b"1" * 19,
                  b"x" * 63, b"x" * 64, b"x" * 4095, b"x" * 4096, b"12a", b"-0"]:
        encoded = rdb.listpack([value])
        assert len(encoded) - 7 == listpack_impl.str_size(value), value  # header + end byte


