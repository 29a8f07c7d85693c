"""OBJECT, MEMORY USAGE and COPY on the embedded engine: each type's word, the copy sharing
nothing with its source, COPY's effect replayed to the same state, its events, and WATCH on a
destination in another database. (Replies against redis-server: tests/differential/
test_objects_redis.py.)"""

from __future__ import annotations

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.runtime.core import Session
from streamkeep.engine.wire.reply import NULL_ARRAY


def test_object_encoding_follows_each_type() -> None:
    e = Engine()
    e.execute("SET", "n", "12")
    e.execute("SET", "short", "x" * 44)
    e.execute("SET", "long", "x" * 45)
    e.execute("SET", "big", "99999999999999999999")  # beyond a long: a string
    e.execute("XADD", "s", "1-1", "f", "v")
    assert [e.execute("OBJECT", "ENCODING", k) for k in ("n", "short", "long", "big", "s")] == \
        [b"int", b"embstr", b"raw", b"embstr", b"stream"]
    assert e.execute("OBJECT", "ENCODING", "missing") is None
    assert e.execute("OBJECT", "REFCOUNT", "n") == 2**31 - 1  # a shared integer
    assert e.execute("OBJECT", "REFCOUNT", "s") == 1
    assert e.execute("OBJECT", "IDLETIME", "s") == 0
    with pytest.raises(ReplyError, match="LFU maxmemory policy is not selected"):
        e.execute("OBJECT", "FREQ", "s")


def test_memory_usage_grows_with_the_value() -> None:
    e = Engine()
    e.execute("SET", "a", "x")
    e.execute("SET", "b", "x" * 1000)
    assert e.execute("MEMORY", "USAGE", "b") > e.execute("MEMORY", "USAGE", "a") + 900
    assert e.execute("MEMORY", "USAGE", "missing") is None
    e.execute("XADD", "s", "1-1", "f", "v")
    small = e.execute("MEMORY", "USAGE", "s", "SAMPLES", "0")
    for i in range(2, 500):
        e.execute("XADD", "s", f"{i}-1", "field", "value" * 4)
    assert e.execute("MEMORY", "USAGE", "s") > small + 499 * 20
    with pytest.raises(ReplyError, match="syntax error"):
        e.execute("MEMORY", "USAGE", "s", "SAMPLES", "-1")


def test_copy_shares_nothing_and_replays() -> None:
    clock = [1000]
    e = Engine(clock=lambda: clock[0])
    replica = Engine(clock=lambda: clock[0])
    e.add_sink(replica.replay.apply)
    e.execute("XADD", "s", "1-1", "f", "v")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("SET", "t", "text", "PX", "50000")
    assert e.execute("COPY", "s", "c") == 1
    assert e.execute("COPY", "s", "c") == 0
    e.execute("XADD", "c", "2-1", "f", "w")
    e.execute("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "c", ">")
    assert e.execute("XLEN", "s") == 1 and e.execute("XLEN", "c") == 2
    assert e.execute("XPENDING", "s", "g")[0] == 0  # the copy's group is its own
    assert e.execute("COPY", "t", "c", "REPLACE") == 1
    assert e.execute("TYPE", "c") == "string"
    assert e.execute("PTTL", "c") == 50000  # the TTL comes along
    assert e.execute("COPY", "t", "t", "DB", "2") == 1
    e.execute("SELECT", "2")
    assert e.execute("GET", "t") == b"text"
    e.execute("SELECT", "0")
    assert e.digest() == replica.digest()
    with pytest.raises(ReplyError, match="source and destination objects are the same"):
        e.execute("COPY", "t", "t")
    with pytest.raises(ReplyError, match="DB index is out of range"):
        e.execute("COPY", "t", "u", "DB", "16")
    with pytest.raises(ReplyError, match="syntax error"):
        e.execute("COPY", "t", "u", "FOO")
    assert e.execute("COPY", "missing", "u") == 0


def test_copy_to_another_database_touches_its_watchers() -> None:
    e = Engine()
    watcher = Session(3)
    e.execute("SET", "src", "v")
    assert e.submit(watcher, (b"WATCH", b"dst"))[0] == "OK"
    e.execute("COPY", "src", "dst", "DB", "3")
    e.submit(watcher, (b"MULTI",))
    e.submit(watcher, (b"SET", b"other", b"1"))
    assert e.submit(watcher, (b"EXEC",))[0] is NULL_ARRAY  # the transaction did not run


def _events(sub: object) -> list[bytes]:
    found = []
    while (message := sub.get_message(0)) is not None:  # type: ignore[attr-defined]
        if message["type"] == "pmessage":
            found.append(message["channel"])
    return found


def test_copy_events_are_renames() -> None:
    e = Engine()
    e.execute("CONFIG", "SET", "notify-keyspace-events", "KEAnoc")
    sub = e.psubscribe("__keyevent@*")
    e.execute("SET", "a", "1")
    e.execute("XADD", "b", "1-1", "f", "v")
    _events(sub)
    e.execute("COPY", "a", "b", "REPLACE")
    assert _events(sub) == [b"__keyevent@0__:new", b"__keyevent@0__:overwritten",
                            b"__keyevent@0__:type_changed", b"__keyevent@0__:copy_to"]
    sub.close()
