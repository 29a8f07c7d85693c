"""engine.model.ids' kernel (formatting, the plain `ms-seq` parse): compiled against its
pure-Python reference.

Each test runs on both twins (`impl`); the hypothesis tests feed the same input to both and
require the same outcome, errors included."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.ids import U64_MAX, parse_id, parse_range_bound
from streamkeep.engine.wire.errors import ReplyError
from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

ids_impl = kernel_fixture("streamkeep.engine.model", "ids")

# --- IDs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sid,text", [
    (0, b"0-0"), (1, b"0-1"), ((5 << 64) | 7, b"5-7"),
    (((1 << 64) - 1) << 64 | ((1 << 64) - 1), b"18446744073709551615-18446744073709551615"),
    ((1_700_000_000_000 << 64) | 1023, b"1700000000000-1023")])
def test_format_id(ids_impl, sid: int, text: bytes) -> None:
    assert ids_impl.format_id(sid) == text
    assert ids_impl.format_ids([sid, sid]) == [text, text]


@pytest.mark.parametrize("text,sid", [
    (b"5-7", (5 << 64) | 7), (b"0005-0007", (5 << 64) | 7), (b"0-0", 0),
    (b"9999999999999999999-1", (9999999999999999999 << 64) | 1),
    (b"10000000000000000000-1", None), (b"5", None), (b"5-", None), (b"-5", None),
    (b"5-7-8", None), (b"+5-7", None), (b"5-*", None), (b" 5-7", None), (b"\xd9\xa1-1", None)])
def test_plain_id(ids_impl, text: bytes, sid: int | None) -> None:
    assert ids_impl.plain_id(text) == sid


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.integers(min_value=0, max_value=(1 << 128) - 1),
                 st.integers(min_value=-(1 << 130), max_value=1 << 130)))
def test_format_twins_agree(sid: int) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "ids")
    assert outcome(pure.format_id, sid) == outcome(compiled.format_id, sid)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=45),
                 st.tuples(st.text("0123456789", max_size=21), st.text("0123456789-", max_size=21))
                 .map(lambda t: f"{t[0]}-{t[1]}".encode())))
def test_plain_id_twins_agree(text: bytes) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "ids")
    assert outcome(pure.plain_id, text) == outcome(compiled.plain_id, text)


@pytest.mark.parametrize("arg", [b"5-3", b"0-0", b"0005-0007", b"18446744073709551615-1",
                                 b"1234567890123456789-9", b"12345678901234567890-1", b"5",
                                 b"-", b"+", b"5-", b"-5", b"5-x", b"5-3\x00junk", b" 5-3",
                                 b"+5-3", b"(5-3", b"5-18446744073709551616"])
def test_a_range_bound_parses_as_the_full_parser_does(arg: bytes) -> None:
    """parse_range_bound's `digits-digits` fast path gives the full parse's ID (or error)."""
    for missing in (0, U64_MAX):
        try:
            want: object = (parse_id(arg, missing).value, False) if arg[:1] != b"(" else \
                (parse_id(arg[1:], missing, strict=True).value, True)
        except ReplyError as err:
            want = err.line
        try:
            got: object = parse_range_bound(arg, missing)
        except ReplyError as err:
            got = err.line
        assert got == want


ID_TEXT = st.one_of(
    st.binary(max_size=45),
    st.tuples(st.text("0123456789", max_size=21), st.text("0123456789-", max_size=21))
    .map(lambda t: f"{t[0]}-{t[1]}".encode()),
    st.tuples(st.integers(0, 30), st.integers(0, 30)).map(lambda t: b"%d-%d" % t))


@pytest.mark.parametrize("args,expected", [
    ((b"XACK", b"k", b"g", b"1-0", b"1-5", b"2-0"), ([1, 1, 2], [0, 5, 0], True)),
    ((b"XACK", b"k", b"g"), ([], [], True)),
    ([b"XACK", b"k", b"g", b"3-1"], ([3], [1], True)),  # a server's argv is a list
    ((b"XACK", b"k", b"g", b"01-0"), ([1], [0], False)),  # a leading zero: not as replies write it
    ((b"XACK", b"k", b"g", b"2-0", b"1-0"), ([2, 1], [0, 0], False)),  # not ascending
    ((b"XACK", b"k", b"g", b"1-0", b"1-0"), ([1, 1], [0, 0], False)),  # repeated
    ((b"XACK", b"k", b"g", b"1-0", b"5"), None),  # not `ms-seq`: the full parse decides
    ((b"XACK", b"k", b"g", b"1-0", b"1-x"), None),
])
def test_plain_ids(ids_impl, args: tuple, expected: tuple | None) -> None:
    assert ids_impl.plain_ids(args, 3) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(ID_TEXT, max_size=8), st.integers(0, 3))
def test_plain_ids_twins_agree(texts: list[bytes], start: int) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "ids")
    args = (b"XACK", *texts)
    assert outcome(pure.plain_ids, args, start) == outcome(compiled.plain_ids, args, start)
    assert outcome(pure.plain_ids, list(args), start) == outcome(compiled.plain_ids, args, start)
    parsed = pure.plain_ids(args, start)
    if parsed is not None and parsed[2]:  # tidy: the arguments are the formatted IDs
        ms, seq, _tidy = parsed
        assert [pure.format_id(m << 64 | s) for m, s in zip(ms, seq, strict=True)] == \
            list(args[start:])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, (1 << 128) - 1), st.integers(0, 5),
                          st.integers(-(1 << 130), 1 << 130)), max_size=8))
def test_split_ids_twins_agree(sids: list[int]) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "ids")
    assert outcome(pure.split_ids, sids) == outcome(compiled.split_ids, sids)
    good = [sid for sid in sids if 0 <= sid < 1 << 128]
    assert compiled.split_ids(good) == ([s >> 64 for s in good], [s & ((1 << 64) - 1) for s in good])


_EDGES = [0, 1, (1 << 30) - 1, 1 << 30, (1 << 60) - 1, 1 << 60, (1 << 64) - 1, 1 << 64,
          (1 << 64) + 1, (1 << 90) - 1, 1 << 90, (1 << 120) - 1, 1 << 120, (1 << 128) - 2,
          (1 << 128) - 1]


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.sampled_from(_EDGES), st.integers(0, (1 << 128) - 1),
                 st.integers(-(1 << 130), 1 << 130)),
       st.one_of(st.sampled_from([0, 1, (1 << 64) - 1, 1 << 64]), st.integers(0, 1 << 70),
                 st.integers(-5, 5)))
def test_next_auto_id_twins_agree(last: int, now: int) -> None:
    """The compiled one reads and writes the ints' digits in place: every digit count and
    both halves' edges, against the shifts of the reference."""
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "ids")
    assert outcome(pure.next_auto_id, last, now) == outcome(compiled.next_auto_id, last, now)


@pytest.mark.parametrize("sid", _EDGES)
def test_format_id_of_every_digit_count(ids_impl, sid: int) -> None:
    assert ids_impl.format_id(sid) == b"%d-%d" % (sid >> 64, sid & ((1 << 64) - 1))
