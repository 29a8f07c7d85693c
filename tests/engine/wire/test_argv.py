"""engine.wire.argv: an embedded caller's arguments as bytes, both twins on the same inputs
(str as str.encode writes it, bytes as they are, an int as its decimal digits, None for
anything else, the same error for a str UTF-8 cannot encode)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

argv_impl = kernel_fixture("streamkeep.engine.wire", "argv")


@pytest.mark.parametrize("args,expected", [
    (("XADD", "s", "*", "f", "v"), (b"XADD", b"s", b"*", b"f", b"v")),
    (["XLEN", b"s"], (b"XLEN", b"s")),  # a list, and bytes as they are
    (("SET", "k", "héllo ✓ 🎉"), (b"SET", b"k", "héllo ✓ 🎉".encode())),
    (("SET", "k", ""), (b"SET", b"k", b"")),
    ((), ()),
    (("ZADD", "z", 5, "m"), (b"ZADD", b"z", b"5", b"m")),  # an int: its digits
    (("X", -(2**63), 2**63 - 1, 2**64, -(10**30)),
     (b"X", b"-9223372036854775808", b"9223372036854775807", b"18446744073709551616",
      b"-" + b"1" + b"0" * 30)),
    (("XADD", "s", 5.0), None),  # a float: the caller's general conversion
    (("XADD", bytearray(b"s")), None),
    (("XADD", True), None),
])
def test_encode_args(argv_impl, args: object, expected: object) -> None:  # type: ignore[no-untyped-def]
    assert argv_impl.encode_args(args) == expected


def test_bytes_are_passed_through_not_copied(argv_impl) -> None:  # type: ignore[no-untyped-def]
    value = b"x" * 100
    assert argv_impl.encode_args(("SET", value))[1] is value


def test_a_lone_surrogate_is_refused(argv_impl) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnicodeEncodeError):
        argv_impl.encode_args(("SET", "\ud800"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=40), st.binary(max_size=40), st.integers(),
                          st.integers(-(2**70), 2**70), st.floats(), st.booleans()),
                max_size=8))
def test_twins_agree(args: list) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.wire", "argv")
    assert outcome(pure.encode_args, args) == outcome(compiled.encode_args, args)
    assert outcome(pure.encode_args, tuple(args)) == outcome(compiled.encode_args, tuple(args))
