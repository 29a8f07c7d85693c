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
