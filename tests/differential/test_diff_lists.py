"""Differential tests of the list commands against the real redis-server (7.0.15): every command,
its options and its error lines (arity, WRONGTYPE on a string, stream, set, hash and sorted set,
bad integers, LPOS's RANK 0 and negative COUNT / MAXLEN, LMPOP's numkeys and COUNT, blocking
timeouts negative or not a float), integer-looking, binary and empty elements, elements past
8 KB (a node of their own), long lists (thousands of elements, so many quicklist nodes, also
with small `list-max-listpack-size` fills and `list-compress-depth`) edited in the middle,
negative indexes and ranges past the ends; the keyspace events each list command publishes; the
exact RESP2 / RESP3 bytes of the replies whose null kind matters (`$-1` or `*-1`, `_`); and a
random sequence of list writes compared reply by reply and state by state.

Kept out of the comparisons, where Redis 7.0 and 8.x differ:
* OBJECT ENCODING of a small list: 7.0 says `quicklist` for every list, 7.2+ `listpack` for a
  small one (and converts back on shrinking): compared through `encoding`, which reads
  `listpack` as `quicklist`; a list past 8 KB is `quicklist` on both, compared as is;
* LPOS RANK and LREM count -9223372036854775808: 7.0 takes it (and overflows), 7.2+ refuses it
  ("value is out of range");
* timeouts too large (1e300, inf): "timeout is negative" in 7.0, "out of range" in 8.x.
Blocking behaviour across connections: tests/differential/test_diff_lists_blocking.py.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streamkeep import Engine
from tests.support.diffutil import Both, WallClock, reset_redis_config
from tests.support.keyspace_watch import watcher_pairs
from tests.support.resp_client import encode_command, read_raw_reply

LIST_DEFAULTS = {"list-max-listpack-size": "-2", "list-compress-depth": "0"}
WRONG_KEYS = ("str", "st", "set", "hash", "zset")
BIG = b"B" * 9000  # past the 8 KB node limit: a node of its own
HUGE = bytes(range(256)) * 80  # 20 KB of every byte value
# Texts a listpack stores as integers of each width, and texts that only look like integers.
INTS = ["0", "1", "-1", "127", "128", "-129", "4095", "-4096", "32767", "-32768", "8388607",
        "-8388608", "2147483647", "-2147483649", "9223372036854775807", "-9223372036854775808"]
NOT_INTS = ["01", "-0", "+1", "1.0", " 1", "1 ", "9223372036854775808", "-9223372036854775809",
            "18446744073709551616", "0x10", "1e3", ""]
BINARY = [b"\x00", b"\xff\xfe", b"a\r\nb", b"\x00\x01\x02" * 5, "é".encode()]


@pytest.fixture
def both(redis_raw, backend) -> Iterator[Both]:
    reset_redis_config(redis_raw)
    for name, value in LIST_DEFAULTS.items():
        redis_raw.execute("CONFIG", "SET", name, value)
    yield Both(backend(Engine(clock=WallClock())), redis_raw)
    for name, value in LIST_DEFAULTS.items():
        redis_raw.execute("CONFIG", "SET", name, value)


def run(both: Both, *commands: tuple[Any, ...]) -> None:
    for argv in commands:
        both(*argv)


def encoding(reply: Any) -> Any:
    """OBJECT ENCODING of a list as 7.0 names it (7.2+'s `listpack` is 7.0's `quicklist`)."""
    return b"quicklist" if reply == b"listpack" else reply


def setup_types(both: Both) -> None:
    run(both, ("SET", "str", "v"), ("XADD", "st", "1-1", "f", "v"), ("SADD", "set", "a"),
        ("HSET", "hash", "f", "v"), ("ZADD", "zset", "1", "a"))


def same_list(both: Both, *keys: str) -> None:
    for key in keys:
        run(both, ("TYPE", key), ("LLEN", key), ("LRANGE", key, "0", "-1"))


def set_fill(both: Both, fill: str | None, depth: str | None = None) -> None:
    """`list-max-listpack-size` and `list-compress-depth` on both sides (None: the default)."""
    for name, value in (("list-max-listpack-size", fill), ("list-compress-depth", depth)):
        if value is not None:
            assert both("CONFIG", "SET", name, value) == "OK"


# --- one command at a time ---------------------------------------------------------------------


def test_push_and_reads(both):
    setup_types(both)
    run(both,
        ("LPUSH", "l", "a", "b", "c"), ("RPUSH", "l", "d", "e"), ("LLEN", "l"),
        ("LRANGE", "l", "0", "-1"), ("LPUSHX", "nokey", "a"), ("RPUSHX", "nokey", "a", "b"),
        ("EXISTS", "nokey"), ("TOUCH", "l", "nokey", "l", "str"), ("TOUCH",),
        ("LPUSHX", "l", "x", "y"), ("RPUSHX", "l", "z"),
        ("LRANGE", "l", "0", "-1"), ("lpush", "l", "lower"), ("RPUSH", "l", "a", "a", "a"),
        ("LLEN", "l"), ("LLEN", "nokey"), ("LRANGE", "nokey", "0", "-1"),
        ("LINDEX", "nokey", "0"), ("LINDEX", "nokey", "x"),
        ("LPUSH", "l"), ("RPUSH", "l"), ("LPUSHX", "l"), ("RPUSHX", "l"), ("LPUSH",),
        ("LLEN",), ("LLEN", "l", "x"), ("LRANGE", "l", "0"), ("LRANGE", "l", "0", "1", "2"),
        ("LINDEX", "l"), ("LINDEX", "l", "0", "1"),
    )
    n = both("LLEN", "l")
    for start, end in ((0, -1), (0, 0), (-1, -1), (2, 4), (-3, -1), (-100, 2), (3, 100),
                       (-100, 100), (5, 2), (-1, -3), (n, n + 5), (n - 1, n), (-n, -n),
                       (-n - 1, -n - 1), (100, 200), (-200, -100), (0, -n - 1)):
        both("LRANGE", "l", str(start), str(end))
    for index in [*range(-n - 2, n + 2), "x", "", "1.0", " 1", "9223372036854775807",
                  "-9223372036854775808", "9223372036854775808"]:
        both("LINDEX", "l", str(index))
    run(both,
        ("LRANGE", "l", "x", "1"), ("LRANGE", "l", "0", "y"), ("LRANGE", "nokey", "x", "1"),
        ("LRANGE", "l", "9223372036854775807", "-9223372036854775808"),
        ("LRANGE", "l", "-9223372036854775808", "9223372036854775807"),
        ("LRANGE", "l", "0", "9223372036854775808"),
    )
    for key in WRONG_KEYS:
        run(both,
            ("LPUSH", key, "a"), ("RPUSH", key, "a"), ("LPUSHX", key, "a"), ("RPUSHX", key, "a"),
            ("LLEN", key), ("LRANGE", key, "0", "-1"), ("LRANGE", key, "x", "1"),
            ("LINDEX", key, "0"), ("LINDEX", key, "x"), ("TYPE", key))


def test_integer_looking_binary_and_empty_elements(both):
    run(both, ("RPUSH", "l", *INTS, *NOT_INTS), ("LPUSH", "l", *BINARY),
        ("RPUSH", "l", *INTS[::-1]), ("LRANGE", "l", "0", "-1"), ("LLEN", "l"))
    for element in [*INTS, *NOT_INTS, *BINARY, "nope", "1.00", "00"]:
        run(both, ("LPOS", "l", element), ("LPOS", "l", element, "COUNT", "0"),
            ("LPOS", "l", element, "RANK", "-1"))
    run(both,
        ("LINSERT", "l", "BEFORE", "127", "x"), ("LINSERT", "l", "AFTER", "-0", "y"),
        ("LINSERT", "l", "AFTER", "", "empty-after"), ("LINSERT", "l", "BEFORE", "01", "1"),
        ("LREM", "l", "0", "1"), ("LREM", "l", "1", "-1"), ("LREM", "l", "-1", "127"),
        ("LREM", "l", "0", "+1"), ("LREM", "l", "0", ""), ("LREM", "l", "0", b"\x00"),
        ("LSET", "l", "0", "42"), ("LSET", "l", "-1", "-42"), ("LSET", "l", "1", ""),
        ("LRANGE", "l", "0", "-1"), ("LPOP", "l", "3"), ("RPOP", "l", "3"),
        ("LMOVE", "l", "m", "LEFT", "RIGHT"), ("LMOVE", "l", "m", "RIGHT", "LEFT"),
        ("LRANGE", "m", "0", "-1"), ("LRANGE", "l", "0", "-1"),
        ("RPUSH", "n", "1", "1", "01", "1", "1.0", "1"), ("LPOS", "n", "1", "COUNT", "0"),
        ("LREM", "n", "-2", "1"), ("LRANGE", "n", "0", "-1"),
    )


def test_lpos(both):
    setup_types(both)
    run(both, ("RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c", "b", "a", "1", "", "01"))
    for opts in ([], ["RANK", "1"], ["RANK", "2"], ["RANK", "3"], ["RANK", "4"], ["RANK", "-1"],
                 ["RANK", "-2"], ["RANK", "-3"], ["RANK", "-4"], ["COUNT", "0"], ["COUNT", "1"],
                 ["COUNT", "2"], ["COUNT", "10"], ["COUNT", "0", "RANK", "-1"],
                 ["RANK", "2", "COUNT", "0"], ["RANK", "-2", "COUNT", "1"], ["MAXLEN", "1"],
                 ["MAXLEN", "3"], ["MAXLEN", "0"], ["MAXLEN", "8"], ["RANK", "2", "MAXLEN", "7"],
                 ["RANK", "2", "MAXLEN", "8"], ["COUNT", "0", "MAXLEN", "4"],
                 ["RANK", "-1", "MAXLEN", "2"], ["RANK", "-1", "MAXLEN", "5"],
                 ["RANK", "-1", "COUNT", "0", "MAXLEN", "6"], ["rank", "1", "count", "1"],
                 ["RANK", "1", "RANK", "2"], ["COUNT", "2", "COUNT", "0"],
                 ["RANK", "9223372036854775807"], ["RANK", "-9223372036854775807"],
                 ["COUNT", "9223372036854775807"], ["MAXLEN", "9223372036854775807"],
                 ["RANK", "-9223372036854775807", "COUNT", "0"]):
        for element in ("a", "c", "b", "1", "01", "", "nope"):
            both("LPOS", "l", element, *opts)
    run(both,
        ("LPOS", "l", "a", "RANK", "0"), ("LPOS", "l", "a", "RANK", "x"),
        ("LPOS", "l", "a", "RANK", "1.5"), ("LPOS", "l", "a", "COUNT", "-1"),
        ("LPOS", "l", "a", "COUNT", "x"), ("LPOS", "l", "a", "MAXLEN", "-1"),
        ("LPOS", "l", "a", "MAXLEN", "x"), ("LPOS", "l", "a", "RANK"),
        ("LPOS", "l", "a", "COUNT"), ("LPOS", "l", "a", "MAXLEN"), ("LPOS", "l", "a", "FOO", "1"),
        ("LPOS", "l", "a", "RANK", "1", "FOO"), ("LPOS", "l", "a", "RANK", "9223372036854775808"),
        ("LPOS", "l"), ("LPOS",), ("LPOS", "nokey", "a"), ("LPOS", "nokey", "a", "COUNT", "0"),
        ("LPOS", "nokey", "a", "COUNT", "2"), ("LPOS", "nokey", "a", "RANK", "-1"),
        ("LPOS", "nokey", "a", "RANK", "0"), ("LPOS", "nokey", "a", "COUNT", "-1"),
        ("LPOS", "nokey", "a", "BOGUS"), ("LPOS", "l", "nope", "COUNT", "1"),
    )
    for key in WRONG_KEYS:
        run(both, ("LPOS", key, "a"), ("LPOS", key, "a", "COUNT", "0"),
            ("LPOS", key, "a", "RANK", "0"), ("LPOS", key, "a", "MAXLEN", "-1"))


def test_lset_linsert_lrem_ltrim(both):
    setup_types(both)
    run(both,
        ("RPUSH", "l", "a", "b", "c", "b", "a"),
        ("LSET", "l", "0", "A"), ("LSET", "l", "-1", "Z"), ("LSET", "l", "2", "C"),
        ("LSET", "l", "5", "x"), ("LSET", "l", "-6", "x"), ("LSET", "l", "x", "y"),
        ("LSET", "l", "9223372036854775807", "x"), ("LSET", "l", "-9223372036854775808", "x"),
        ("LSET", "nokey", "0", "a"), ("LSET", "nokey", "x", "a"), ("EXISTS", "nokey"),
        ("LSET", "l", "0"), ("LSET", "l", "0", "a", "b"), ("LRANGE", "l", "0", "-1"),
        ("LINSERT", "l", "BEFORE", "b", "x1"), ("LINSERT", "l", "AFTER", "b", "x2"),
        ("LINSERT", "l", "before", "Z", "x3"), ("LINSERT", "l", "after", "Z", "x4"),
        ("LINSERT", "l", "BEFORE", "A", "x5"), ("LINSERT", "l", "AFTER", "nope", "x6"),
        ("LINSERT", "l", "BEFORE", "nope", "x6"), ("LINSERT", "nokey", "BEFORE", "a", "x"),
        ("LINSERT", "nokey", "MIDDLE", "a", "x"), ("LINSERT", "l", "MIDDLE", "a", "x"),
        ("LINSERT", "l", "BEFORE", "a"), ("LINSERT", "l", "BEFORE", "a", "x", "y"),
        ("EXISTS", "nokey"), ("LRANGE", "l", "0", "-1"),
        ("RPUSH", "r", "a", "b", "a", "c", "a", "b", "a"),
        ("LREM", "r", "2", "a"), ("LRANGE", "r", "0", "-1"), ("LREM", "r", "-1", "a"),
        ("LRANGE", "r", "0", "-1"), ("LREM", "r", "0", "b"), ("LRANGE", "r", "0", "-1"),
        ("LREM", "r", "5", "nope"), ("LREM", "r", "x", "a"), ("LREM", "r", "1.5", "a"),
        ("LREM", "r", "9223372036854775807", "c"), ("LREM", "nokey", "0", "a"),
        ("LREM", "nokey", "x", "a"), ("LREM", "r", "0"), ("LREM", "r", "0", "a", "b"),
        ("LREM", "r", "0", "a"), ("EXISTS", "r"),
        ("RPUSH", "t", *"abcdefghij"),
        ("LTRIM", "t", "1", "-2"), ("LRANGE", "t", "0", "-1"), ("LTRIM", "t", "-100", "100"),
        ("LRANGE", "t", "0", "-1"), ("LTRIM", "t", "2", "-3"), ("LRANGE", "t", "0", "-1"),
        ("LTRIM", "t", "-2", "-1"), ("LRANGE", "t", "0", "-1"), ("LTRIM", "t", "x", "1"),
        ("LTRIM", "t", "0", "y"), ("LTRIM", "nokey", "0", "1"), ("LTRIM", "nokey", "x", "1"),
        ("LTRIM", "t", "0"), ("LTRIM", "t", "0", "1", "2"), ("LTRIM", "t", "5", "1"),
        ("EXISTS", "t"), ("RPUSH", "t", "a", "b"), ("LTRIM", "t", "2", "10"), ("EXISTS", "t"),
        ("RPUSH", "t", "a", "b"), ("LTRIM", "t", "-1", "-2"), ("EXISTS", "t"),
        ("RPUSH", "t", "a", "b", "c"), ("LTRIM", "t", "-9223372036854775808", "0"),
        ("LRANGE", "t", "0", "-1"), ("LTRIM", "t", "0", "9223372036854775807"),
        ("LRANGE", "t", "0", "-1"),
    )
    for key in WRONG_KEYS:
        run(both,
            ("LSET", key, "0", "a"), ("LSET", key, "x", "a"), ("LINSERT", key, "BEFORE", "a", "b"),
            ("LINSERT", key, "MIDDLE", "a", "b"), ("LREM", key, "0", "a"),
            ("LREM", key, "x", "a"), ("LTRIM", key, "0", "1"), ("LTRIM", key, "x", "1"))


def test_pops(both):
    setup_types(both)
    run(both,
        ("RPUSH", "l", *"abcdefgh"), ("LPOP", "l"), ("RPOP", "l"), ("LPOP", "l", "2"),
        ("RPOP", "l", "1"), ("LPOP", "l", "0"), ("RPOP", "l", "0"), ("LPOP", "l", "-1"),
        ("RPOP", "l", "x"), ("LPOP", "l", "1.5"), ("LPOP", "l", ""),
        ("LPOP", "l", "1", "2"), ("RPOP", "l", "1", "2"), ("LPOP",), ("RPOP",),
        ("LRANGE", "l", "0", "-1"), ("RPOP", "l", "100"), ("EXISTS", "l"),
        ("LPOP", "nokey"), ("RPOP", "nokey"), ("LPOP", "nokey", "1"), ("RPOP", "nokey", "0"),
        ("LPOP", "nokey", "-1"), ("LPOP", "nokey", "x"),
        ("RPUSH", "l", "a"), ("LPOP", "l", "9223372036854775807"), ("EXISTS", "l"),
        ("RPUSH", "l", "only"), ("RPOP", "l"), ("EXISTS", "l"),
        # LMPOP
        ("RPUSH", "a", "1", "2", "3"), ("RPUSH", "b", "4", "5"),
        ("LMPOP", "2", "nokey", "a", "LEFT"), ("LMPOP", "2", "a", "b", "RIGHT", "COUNT", "5"),
        ("LMPOP", "1", "a", "left"), ("LMPOP", "2", "nokey", "b", "right", "count", "1"),
        ("LMPOP", "3", "nokey", "a", "b", "LEFT", "COUNT", "10"), ("EXISTS", "a", "b"),
        ("LMPOP", "1", "nokey", "LEFT"), ("LMPOP", "2", "nokey", "nokey2", "LEFT", "COUNT", "3"),
        ("LMPOP", "0", "a", "LEFT"), ("LMPOP", "-1", "a", "LEFT"), ("LMPOP", "x", "a", "LEFT"),
        ("LMPOP", "9999999999999999999", "a", "LEFT"), ("LMPOP", "2", "a", "LEFT"),
        ("LMPOP", "2147483648", "a", "LEFT"), ("LMPOP", "1", "a", "UP"),
        ("LMPOP", "1", "a", "LEFT", "COUNT", "0"), ("LMPOP", "1", "a", "LEFT", "COUNT", "-1"),
        ("LMPOP", "1", "a", "LEFT", "COUNT", "x"), ("LMPOP", "1", "a", "LEFT", "COUNT"),
        ("LMPOP", "1", "a", "LEFT", "COUNT", "1", "COUNT", "1"),
        ("LMPOP", "1", "a", "LEFT", "BOGUS"), ("LMPOP", "1", "a"), ("LMPOP", "1"),
        ("LMPOP",), ("LMPOP", "1", "a", "LEFT", "COUNT", "0", "BOGUS"),
    )
    for key in WRONG_KEYS:
        run(both,
            ("LPOP", key), ("RPOP", key), ("LPOP", key, "2"), ("RPOP", key, "0"),
            ("LPOP", key, "x"), ("LMPOP", "1", key, "LEFT"), ("LMPOP", "2", "nokey", key, "RIGHT"),
            ("RPUSH", "ok", "v"), ("LMPOP", "2", "ok", key, "LEFT"), ("LRANGE", "ok", "0", "-1"),
            ("LMPOP", "2", key, "ok", "LEFT"), ("LRANGE", "ok", "0", "-1"), ("DEL", "ok"))


def test_lmove_and_rpoplpush(both):
    setup_types(both)
    run(both, ("RPUSH", "s", *"abcdef"))
    for a, b in (("LEFT", "LEFT"), ("LEFT", "RIGHT"), ("RIGHT", "LEFT"), ("RIGHT", "RIGHT"),
                 ("left", "right")):
        run(both, ("LMOVE", "s", "d", a, b), ("LRANGE", "s", "0", "-1"),
            ("LRANGE", "d", "0", "-1"))
    run(both,
        ("LMOVE", "s", "s", "LEFT", "RIGHT"), ("LMOVE", "s", "s", "RIGHT", "LEFT"),
        ("LMOVE", "s", "s", "LEFT", "LEFT"), ("LRANGE", "s", "0", "-1"),
        ("RPOPLPUSH", "s", "d"), ("RPOPLPUSH", "s", "s"), ("LRANGE", "s", "0", "-1"),
        ("LRANGE", "d", "0", "-1"), ("LMOVE", "nokey", "d", "LEFT", "LEFT"),
        ("RPOPLPUSH", "nokey", "d"), ("LMOVE", "nokey", "str", "LEFT", "LEFT"),
        ("RPOPLPUSH", "nokey", "str"), ("LMOVE", "s", "d", "UP", "LEFT"),
        ("LMOVE", "s", "d", "LEFT", "DOWN"), ("LMOVE", "nokey", "d", "UP", "LEFT"),
        ("LMOVE", "s", "d", "LEFT"), ("LMOVE", "s", "d", "LEFT", "LEFT", "x"), ("RPOPLPUSH", "s"),
        ("RPOPLPUSH", "s", "d", "x"),
        ("RPUSH", "one", "x"), ("LMOVE", "one", "one", "LEFT", "RIGHT"),
        ("LRANGE", "one", "0", "-1"), ("LMOVE", "one", "other", "LEFT", "RIGHT"),
        ("EXISTS", "one"), ("RPOPLPUSH", "other", "one"), ("EXISTS", "other"),
        ("LRANGE", "one", "0", "-1"),
        ("BLMOVE", "one", "two", "LEFT", "LEFT", "0"), ("BRPOPLPUSH", "two", "one", "0"),
        ("BLMOVE", "one", "one", "RIGHT", "LEFT", "0.5"), ("LRANGE", "one", "0", "-1"),
        ("BLMOVE", "one", "two", "UP", "LEFT", "x"), ("BLMOVE", "one", "two", "LEFT", "LEFT", "x"),
        ("BLMOVE", "one", "two", "LEFT", "LEFT", "-1"), ("BLMOVE", "nokey", "two", "LEFT", "LEFT",
                                                         "-1"),
        ("BRPOPLPUSH", "one", "two", "-1"), ("BRPOPLPUSH", "one", "two", "x"),
        ("BLMOVE", "one", "two", "LEFT", "LEFT"), ("BRPOPLPUSH", "one", "two"),
        ("BLMOVE", "nokey", "d", "LEFT", "LEFT", "0.01"), ("BRPOPLPUSH", "nokey", "d", "0.01"),
        ("BLMOVE", "nokey", "str", "LEFT", "LEFT", "0.01"), ("EXISTS", "two"),
    )
    for key in WRONG_KEYS:
        run(both,
            ("RPUSH", "s", "a", "b"), ("LMOVE", key, "s", "LEFT", "LEFT"),
            ("LMOVE", "s", key, "LEFT", "LEFT"),
            ("RPOPLPUSH", key, "s"), ("RPOPLPUSH", "s", key), ("LMOVE", key, key, "LEFT", "LEFT"),
            ("BLMOVE", key, "s", "LEFT", "LEFT", "0"), ("BLMOVE", "s", key, "RIGHT", "LEFT", "0"),
            ("BRPOPLPUSH", key, "s", "0"), ("BRPOPLPUSH", "s", key, "0"),
            ("LRANGE", "s", "0", "-1"), ("TYPE", key))


def test_blocking_pops_that_do_not_block(both):
    """BLPOP, BRPOP, BLMPOP on a list with elements answer at once; on an empty key with a short
    timeout they time out (nil); their argument errors."""
    setup_types(both)
    run(both,
        ("RPUSH", "a", "1", "2", "3"), ("RPUSH", "b", "4", "5"),
        ("BLPOP", "nokey", "a", "b", "0"), ("BRPOP", "b", "a", "0"), ("BLPOP", "a", "1.5"),
        ("BRPOP", "nokey", "b", "0.01"), ("BLPOP", "a", "a", "0"), ("EXISTS", "a", "b"),
        ("BLPOP", "nokey", "0.01"), ("BRPOP", "nokey", "nokey2", "0.01"),
        ("RPUSH", "a", "1", "2", "3"), ("RPUSH", "b", "4", "5"),
        ("BLMPOP", "0", "2", "nokey", "a", "LEFT"),
        ("BLMPOP", "0", "1", "a", "RIGHT", "COUNT", "5"),
        ("BLMPOP", "0.5", "2", "a", "b", "left", "count", "1"),
        ("BLMPOP", "0.01", "1", "nokey", "LEFT"),
        ("BLMPOP", "0.01", "2", "nokey", "a", "RIGHT", "COUNT", "2"), ("LRANGE", "b", "0", "-1"),
        ("BLPOP", "a", "-1"), ("BLPOP", "a", "x"), ("BLPOP", "a", ""), ("BLPOP", "a", "nan"),
        ("BLPOP", "a", "0.01x"), ("BLPOP", "a", "-0.5"), ("BRPOP", "a", "-1"), ("BRPOP", "a", "y"),
        ("BLPOP", "a"), ("BRPOP", "a"), ("BLPOP",), ("BLPOP", "nokey", "-1"),
        ("BLMPOP", "0", "0", "a", "LEFT"), ("BLMPOP", "0", "-1", "a", "LEFT"),
        ("BLMPOP", "0", "x", "a", "LEFT"), ("BLMPOP", "0", "2", "a", "LEFT"),
        ("BLMPOP", "0", "1", "a", "UP"), ("BLMPOP", "0", "1", "a", "LEFT", "COUNT", "0"),
        ("BLMPOP", "0", "1", "a", "LEFT", "COUNT", "-3"),
        ("BLMPOP", "0", "1", "a", "LEFT", "COUNT"),
        ("BLMPOP", "0", "1", "a", "LEFT", "COUNT", "1", "COUNT", "2"),
        ("BLMPOP", "x", "1", "a", "LEFT"), ("BLMPOP", "-1", "1", "a", "LEFT"),
        ("BLMPOP", "x", "0", "a", "LEFT"), ("BLMPOP", "-1", "0", "a", "FOO"),
        ("BLMPOP", "0", "1", "a"), ("BLMPOP", "0", "1"), ("BLMPOP", "0"),
    )
    for key in WRONG_KEYS:
        run(both, ("BLPOP", key, "0"), ("BRPOP", "nokey", key, "0"), ("BLPOP", key, "x"),
            ("BLMPOP", "0", "1", key, "LEFT"), ("BLMPOP", "0", "2", "nokey", key, "RIGHT"),
            ("RPUSH", "ok", "v"), ("BLPOP", "ok", key, "0"), ("BLPOP", key, "ok", "0"),
            ("DEL", "ok"))


# --- big elements, long lists, fills ------------------------------------------------------------


def test_big_elements(both):
    """Elements past 8 KB (a node of their own) among small ones, edited in place."""
    run(both,
        ("RPUSH", "l", "a", BIG, "b", HUGE, "c"), ("LPUSH", "l", BIG + b"1", "z"),
        ("LRANGE", "l", "0", "-1"), ("LLEN", "l"), ("OBJECT", "ENCODING", "l"),
        ("LINDEX", "l", "2"), ("LINDEX", "l", "-2"), ("LPOS", "l", HUGE),
        ("LPOS", "l", BIG, "RANK", "-1"), ("LINSERT", "l", "BEFORE", HUGE, BIG + b"2"),
        ("LINSERT", "l", "AFTER", BIG, "small"), ("LINSERT", "l", "AFTER", "small", HUGE),
        ("LSET", "l", "0", BIG + b"3"), ("LSET", "l", "3", "tiny"), ("LRANGE", "l", "0", "-1"),
        ("LREM", "l", "0", HUGE), ("LREM", "l", "-1", BIG), ("LRANGE", "l", "0", "-1"),
        ("LMOVE", "l", "m", "LEFT", "RIGHT"), ("LMOVE", "l", "m", "RIGHT", "LEFT"),
        ("LRANGE", "m", "0", "-1"), ("LTRIM", "l", "1", "-2"), ("LRANGE", "l", "0", "-1"),
        ("RPUSH", "x", b"x" * 8192, b"y" * 8191, b"z" * 8193, b"w" * 65537),
        ("LRANGE", "x", "0", "-1"), ("LRANGE", "x", "1", "2"), ("OBJECT", "ENCODING", "x"),
        ("LPOP", "x", "2"), ("RPOP", "x"), ("LRANGE", "x", "0", "-1"),
        ("LMPOP", "2", "x", "l", "RIGHT", "COUNT", "3"), ("LPOP", "l", "100"), ("EXISTS", "l"),
    )
    both("OBJECT", "ENCODING", "m", normalise=encoding)
    both("OBJECT", "ENCODING", "x", normalise=encoding)


def build_long(both: Both, key: str, count: int) -> None:
    for at in range(0, count, 500):
        both.ok("RPUSH", key, *[f"e{i:05d}" if i % 7 else str(i)
                                for i in range(at, min(at + 500, count))])


@pytest.mark.parametrize(("fill", "depth"), [(None, None), ("16", None), ("-1", "1"),
                                             ("5", "2"), ("-5", "3"), ("1", None)])
def test_long_lists_edited_in_the_middle(both, fill, depth):
    """Thousands of elements (many quicklist nodes: with the default fill, small count fills,
    and compressed inner nodes), edited and read in the middle and at both ends."""
    set_fill(both, fill, depth)
    build_long(both, "l", 3000)
    same_list(both, "l")
    # A quicklist on both sides once the elements' lengths pass the fill (16 KB of them): not
    # past 64 KB (-5), where 7.2+ keeps a listpack.
    both("OBJECT", "ENCODING", "l", normalise=encoding if fill == "-5" else None)
    reads: list[tuple[Any, ...]] = []
    for index in (0, 1, 15, 16, 17, 1499, 1500, 2999, 3000, -1, -16, -17, -1500, -3000, -3001):
        reads.append(("LINDEX", "l", str(index)))
    for start, end in ((1490, 1510), (-20, -1), (0, 40), (2990, 5000), (-5000, 3), (100, 99),
                       (1000, -1000), (-1, 0)):
        reads.append(("LRANGE", "l", str(start), str(end)))
    for element, opts in (("e01501", ()), ("1498", ()), ("e02999", ("RANK", "-1")),
                          ("e00001", ("MAXLEN", "1")), ("e00001", ("MAXLEN", "2")),
                          ("nope", ("COUNT", "0")), ("e01234", ("RANK", "-1", "MAXLEN", "1766")),
                          ("e01234", ("RANK", "-1", "MAXLEN", "1765"))):
        reads.append(("LPOS", "l", element, *opts))
    run(both, *reads)
    edits: list[tuple[Any, ...]] = [
        ("LINSERT", "l", "BEFORE", "e01501", "ins1"), ("LINSERT", "l", "AFTER", "e01501", BIG),
        ("LINSERT", "l", "AFTER", "e02999", "last"), ("LINSERT", "l", "BEFORE", "e00001", "2nd"),
        ("LSET", "l", "1500", "set1"), ("LSET", "l", "-1500", BIG + b"s"),
        ("LSET", "l", "0", "first"), ("LSET", "l", "-1", "lastset"), ("LSET", "l", "3100", "x"),
        ("RPUSH", "l", *["dup"] * 30), ("LINSERT", "l", "BEFORE", "e01000", "dup"),
        ("LREM", "l", "5", "dup"), ("LREM", "l", "-5", "dup"), ("LREM", "l", "0", "dup"),
        ("LREM", "l", "0", "e01502"), ("LREM", "l", "1", BIG),
        ("LMOVE", "l", "l", "LEFT", "RIGHT"), ("LMOVE", "l", "l", "RIGHT", "LEFT"),
        ("LPOP", "l", "17"), ("RPOP", "l", "33"), ("LMPOP", "1", "l", "LEFT", "COUNT", "100"),
        ("LTRIM", "l", "10", "-11"), ("LTRIM", "l", "500", "1999"), ("LTRIM", "l", "-700", "-200"),
    ]
    for argv in edits:
        both(*argv)
        run(both, *reads)
        same_list(both, "l")
    both("OBJECT", "ENCODING", "l", normalise=encoding)


def test_list_settings(both):
    """The list settings as CONFIG GET reports them, their old `ziplist` name, and a bad value."""
    run(both,
        ("CONFIG", "GET", "list-max-listpack-size"), ("CONFIG", "GET", "list-max-ziplist-size"),
        ("CONFIG", "GET", "list-compress-depth"), ("CONFIG", "SET", "list-max-ziplist-size", "7"),
        ("CONFIG", "GET", "list-max-listpack-size"), ("CONFIG", "SET", "list-compress-depth", "2"),
        ("CONFIG", "GET", "list-compress-depth"),
        ("CONFIG", "SET", "list-max-listpack-size", "x"),
        ("CONFIG", "SET", "list-compress-depth", "x"),
        ("CONFIG", "SET", "list-max-listpack-size", "-2"),
        ("CONFIG", "SET", "list-compress-depth", "0"))


def test_object_encoding(both):
    """Elements whose lengths add up past 8 KB (one element, or many small ones) make a
    quicklist on both sides; smaller lists are compared as 7.0 names them (see the module
    docstring). (7.2+ sums the elements' lengths, not their encoded sizes: 1,500 elements of
    5 bytes stay a listpack of 10.5 KB there, one of 8 bytes do not.)"""
    run(both, ("RPUSH", "big", BIG), ("OBJECT", "ENCODING", "big"),
        ("RPUSH", "many", *[f"m{i:07d}" for i in range(1500)]), ("OBJECT", "ENCODING", "many"))
    both("RPUSH", "small", "a", "1")
    both("OBJECT", "ENCODING", "small", normalise=encoding)
    both("LTRIM", "many", "0", "3")
    both("OBJECT", "ENCODING", "many", normalise=encoding)


# --- a random sequence of writes -----------------------------------------------------------------


def random_argv(rng: random.Random, keys: list[str], pool: list[Any]) -> tuple[Any, ...]:
    key, other, element = rng.choice(keys), rng.choice(keys), rng.choice(pool)
    side = ("LEFT", "RIGHT")
    op = rng.choice(["LPUSH", "RPUSH", "LPUSH", "RPUSH", "LPUSHX", "RPUSHX", "LPOP", "RPOP",
                     "LINSERT", "LSET", "LREM", "LTRIM", "LMOVE", "RPOPLPUSH", "LMPOP", "LPOS",
                     "LINDEX", "LRANGE", "LLEN", "BLMPOP", "BRPOP"])
    index = str(rng.randint(-12, 12))
    if op in ("LPUSH", "RPUSH", "LPUSHX", "RPUSHX"):
        return (op, key, *rng.choices(pool, k=rng.randint(1, 8)))
    if op in ("LPOP", "RPOP"):
        return (op, key, *rng.choice([[], [], ["0"], ["1"], ["3"], ["20"]]))
    if op == "LINSERT":
        return (op, key, rng.choice(["BEFORE", "AFTER"]), element, rng.choice(pool))
    if op == "LSET":
        return (op, key, index, rng.choice(pool))
    if op == "LREM":
        return (op, key, rng.choice(["0", "1", "-1", "2", "-3"]), element)
    if op == "LTRIM":
        return (op, key, str(rng.randint(-6, 4)), str(rng.randint(-4, 12)))
    if op == "LMOVE":
        return (op, key, other, rng.choice(side), rng.choice(side))
    if op == "RPOPLPUSH":
        return (op, key, other)
    if op in ("LMPOP", "BLMPOP"):
        ks = rng.sample(keys, rng.randint(1, len(keys)))
        head = ("LMPOP",) if op == "LMPOP" else ("BLMPOP", "0.01")
        return (*head, str(len(ks)), *ks, rng.choice(side),
                *rng.choice([[], ["COUNT", "2"], ["COUNT", "7"]]))
    if op == "BRPOP":
        return (op, key, other, "0.01")
    if op == "LPOS":
        return (op, key, element, *rng.choice([[], ["RANK", "-1"], ["COUNT", "0"],
                                               ["RANK", "2", "MAXLEN", "6"]]))
    if op == "LINDEX":
        return (op, key, index)
    if op == "LRANGE":
        return (op, key, index, str(rng.randint(-3, 20)))
    return (op, key)


@pytest.mark.parametrize(("fill", "seed"), [(None, 7), ("3", 8), ("-1", 9)])
def test_random_writes_same_state(both, fill, seed):
    set_fill(both, fill)
    rng = random.Random(seed)
    keys = ["k1", "k2", "k3"]
    pool: list[Any] = [*"abcde", "1", "2", "-7", "300", "01", "", "x" * 70, BIG]
    for _ in range(400):
        both(*random_argv(rng, keys, pool))
        same_list(both, *keys)


# --- keyspace events ------------------------------------------------------------------------------

EVENT_SCRIPT: list[tuple[Any, ...]] = [
    # Reads and writes of a missing key (reads notify keymiss; writes nothing).
    ("LRANGE", "m", "0", "-1"), ("LINDEX", "m", "0"), ("LLEN", "m"), ("LPOS", "m", "a"),
    ("LPOP", "m"), ("RPOP", "m", "2"), ("LMPOP", "1", "m", "LEFT"),
    ("LMOVE", "m", "d", "LEFT", "LEFT"), ("RPOPLPUSH", "m", "d"), ("BLPOP", "m", "0.01"),
    ("BLMPOP", "0.01", "1", "m", "LEFT"), ("LSET", "m", "0", "x"),
    ("LINSERT", "m", "BEFORE", "a", "b"), ("LREM", "m", "0", "a"), ("LTRIM", "m", "0", "1"),
    ("LPUSHX", "m", "a"), ("RPUSHX", "m", "a"),
    # Writes of a list.
    ("LPUSH", "l", "a", "b", "c"), ("RPUSH", "l", "d"), ("LPUSHX", "l", "x"),
    ("RPUSHX", "l", "y", "z"), ("LINSERT", "l", "AFTER", "a", "n"),
    ("LINSERT", "l", "BEFORE", "nope", "n"), ("LSET", "l", "0", "q"), ("LSET", "l", "99", "q"),
    ("LREM", "l", "1", "n"), ("LREM", "l", "0", "nope"), ("LTRIM", "l", "0", "-1"),
    ("LTRIM", "l", "1", "-2"), ("LPOP", "l"), ("RPOP", "l", "1"), ("LPOP", "l", "0"),
    ("LRANGE", "l", "0", "-1"), ("LINDEX", "l", "0"), ("LPOS", "l", "a"),
    ("LMOVE", "l", "l2", "LEFT", "RIGHT"), ("RPOPLPUSH", "l2", "l3"),
    ("LMOVE", "l", "l", "LEFT", "RIGHT"), ("LMOVE", "l", "str", "LEFT", "RIGHT"),
    ("BLPOP", "l3", "0"), ("BRPOP", "nokey", "l", "0"), ("RPUSH", "l4", "1", "2", "3"),
    ("BLMOVE", "l4", "l5", "RIGHT", "LEFT", "0"), ("BRPOPLPUSH", "l5", "l4", "0"),
    ("BLMPOP", "0", "2", "nokey", "l4", "LEFT", "COUNT", "2"), ("LMPOP", "1", "l4", "RIGHT"),
    ("RPUSH", "t", "a", "b", "c"), ("LTRIM", "t", "5", "1"), ("RPUSH", "r", "a", "a"),
    ("LREM", "r", "0", "a"), ("RPUSH", "p", "a", "b"), ("LPOP", "p", "5"),
    ("RPUSH", "s", "a"), ("LMOVE", "s", "s2", "LEFT", "LEFT"),
    ("LMOVE", "s2", "s2", "LEFT", "LEFT"),
    ("RPUSH", "w", "a"), ("LPUSH", "str", "a"), ("SET", "str", "v"), ("RPUSH", "str", "a"),
    ("RENAME", "w", "w2"), ("COPY", "w2", "w3"), ("EXPIRE", "w3", "100"), ("DEL", "w2", "w3"),
    ("EVAL", "redis.call('RPUSH', KEYS[1], '1'); redis.call('LPOP', KEYS[1]);"
             " return redis.call('RPUSH', KEYS[1], '2', '3')", "1", "x"),
    ("FLUSHDB",),
]


@pytest.fixture
def list_watchers(redis_server: Any, served: Any) -> Iterator[Callable[[str], Any]]:
    with watcher_pairs(served, redis_server) as start:
        yield start


@pytest.mark.parametrize("classes", ["KEA", "Kl", "El", "Eg", "KEm", "E$l", "Ex"])
def test_list_commands_publish_what_redis_publishes(list_watchers, classes):
    ours, theirs = list_watchers(classes)
    differences = []
    for argv in EVENT_SCRIPT:
        got, expected = ours.run(argv), theirs.run(argv)
        if got != expected:
            differences.append((argv, got, expected))
    assert differences == []


# --- exact reply bytes ---------------------------------------------------------------------------

BYTES_SCRIPT: list[tuple[Any, ...]] = [
    ("RPUSH", "l", "a", "1", "-5", "", BIG), ("LPOP", "nokey"), ("LPOP", "nokey", "1"),
    ("LPOP", "nokey", "0"), ("LPOP", "l", "0"), ("RPOP", "l", "0"), ("LINDEX", "nokey", "0"),
    ("LINDEX", "l", "9"), ("LINDEX", "l", "1"), ("LPOS", "nokey", "a"),
    ("LPOS", "nokey", "a", "COUNT", "0"), ("LPOS", "l", "zz"), ("LPOS", "l", "zz", "COUNT", "1"),
    ("LPOS", "l", "1", "COUNT", "0"), ("LMPOP", "1", "nokey", "LEFT"),
    ("LMOVE", "nokey", "d", "LEFT", "LEFT"), ("RPOPLPUSH", "nokey", "d"),
    ("LRANGE", "nokey", "0", "-1"), ("LRANGE", "l", "5", "9"), ("LRANGE", "l", "0", "-1"),
    ("BLPOP", "nokey", "0.01"), ("BRPOP", "nokey", "0.01"),
    ("BLMOVE", "nokey", "d", "LEFT", "LEFT", "0.01"), ("BRPOPLPUSH", "nokey", "d", "0.01"),
    ("BLMPOP", "0.01", "1", "nokey", "LEFT"), ("LINSERT", "nokey", "BEFORE", "a", "b"),
    ("LINSERT", "l", "BEFORE", "zz", "b"), ("LSET", "l", "0", "A"), ("LREM", "l", "0", "zz"),
    ("LTRIM", "l", "0", "-1"), ("LMPOP", "1", "l", "RIGHT", "COUNT", "2"), ("BLPOP", "l", "0"),
    ("BLMPOP", "0", "1", "l", "LEFT"), ("LPOP", "l", "5"), ("LPUSHX", "l", "a"),
    ("MULTI",), ("BLPOP", "nokey", "0"), ("BLMOVE", "nokey", "d", "LEFT", "LEFT", "0"),
    ("BLMPOP", "0", "1", "nokey", "LEFT"), ("LPOP", "nokey"), ("LPOP", "nokey", "2"), ("EXEC",),
]


class RawConnection:
    """One connection that returns each reply as the exact bytes sent."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.file = self.sock.makefile("rb")

    def __call__(self, *argv: Any) -> bytes:
        self.sock.sendall(encode_command(*argv))
        return read_raw_reply(self.file)

    def close(self) -> None:
        self.file.close()
        self.sock.close()


@pytest.mark.parametrize("protocol", ["2", "3"])
def test_reply_bytes(served, redis_server, redis_raw, protocol):
    """Null bulk or null array, empty array, RESP3 null: each reply's bytes as Redis's."""
    ours = RawConnection(served.host, served.port)
    theirs = RawConnection(redis_server.host, redis_server.port)
    try:
        for conn in (ours, theirs):
            conn("HELLO", protocol)  # (the servers' HELLO replies differ: not compared)
        for argv in BYTES_SCRIPT:
            mine, oracle = ours(*argv), theirs(*argv)
            assert mine == oracle, f"\nargv:   {argv!r}\nengine: {mine!r}\nredis:  {oracle!r}"
    finally:
        ours.close()
        theirs.close()
