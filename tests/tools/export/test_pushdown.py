"""Turning pushed filters into a Selection: what is accepted, and that it is applied exactly
(the Spark-level equivalence with a plain filtered read is in test_datasource)."""

from __future__ import annotations

import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from streamkeep.snapshot.layout import MAX_ID
from streamkeep.tools.export.pushdown import U64, Selection


def test_ms_bounds_are_whole_milliseconds() -> None:
    s = Selection()
    assert s.accept(GreaterThanOrEqual(("ms",), 5), "entries")
    assert s.accept(LessThan(("ms",), 9), "entries")
    assert (s.lo, s.hi) == (5 << 64, (9 << 64) - 1)
    assert s.accept(GreaterThan(("ms",), 6), "entries")
    assert s.accept(LessThanOrEqual(("ms",), 7), "entries")
    assert (s.lo, s.hi) == (7 << 64, 7 << 64 | U64)
    assert not s.empty()
    assert s.accept(EqualTo(("ms",), 8), "entries") and s.empty()


@pytest.mark.parametrize("f, empty", [
    (LessThan(("ms",), -1), True), (GreaterThan(("ms",), -1), False),
    (GreaterThan(("ms",), U64 + 1), True), (LessThan(("ms",), U64 + 1), False),
])
def test_ms_out_of_the_id_space(f: object, empty: bool) -> None:
    s = Selection()
    assert s.accept(f, "entries")  # type: ignore[arg-type]
    assert s.empty() is empty
    if not empty:
        assert (s.lo, s.hi) == (0, MAX_ID)


def test_what_goes_back_to_spark() -> None:
    s = Selection()
    assert not s.accept(GreaterThan(("ms",), 5), "pending")  # partitions are whole streams
    assert not s.accept(GreaterThan(("id",), "5-0"), "entries")  # strings order unlike IDs
    assert not s.accept(Not(EqualTo(("db",), 1)), "entries")
    assert not s.accept(EqualTo(("db",), "1"), "entries")
    assert not s.accept(EqualTo(("ms",), True), "entries")
    assert (s.lo, s.hi, s.dbs, s.names) == (0, MAX_ID, [], [])


def test_streams_kept() -> None:
    s = Selection()
    assert s.accept(In(("db",), (0, 2)), "groups")
    assert s.accept(StringStartsWith(("stream_str",), "or"), "groups")
    assert [k for k in [(0, b"orders"), (1, b"orders"), (2, b"ore"), (0, b"x")]
            if s.keeps(*k)] == [(0, b"orders"), (2, b"ore")]
    t = Selection()
    assert t.accept(EqualTo(("stream",), bytearray(b"\xff")), "entries")
    assert t.keeps(0, b"\xff") and not t.keeps(0, b"\xfe")
    u = Selection()
    assert u.accept(EqualTo(("stream_str",), "\ufffd"), "entries")  # as the column shows it
    assert u.keeps(0, b"\xff") and u.keeps(0, b"\xfe") and not u.keeps(0, b"?")


def test_keys_kept_in_the_key_tables() -> None:
    s = Selection()
    assert s.accept(EqualTo(("key",), b"bin\xff"), "strings")
    assert s.accept(StringStartsWith(("key_str",), "bin"), "strings")
    assert s.keeps(0, b"bin\xff") and not s.keeps(0, b"bin") and not s.keeps(0, b"xbin\xff")
    s = Selection()
    assert s.accept(In(("key_str",), ("a", "b\ufffd")), "keys")
    assert s.keeps(3, b"a") and s.keeps(3, b"b\xff") and not s.keeps(3, b"c")
    assert not s.accept(EqualTo(("member",), b"a"), "zset_members")
    assert not s.accept(GreaterThan(("score",), 1.0), "zset_members")
