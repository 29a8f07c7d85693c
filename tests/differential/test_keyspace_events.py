"""Keyspace notifications against the real redis-server, over the wire: for each command of a
script covering the string, generic (DEL, RENAME, EXPIRE, PERSIST, RESTORE, expiry) and stream
events, the messages a pattern subscriber receives (channel and payload, in order) are the
same as redis-server's, for several notify-keyspace-events settings (key misses of read commands
included); CONFIG SET/GET of the setting as redis-server answers it.

Where Redis 7.2+ differs from Debian's 7.0, streamkeep follows 8.x and the script avoids the
case: XREADGROUP, XCLAIM and XAUTOCLAIM create their consumer (and notify
`xgroup-createconsumer`) even when they deliver nothing (tested without the oracle below).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.diffutil import reset_redis_config
from tests.support.keyspace_watch import Watcher, watcher_pairs
from tests.support.resp_client import RespClient, RespError

# A string's DUMP payload (RDB 10, `bar`) both servers restore.
BAR_PAYLOAD = b"\x00\x03bar\x0a\x00\x8a\x8c\x1e\xb2\x60\x53\x9a\x79"

SCRIPT: list[tuple[Any, ...]] = [
    # Reads of missing keys (keymiss, class m) and of present ones (nothing).
    ("GET", "m"), ("MGET", "m", "m2"), ("STRLEN", "m"), ("GETRANGE", "m", "0", "1"),
    ("SUBSTR", "m", "0", "1"), ("LCS", "m", "m2"), ("EXISTS", "m", "m2"), ("TYPE", "m"),
    ("TTL", "m"), ("PTTL", "m"), ("EXPIRETIME", "m"), ("PEXPIRETIME", "m"), ("DUMP", "m"),
    ("GETDEL", "m"), ("GETEX", "m"), ("GETEX", "m", "EX", "10"), ("SET", "m", "v", "GET"),
    ("GETSET", "m2", "v"), ("DEL", "m", "m2"), ("INCR", "m"), ("APPEND", "m3", "x"),
    ("SETRANGE", "m4", "1", "x"), ("EXPIRE", "nokey", "10"), ("PERSIST", "nokey"),
    ("XRANGE", "m", "-", "+"), ("XREVRANGE", "m", "+", "-"), ("XLEN", "m"),
    ("XREAD", "STREAMS", "m", "0"), ("XREAD", "COUNT", "1", "STREAMS", "m", "m2", "0", "0"),
    ("XINFO", "STREAM", "m"), ("XPENDING", "m", "g"), ("XACK", "m", "g", "1-1"),
    ("XCLAIM", "m", "g", "c", "0", "1-1"), ("XAUTOCLAIM", "m", "g", "c", "0", "0"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "m", ">"), ("XDEL", "m", "1-1"),
    ("XTRIM", "m", "MAXLEN", "0"), ("XGROUP", "CREATE", "m", "g", "0"),
    ("XSETID", "m", "1-1"), ("RENAME", "m", "m9"),
    ("MGET", "m", "m3", "m4"), ("TYPE", "m3"), ("EXISTS", "m3"), ("DEL", "m", "m3", "m4"),
    ("SET", "k", "v"), ("SET", "k", "w", "EX", "100"), ("SET", "k", "x", "KEEPTTL"),
    ("SET", "k", "y", "NX"), ("SET", "k2", "y", "XX"), ("SETNX", "n", "1"), ("SETNX", "n", "1"),
    ("SETEX", "e", "100", "v"), ("PSETEX", "e", "100000", "v"), ("SET", "k", "z", "GET"),
    ("GETSET", "k", "z"), ("GETDEL", "k"), ("GETDEL", "k"),
    ("MSET", "a", "1", "b", "2"), ("MSETNX", "a", "1", "c", "3"), ("MSETNX", "c", "3", "d", "4"),
    ("INCR", "a"), ("INCRBY", "a", "5"), ("DECR", "a"), ("DECRBY", "a", "2"),
    ("INCRBYFLOAT", "a", "1.5"), ("INCR", "b2"), ("INCRBY", "a", "x"),
    ("APPEND", "b", "x"), ("APPEND", "new", "x"), ("SETRANGE", "b", "5", "y"),
    ("SETRANGE", "b", "0", ""), ("SETRANGE", "sr", "2", "ab"),
    ("GETEX", "b", "EX", "100"), ("GETEX", "b", "PERSIST"), ("GETEX", "b", "PERSIST"),
    ("GETEX", "b"), ("GETEX", "b", "PXAT", "1"),
    ("EXPIRE", "a", "100"), ("PEXPIRE", "a", "100000"), ("EXPIREAT", "a", "4000000000"),
    ("PEXPIREAT", "a", "4000000000000"), ("EXPIRE", "a", "100", "NX"), ("PERSIST", "a"),
    ("PERSIST", "a"), ("EXPIRE", "a", "-1"), ("EXPIRE", "zz", "10"),
    ("SET", "r1", "v"), ("RENAME", "r1", "r2"), ("SET", "r3", "v"), ("RENAME", "r2", "r3"),
    ("RENAMENX", "r3", "c"), ("RENAMENX", "r3", "r4"), ("RENAME", "r4", "r4"),
    ("DEL", "r4", "c", "nokey"), ("UNLINK", "d"), ("DEL", "nokey"),
    ("RESTORE", "rs", "0", BAR_PAYLOAD), ("RESTORE", "rs", "0", BAR_PAYLOAD, "REPLACE"),
    ("RESTORE", "rs", "1", BAR_PAYLOAD, "REPLACE", "ABSTTL"),
    ("XADD", "s", "1-1", "f", "v"), ("XADD", "s", "*", "f", "v"),
    ("XADD", "s", "MAXLEN", "1", "*", "f", "v"), ("XADD", "s", "NOMKSTREAM", "*", "f", "v"),
    ("XADD", "nos", "NOMKSTREAM", "*", "f", "v"), ("XADD", "s", "1-1", "f", "v"),
    ("XTRIM", "s", "MAXLEN", "0"), ("XTRIM", "s", "MAXLEN", "0"), ("XSETID", "s", "100-1"),
    ("XADD", "s", "200-1", "f", "v"), ("XADD", "s", "201-1", "f", "v"),
    ("XDEL", "s", "200-1", "99-1"), ("XDEL", "s", "99-1"),
    ("XGROUP", "CREATE", "s", "g", "0"), ("XGROUP", "CREATE", "s", "g", "0"),
    ("XGROUP", "CREATE", "s2", "g", "$", "MKSTREAM"), ("XGROUP", "SETID", "s", "g", "0"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "c1"), ("XGROUP", "CREATECONSUMER", "s", "g", "c1"),
    ("XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "STREAMS", "s", ">"),
    ("XACK", "s", "g", "201-1"), ("XADD", "s", "202-1", "f", "v"),
    ("XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">"),
    ("XCLAIM", "s", "g", "c3", "0", "202-1"), ("XCLAIM", "s", "g", "c3", "0", "202-1"),
    ("XAUTOCLAIM", "s", "g", "c4", "0", "0"),
    ("XGROUP", "DELCONSUMER", "s", "g", "c3"), ("XGROUP", "DELCONSUMER", "s", "g", "nobody"),
    ("XGROUP", "DESTROY", "s", "g"), ("XGROUP", "DESTROY", "s", "g"),
    ("SET", "s", "now-a-string"), ("XADD", "t", "1-1", "a", "b"), ("RENAME", "t", "s"),
    ("SET", "t", "v"), ("RENAME", "t", "s"),
    ("SET", "px", "v", "PX", "1"), "sleep", ("GET", "px"),
    ("SELECT", "2"), ("SET", "k", "v"), ("XADD", "s", "1-1", "f", "v"), ("SELECT", "0"),
    # Hashes: reads of a missing key (keymiss), writes, an emptied hash deleted.
    ("HGET", "hm", "f"), ("HMGET", "hm", "f"), ("HLEN", "hm"), ("HGETALL", "hm"),
    ("HEXISTS", "hm", "f"), ("HSTRLEN", "hm", "f"), ("HRANDFIELD", "hm"), ("HSCAN", "hm", "0"),
    ("HDEL", "hm", "f"), ("HSET", "h", "a", "1", "b", "2"), ("HMSET", "h", "c", "3"),
    ("HSETNX", "h", "a", "1"), ("HSETNX", "h", "d", "4"), ("HINCRBY", "h", "n", "1"),
    ("HINCRBYFLOAT", "h", "n", "1.5"), ("HINCRBY", "h", "a", "x"), ("HDEL", "h", "nope"),
    ("HDEL", "h", "a", "b", "c"), ("HDEL", "h", "d", "n"), ("HINCRBY", "h2", "n", "1"),
    ("HGET", "h2", "n"), ("HGETALL", "h2"),
    ("FLUSHDB",),
]


@pytest.fixture
def watchers(redis_server: Any, served: Any) -> Iterator[Callable[[str], Any]]:
    with watcher_pairs(served, redis_server) as start:
        yield start


@pytest.mark.parametrize("classes", ["KEA", "KEAn", "K$", "Eg", "Kx", "Et", "KElt", "E", "KEm",
                                     "Em"])
def test_each_command_publishes_what_redis_publishes(watchers, classes):
    ours, theirs = watchers(classes)
    differences = []
    for argv in SCRIPT:
        got, expected = ours.run(argv), theirs.run(argv)
        if got != expected:
            differences.append((argv, got, expected))
    assert differences == []


def test_consumers_made_by_reads_and_claims_are_notified(served):
    """Redis 7.2+ (not Debian's 7.0): XREADGROUP, XCLAIM and XAUTOCLAIM create their consumer
    even when they deliver or claim nothing, and notify it."""
    w = Watcher(served.host, served.port, "Et")
    try:
        for argv in (("XADD", "s", "1-1", "f", "v"), ("XGROUP", "CREATE", "s", "g", "$")):
            w.run(argv)
        event = [(b"__keyevent@0__:xgroup-createconsumer", b"s")]
        assert w.run(("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")) == event
        assert w.run(("XCLAIM", "s", "g", "c2", "0", "1-1")) == event
        assert w.run(("XAUTOCLAIM", "s", "g", "c3", "0", "0")) == event
        assert w.run(("XAUTOCLAIM", "s", "g", "c3", "0", "0")) == []
    finally:
        w.close()


def test_config_set_and_get_like_redis(redis_raw, served):
    reset_redis_config(redis_raw)
    ours = RespClient(served.host, served.port)
    try:
        for value in ["KEA", "KEAn", "AKEm", "Kg$xt", "lshz", "Ed", "gn", "", "EA", "$$"]:
            for c in (ours, redis_raw):
                assert c.execute("CONFIG", "SET", "notify-keyspace-events", value) == "OK"
            assert ours.execute("CONFIG", "GET", "notify-keyspace-events") == \
                redis_raw.execute("CONFIG", "GET", "notify-keyspace-events"), value
        for value in ["KEA!", "Q", "kea"]:
            with pytest.raises(RespError) as theirs:
                redis_raw.execute("CONFIG", "SET", "notify-keyspace-events", value)
            with pytest.raises(RespError) as mine:
                ours.execute("CONFIG", "SET", "notify-keyspace-events", value)
            # Redis 8.2's list of letters adds o and c (overwritten, type_changed).
            assert str(mine.value) == str(theirs.value).replace("tmdn'", "tmdnoc'")
    finally:
        reset_redis_config(redis_raw)
        ours.close()
