"""The reply encoder's twins (engine/wire/_reply_encoder_py.py and _reply_encoder_c.pyx) agree
on everything a caller can see: the bytes, the big bulks kept by reference and the output-limit
stops, for any value, protocol and limit."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.engine.wire.errors import ProtocolError, ReplyError
from streamkeep.engine.wire.reply import (
    NULL_ARRAY,
    EntryArray,
    HumanDouble,
    Push,
    RespMap,
    RespSet,
    Verbatim,
)
from streamkeep.engine.wire.reply_encoder import BIG_BULK, OutputLimitReached, ReplyBuffer
from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

TWINS = ("streamkeep.engine.wire", "reply_encoder")
PROPERTY = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

encoder_impl = kernel_fixture(*TWINS)


class Color(enum.IntEnum):
    RED = 7


class Name(enum.StrEnum):
    X = "x"


def entry_array(entries: list[tuple[bytes, tuple[bytes, ...]]]) -> EntryArray:
    return EntryArray([e[0] for e in entries], [e[1] for e in entries])


ids = st.one_of(st.binary(max_size=20), st.just(b"i" * 1500))
bulks = st.one_of(st.binary(max_size=30), st.sampled_from([b"b" * 1023, b"b" * 1024,
                                                            b"B" * BIG_BULK]))
field_tuples = st.lists(bulks, max_size=10).map(tuple)
leaves = st.one_of(
    bulks, st.text(max_size=10), st.sampled_from(["\udcff", "é", "\r\n"]), st.none(),
    st.integers(min_value=-2000, max_value=2000), st.integers(), st.sampled_from(
        [2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**40]),
    st.booleans(), st.floats(allow_nan=True), st.just(NULL_ARRAY),
    st.text(max_size=8).map(ReplyError), st.just(ProtocolError("ERR x\r\ny")),
    st.builds(Verbatim, st.text(max_size=8), st.sampled_from(["txt", "mkd"])),
    st.binary(max_size=8).map(bytearray), st.binary(max_size=8).map(memoryview),
    st.just(Color.RED), st.just(Name.X),
    st.lists(st.tuples(ids, field_tuples), max_size=12).map(entry_array),
)
values = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=10), st.lists(inner, max_size=10).map(tuple),
    st.lists(st.tuples(inner, inner), max_size=4).flatmap(
        lambda items: st.builds(RespMap, st.just(items), st.booleans())),
    st.lists(inner, max_size=5).map(RespSet), st.lists(inner, max_size=5).map(Push),
    st.lists(st.tuples(ids, st.one_of(field_tuples, st.lists(bulks, max_size=10), st.none())),
             min_size=8, max_size=20).map(lambda es: [list(e) for e in es]),
), max_leaves=40)


def buffer_state(buf: ReplyBuffer) -> tuple:
    return bytes(buf), [(offset, bytes(value)) for offset, value in buf.big], buf.big_size


def encode_outcomes(module: Any, value: Any, protocol: int, limit: int) -> list:
    got = [outcome(module.encode_reply, value, protocol)]
    buf = ReplyBuffer(limit)
    buf += b"+PREVIOUS\r\n"
    got.append((outcome(module.write_reply, buf, value, protocol), buffer_state(buf)))
    plain = bytearray(b"x")
    got.append((outcome(module.write_reply, plain, value, protocol), bytes(plain)))
    return got


@PROPERTY
@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@given(values, st.sampled_from([2, 3]), st.sampled_from([0, 1, 50, 2000, 70000]))
def test_encoders_agree(value: Any, protocol: int, limit: int) -> None:
    pure, compiled = pure_and_compiled(*TWINS)
    assert encode_outcomes(compiled, value, protocol, limit) == \
        encode_outcomes(pure, value, protocol, limit)


def test_encoders_agree_on_long_arrays_and_their_limit_checks() -> None:
    """Arrays past a chunk (2048 items), entry-shaped or not, as an EntryArray or nested, into
    ReplyBuffers whose limit falls anywhere: the same bytes and the same stops."""
    pure, compiled = pure_and_compiled(*TWINS)
    entries = [(b"%d-0" % i, (b"f", b"v" * (i % 50), b"g", b"w")) for i in range(5000)]
    shapes = [
        entry_array(entries), [list(e) for e in entries], [e[1][1] for e in entries],
        [[e[1][1]] * 3 for e in entries[:3000]], [[list(e) for e in entries]],
        [list(range(3000))], [[b"x" * 1024] * 2100], RespMap([(e[0], e[1]) for e in entries]),
        RespMap([(e[0], list(e[1])) for e in entries], as_pairs=True),
        [[b"1-0", None]] * 9 + [list(e) for e in entries[:3000]],
    ]
    for value in shapes:
        for protocol in (2, 3):
            for limit in (0, 1, 3000, 40000, 150000, 10**7):
                assert encode_outcomes(compiled, value, protocol, limit) == \
                    encode_outcomes(pure, value, protocol, limit), (type(value), limit)


def test_compiled_encoder_keeps_big_bulks_by_reference(encoder_impl: Any) -> None:
    value = b"v" * BIG_BULK
    buf = ReplyBuffer()
    encoder_impl.write_reply(buf, entry_array([(b"1-1", (b"f", value))] * 3), 2)
    assert [v is value for _, v in buf.big] == [True] * 3
    with pytest.raises(OutputLimitReached):
        encoder_impl.write_reply(ReplyBuffer(100), [value], 2)


def test_unencodable_value_and_wrong_protocol(encoder_impl: Any) -> None:
    assert outcome(encoder_impl.encode_reply, [b"a", object()], 2)[1][0] == "TypeError"
    assert outcome(encoder_impl.encode_reply, b"a", 4) == (
        "error", ("ValueError", "protocol is 2 or 3, not 4"))
    out = bytearray()
    encoder_impl.write_reply(out, None, 1)  # the reference's table: nothing for protocols 0 and 1
    assert out == b""


@PROPERTY
@given(st.one_of(st.integers(-(1 << 63), (1 << 63) - 1),
                 st.sampled_from([0, -1, 9, 10, -10, 1 << 62, -(1 << 62), (1 << 63) - 1,
                                  -(1 << 63)])))
def test_human_integer_twins_agree(n: int) -> None:
    """An integral score's reply value: the same text and type from both twins, a hash
    computed from its bytes (not a zero left by the allocator), and the same reply bytes."""
    pure, compiled = pure_and_compiled(*TWINS)
    made, expected = compiled.human_integer(n), pure.human_integer(n)
    assert type(made) is type(expected) is HumanDouble
    assert bytes(made) == bytes(expected) == str(n).encode()
    assert bytes.__hash__(made) == hash(str(n).encode())
    for protocol in (2, 3):
        assert compiled.encode_reply(made, protocol) == pure.encode_reply(expected, protocol)


def test_human_integer_twins_refuse_what_64_bits_cannot_hold() -> None:
    pure, compiled = pure_and_compiled(*TWINS)
    for n in (1 << 63, -(1 << 63) - 1, 1 << 80):
        refused = outcome(compiled.human_integer, n)
        assert refused[0] == "error" and refused == outcome(pure.human_integer, n)
