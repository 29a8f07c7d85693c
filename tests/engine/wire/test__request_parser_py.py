"""The request parser's twins (engine/wire/_request_parser_py.py and _request_parser_c.pyx)
agree on everything a caller can see: commands, errors (type, line, the same object re-raised)
and buffer states for any sequence of feed()/next() calls. Hostile lengths make the compiled
parser fail cleanly."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.engine.wire.reply_parser import encode_command
from streamkeep.engine.wire.request_parser import ProtocolError
from tests.support.kernels import kernel_fixture, pure_and_compiled

ROOT = Path(__file__).resolve().parents[3]
TWINS = ("streamkeep.engine.wire", "request_parser")
PROPERTY = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

parser_impl = kernel_fixture(*TWINS)

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
                    # the same error object every time (the parser stays failed): each is
                    # the first one (a list of them all made a long input's trace quadratic)
                    if not raised:
                        raised.append(err)
                    trace.append(("error", type(err).__name__, str(err), err is raised[0]))
        trace.append(parser.pending_bytes())
    return trace


@PROPERTY
@given(ops, limits)
def test_parsers_agree_on_any_calls(steps: list, limit: tuple[int, int, bool]) -> None:
    pure, compiled = pure_and_compiled(*TWINS)
    assert parser_trace(compiled, steps, limit) == parser_trace(pure, steps, limit)


@pytest.mark.parametrize("length", [2**63 - 1, 2**63 - 2, 2**63 - 3])
@pytest.mark.parametrize("authenticated", [True, False])
def test_a_bulk_as_long_as_the_largest_limit_is_only_waited_for(
        length: int, authenticated: bool) -> None:
    """proto-max-bulk-len may be set to LLONG_MAX: a header of about that length once overflowed
    the compiled parser's `length + 2` (OverflowError from a negative size check); both
    parsers wait for the bytes instead (or refuse an unauthenticated one), alike."""
    pure, compiled = pure_and_compiled(*TWINS)
    steps = [("feed", b"*1\r\n$%d\r\n" % length), ("next", 1), ("feed", b"x" * 70_000),
             ("next", 1)]
    limit = (2**63 - 1, 1 << 30, authenticated)
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
    # Every prefix fed in turn is quadratic in the input: a long input's prefixes at a stride.
    stride = max(1, len(data) // 256)
    for limit in [(512 * 1024 * 1024, 1024 * 1024 * 1024, True), (100, 1000, False)]:
        for steps in ([("feed", data), ("next", 3)],
                      [("feed", data[:i]) for i in [*range(0, len(data), stride), len(data)]]
                      + [("next", 3)],
                      [x for i in range(len(data)) for x in (("feed", data[i:i + 1]),
                                                             ("next", 1))]):
            assert parser_trace(compiled, steps, limit) == parser_trace(pure, steps, limit)


def test_hostile_lengths_never_crash_the_compiled_parser() -> None:
    """In a child process, so that a crash is a failure, not the end of the test run: every
    hostile input, whole and byte by byte, ends in commands, None or a ProtocolError."""
    pure_and_compiled(*TWINS)  # skipped when the kernel is not built
    code = textwrap.dedent(f"""
        import random
        from streamkeep.engine.wire._request_parser_c import RequestParser
        from streamkeep.engine.wire.errors import ProtocolError
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


def test_batch_refuses_an_announced_count_it_cannot_hold(parser_impl: Any) -> None:
    """`*2147483647` is not preallocated: the batch and the byte-by-byte parser wait, with
    memory bounded by the bytes received."""
    parser = parser_impl.RequestParser()
    parser.feed(b"*2147483647\r\n$1\r\na\r\n")
    assert parser.next() is None
    assert parser.pending_bytes() == 0
