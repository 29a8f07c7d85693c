"""The RESP kernel's twins (engine/wire/_resp_py.py and _resp_c.pyx) agree on everything a caller
can see: the request parser's commands, errors (type, line, the same object re-raised) and
buffer states for any sequence of feed()/next() calls, and the encoder's bytes, big bulks kept
by reference and output-limit stops. Hostile lengths make the compiled parser fail cleanly."""

from __future__ import annotations

import enum
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import NULL_ARRAY, EntryArray, Push, RespMap, RespSet, Verbatim
from streamkeep.engine.wire.resp import (
    BIG_BULK,
    OutputLimitReached,
    ProtocolError,
    ReplyBuffer,
    encode_command,
)
from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

ROOT = Path(__file__).resolve().parents[3]
TWINS = ("streamkeep.engine.wire", "resp")
PROPERTY = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

resp_impl = kernel_fixture(*TWINS)

# --- request parsing ------------------------------------------------------------------------

HOSTILE = [
    b"*-1\r\n", b"*-9223372036854775808\r\n", b"*-9223372036854775809\r\n", b"*0\r\n",
    b"*2147483647\r\n", b"*2147483648\r\n", b"*4294967296\r\n", b"*4294967297\r\n",
    b"*9223372036854775807\r\n", b"*9223372036854775808\r\n", b"*18446744073709551615\r\n",
    b"*18446744073709551616\r\n", b"*99999999999999999999\r\n", b"*999999999999999999999\r\n",
    b"*1\r\n$-1\r\n", b"*1\r\n$-9223372036854775808\r\n", b"*1\r\n$2147483648\r\n",
    b"*1\r\n$4294967296\r\n", b"*1\r\n$9223372036854775807\r\n", b"*1\r\n$9223372036854775808\r\n",
    b"*1\r\n$18446744073709551615\r\n", b"*1\r\n$18446744073709551616\r\n",
    b"*1\r\n$99999999999999999999\r\n", b"*1\r\n$99999999999999999999999999\r\n",
    b"*1\r\n$32768\r\n", b"*1\r\n$33000\r\nabc", b"*1\r\n$03\r\nabc\r\n", b"*01\r\n$1\r\na\r\n",
    b"*1\r\n$+3\r\nabc\r\n", b"*+1\r\n", b"*1\r\n$ 3\r\nabc\r\n", b"*1\r\n$3 \r\nabc\r\n",
    b"*1\r\n$\x003\r\nabc\r\n", b"*\x001\r\n", b"\x00PING\r\n", b"PING\x00\r\n",
    b"*1\r\n$\r\n", b"*\r\n", b"*-\r\n", b"*1\r\n:1\r\n", b"*1\r\n\r\n\r\n", b"*2\r\n$1\r\n",
    b"*1\r\n$3\r\nab", b"*1\r", b"*1\n", b"*1\r\n$3\r", b'ECHO "x\r\n', b"ECHO 'x\r\n",
    b'ECHO "a"b\r\n', b'ECHO "\\x4g"\r\n', b"ECHO \x0bx\x0c\r\n", b"\r\n", b"\n", b"\r\r\n",
    b"*1\r\n$4\r\nP\r\nG\r\n", b"*1\r\n$2\r\n\r\n\r\n", b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
    b"*11\r\n" + b"$1\r\na\r\n" * 11, b"*1\r\n$16385\r\n" + b"x" * 16385 + b"\r\n",
]

argvs = st.lists(st.binary(max_size=12), min_size=1, max_size=5)
pieces = st.one_of(
    argvs.map(encode_command),
    argvs.map(lambda argv: b" ".join(a.replace(b"\r", b"").replace(b"\n", b"") or b"x"
                                       for a in argv) + b"\r\n"),
    st.sampled_from(HOSTILE),
    st.binary(max_size=8),
    st.sampled_from([b"\r\n", b"*", b"$", b"\r", b"\n", b"0", b"9", b"-", b'"', b"'", b"\x00"]),
    st.just(encode_command([b"SET", b"k", b"v" * 33000])),  # a big bulk (PROTO_MBULK_BIG_ARG)
)
ops = st.lists(st.one_of(
    st.tuples(st.just("feed"), st.lists(pieces, min_size=1, max_size=4).map(b"".join)),
    st.tuples(st.just("next"), st.integers(min_value=1, max_value=4)),
    st.tuples(st.just("auth"), st.booleans()),
    st.tuples(st.just("release"), st.none()),
), max_size=25)
limits = st.tuples(
    st.sampled_from([0, 3, 100, 16384, 20000, 512 * 1024 * 1024, 2**63 - 1]),  # proto-max-bulk-len
    st.sampled_from([0, 50, 1000, 40000, 1024 * 1024, 1024 * 1024 * 1024]),  # query buffer limit
    st.booleans(),  # authenticated
)


def parser_trace(module: Any, steps: list, limit: tuple[int, int, bool],
                 window: int | None = None) -> list:
    """Everything a caller sees of a parser driven by `steps`."""
    parser = module.RequestParser(proto_max_bulk_len=limit[0], query_buffer_limit=limit[1])
    parser.authenticated = limit[2]
    trace: list = []
    raised: list[BaseException] = []
    for op, arg in steps:
        if op == "feed":
            parser.feed(arg)
        elif op == "auth":
            parser.authenticated = arg
        elif op == "release":
            parser.release()
            parser = module.RequestParser(proto_max_bulk_len=limit[0],
                                          query_buffer_limit=limit[1])
            raised = []
        else:
            for _ in range(arg):
                try:
                    trace.append(("ok", parser.next()))
                except ProtocolError as err:
                    # the same error object every time (the parser stays failed)
                    trace.append(("error", type(err).__name__, str(err),
                                  [e is err for e in raised]))
                    raised.append(err)
        trace.append(parser.pending_bytes())
    return trace


@PROPERTY
@given(ops, limits)
def test_parsers_agree_on_any_calls(steps: list, limit: tuple[int, int, bool]) -> None:
    pure, compiled = pure_and_compiled(*TWINS)
    assert parser_trace(compiled, steps, limit) == parser_trace(pure, steps, limit)


@PROPERTY
@given(st.lists(pieces, max_size=40).map(b"".join), st.lists(st.integers(0, 400), max_size=8),
       limits)
def test_parsers_agree_on_any_chunking(wire: bytes, cuts: list[int],
                                       limit: tuple[int, int, bool]) -> None:
    """A pipeline cut anywhere, each chunk parsed until it is used up."""
    pure, compiled = pure_and_compiled(*TWINS)
    steps: list = []
    prev = 0
    for cut in [*sorted(cuts), len(wire)]:
        steps.append(("feed", wire[prev:cut]))
        steps.append(("next", 6))
        prev = max(prev, cut)
    assert parser_trace(compiled, steps, limit) == parser_trace(pure, steps, limit)


@pytest.mark.parametrize("data", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_lengths_agree(data: bytes) -> None:
    pure, compiled = pure_and_compiled(*TWINS)
    for limit in [(512 * 1024 * 1024, 1024 * 1024 * 1024, True), (100, 1000, False)]:
        for steps in ([("feed", data), ("next", 3)],
                      [("feed", data[:i]) for i in range(len(data) + 1)] + [("next", 3)],
                      [x for i in range(len(data)) for x in (("feed", data[i:i + 1]),
                                                             ("next", 1))]):
            assert parser_trace(compiled, steps, limit) == parser_trace(pure, steps, limit)


def test_hostile_lengths_never_crash_the_compiled_parser() -> None:
    """In a child process, so that a crash is a failure, not the end of the test run: every
    hostile input, whole and byte by byte, ends in commands, None or a ProtocolError."""
    pure_and_compiled(*TWINS)  # skipped when the kernel is not built
    code = textwrap.dedent(f"""
        import random
        from streamkeep.engine.wire._resp_c import RequestParser
        from streamkeep.engine.wire._resp_py import ProtocolError
        hostile = {HOSTILE!r}
        rng = random.Random(7)
        inputs = list(hostile) + [b"".join(rng.choice(hostile) for _ in range(8))
                                  for _ in range(2000)]
        for data in inputs:
            for step in (len(data) or 1, 1, 3):
                p = RequestParser(); p.authenticated = rng.random() < 0.5
                try:
                    for i in range(0, len(data), step):
                        p.feed(data[i:i + step])
                        while p.next() is not None:
                            pass
                except ProtocolError:
                    pass
        print("clean")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT.parent, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "clean", done.stderr[-2000:]


def test_batch_refuses_an_announced_count_it_cannot_hold(resp_impl: Any) -> None:
    """`*2147483647` is not preallocated: the batch and the byte-by-byte parser wait, with
    memory bounded by the bytes received."""
    parser = resp_impl.RequestParser()
    parser.feed(b"*2147483647\r\n$1\r\na\r\n")
    assert parser.next() is None
    assert parser.pending_bytes() == 0


# --- reply encoding -------------------------------------------------------------------------


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


def test_compiled_encoder_keeps_big_bulks_by_reference(resp_impl: Any) -> None:
    value = b"v" * BIG_BULK
    buf = ReplyBuffer()
    resp_impl.write_reply(buf, entry_array([(b"1-1", (b"f", value))] * 3), 2)
    assert [v is value for _, v in buf.big] == [True] * 3
    with pytest.raises(OutputLimitReached):
        resp_impl.write_reply(ReplyBuffer(100), [value], 2)


def test_unencodable_value_and_wrong_protocol(resp_impl: Any) -> None:
    assert outcome(resp_impl.encode_reply, [b"a", object()], 2)[1][0] == "TypeError"
    assert outcome(resp_impl.encode_reply, b"a", 4) == (
        "error", ("ValueError", "protocol is 2 or 3, not 4"))
    out = bytearray()
    resp_impl.write_reply(out, None, 1)  # the reference's table: nothing for protocols 0 and 1
    assert out == b""
