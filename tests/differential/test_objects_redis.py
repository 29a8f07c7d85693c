"""OBJECT, MEMORY USAGE and COPY against the real redis-server: replies and error lines byte
for byte over strings and streams (OBJECT ENCODING of every string shape, COPY's options and
refusals, each type copied and read back). MEMORY USAGE's figures are estimates of another
allocator: only its nil and its errors are compared."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamkeep import Engine
from tests.support.diffutil import Both, WallClock, reset_redis_config


@pytest.fixture
def both(redis_raw, backend) -> Iterator[Both]:
    reset_redis_config(redis_raw)
    yield Both(backend(Engine(clock=WallClock())), redis_raw)


def test_object_encoding_of_strings_and_streams(both: Both) -> None:
    values = ["0", "12", "-5", "9223372036854775807", "9223372036854775808", "007", "+1",
              "1.5", "", "x" * 44, "x" * 45, "hello"]
    for i, value in enumerate(values):
        both("SET", f"k{i}", value)
        both("OBJECT", "ENCODING", f"k{i}")
    both("XADD", "s", "1-1", "f", "v")
    both.script(("OBJECT", "ENCODING", "s"), ("OBJECT", "ENCODING", "missing"),
                ("OBJECT", "REFCOUNT", "missing"), ("OBJECT", "REFCOUNT", "s"),
                ("OBJECT", "REFCOUNT", "k1"), ("OBJECT", "FREQ", "s"),
                ("OBJECT", "IDLETIME", "missing"), ("OBJECT",),
                ("OBJECT", "ENCODING"), ("OBJECT", "NOPE", "s"), ("OBJECT", "ENCODING", "a", "b"))


def test_memory_usage_nil_and_errors(both: Both) -> None:
    both("SET", "k", "v")
    both.script(("MEMORY", "USAGE", "missing"), ("MEMORY", "USAGE", "k", "SAMPLES"),
                ("MEMORY", "USAGE", "k", "SAMPLES", "-1"), ("MEMORY", "USAGE", "k", "FOO", "1"),
                ("MEMORY", "USAGE", "k", "SAMPLES", "x"), ("MEMORY", "USAGE"))


def test_copy(both: Both) -> None:
    both.script(
        ("SET", "a", "1"), ("XADD", "s", "1-1", "f", "v"), ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
        ("COPY", "a", "b"), ("GET", "b"), ("COPY", "a", "b"), ("COPY", "a", "b", "REPLACE"),
        ("COPY", "s", "b"), ("COPY", "s", "b", "REPLACE"), ("TYPE", "b"), ("XRANGE", "b", "-", "+"),
        ("XPENDING", "b", "g"), ("XINFO", "GROUPS", "b"), ("COPY", "a", "a"),
        ("COPY", "a", "a", "DB", "1"), ("COPY", "a", "x", "DB", "16"), ("COPY", "a", "x", "DB", "-1"),
        ("COPY", "a", "x", "DB", "x"), ("COPY", "a", "x", "DB"), ("COPY", "a", "x", "FOO"),
        ("COPY", "missing", "x"), ("COPY", "a"), ("SET", "t", "v", "PXAT", "4000000000000"),
        ("COPY", "t", "t2"), ("PEXPIRETIME", "t2"), ("COPY", "a", "z", "DB", "2", "REPLACE"),
        ("SELECT", "2"), ("GET", "z"), ("SELECT", "0"),
    )
