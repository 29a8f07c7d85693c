"""redis-py compatibility of the Engine's redis-py facade: one test body, two backends.

Every test here is written against the redis-py API only and runs unchanged on four backends: the
Engine's `engine.redis(decode_responses=...)` and a real redis-server (through
`redis.Redis(protocol=2)`), each with `decode_responses` off and on. Expected values are written with bytes and passed through
`dec(backend, ...)`, which turns them into str when the backend decodes.

The test server is Redis 7.0 while the engine follows 8.x, so only fields and behaviour present in
both are compared; 8.x-only fields (`active-time`, `inactive`) are asserted on the engine backend
alone, and the tests of 8.2+/8.4+ commands and options (XACKDEL, XDELEX, ref_policy, CLAIM) are
named `test_engine_only_*`, take the `engine_backend` fixture (engine only, never skipped) and check
the results redis.io documents.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.exceptions

from streamkeep import Engine, ReplyError
from streamkeep.engine.runtime import redis_api
from streamkeep.engine.runtime.redis_api import RedisAPI

ID_RE = re.compile(r"^\d+-\d+$")


# --- backends -----------------------------------------------------------------------------------


@pytest.fixture(
    params=[
        pytest.param(("engine", False), id="engine-bytes"),
        pytest.param(("engine", True), id="engine-decoded"),
        pytest.param(("redis", False), id="redis-bytes", marks=pytest.mark.redis),
        pytest.param(("redis", True), id="redis-decoded", marks=pytest.mark.redis),
    ]
)
def backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    kind, decode = request.param
    if kind == "engine":
        engine = Engine()
        try:
            yield engine.redis(decode_responses=decode)
        finally:
            engine.close()
        return
    server = request.getfixturevalue("redis_server")
    client = redis.Redis(
        host=server.host, port=server.port, protocol=2, decode_responses=decode
    )
    client.flushall()
    try:
        yield client
    finally:
        client.close()


def is_engine(backend: Any) -> bool:
    return isinstance(backend, RedisAPI)


def decoding(backend: Any) -> bool:
    if is_engine(backend):
        return backend.decode_responses
    return backend.get_encoder().decode_responses


def dec(backend: Any, value: Any) -> Any:
    """The expected value as this backend returns it: bytes become str when it decodes."""
    if not decoding(backend):
        return value
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [dec(backend, v) for v in value]
    if isinstance(value, tuple):
        return tuple(dec(backend, v) for v in value)
    if isinstance(value, dict):
        return {dec(backend, k): dec(backend, v) for k, v in value.items()}
    return value


def errors_of(backend: Any) -> type[Exception]:
    """The exception a Redis error reply raises on this backend."""
    return ReplyError if is_engine(backend) else redis.ResponseError


def data_errors_of(backend: Any) -> type[Exception]:
    """The exception redis-py's client-side argument checks raise on this backend."""
    return redis_api.DataError if is_engine(backend) else redis.exceptions.DataError


def error_line(exc: BaseException) -> str:
    """The Redis error line: redis-py strips a known code (ERR, ...) into `status_code`."""
    code = getattr(exc, "status_code", None)
    return f"{code} {exc}" if code else str(exc)


def raises_line(backend: Any, call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(errors_of(backend)) as info:
        call(*args, **kwargs)
    return error_line(info.value)


@pytest.fixture(
    params=[pytest.param(False, id="engine-bytes"), pytest.param(True, id="engine-decoded")]
)
def engine_backend(request: pytest.FixtureRequest) -> Iterator[RedisAPI]:
    """ENGINE ONLY: for Redis 8.2+/8.4+ commands and options the 7.0 test server lacks."""
    engine = Engine()
    try:
        yield engine.redis(decode_responses=request.param)
    finally:
        engine.close()


def fill(backend: Any, key: str, n: int, start: int = 1) -> list[Any]:
    return [backend.xadd(key, {"n": i}, id=f"{i}-0") for i in range(start, start + n)]


# --- connection, server, keyspace ----------------------------------------------------------------


def test_ping_echo_time(backend: Any) -> None:
    assert backend.ping() is True
    assert backend.echo("hello") == dec(backend, b"hello")
    assert backend.echo("ü") == dec(backend, "ü".encode())
    if not decoding(backend):
        assert backend.echo(b"\x00\xffraw") == b"\x00\xffraw"
    seconds, micros = backend.time()
    assert type(seconds) is int and type(micros) is int
    assert seconds > 1_600_000_000 and 0 <= micros < 1_000_000


def test_keyspace_calls(backend: Any) -> None:
    backend.xadd("s1", {"f": "v"}, id="1-0")
    backend.xadd("s2", {"f": "v"}, id="1-0")
    assert backend.exists("s1", "s2", "missing", "s1") == 3
    assert backend.type("s1") == dec(backend, b"stream")
    assert backend.type("missing") == dec(backend, b"none")
    assert sorted(backend.keys()) == dec(backend, [b"s1", b"s2"])
    assert backend.keys("*1") == dec(backend, [b"s1"])
    assert backend.dbsize() == 2
    cursor, keys = backend.scan(0, match="s*", count=100)
    assert cursor == 0 and sorted(keys) == dec(backend, [b"s1", b"s2"])
    assert sorted(backend.scan_iter(count=1)) == dec(backend, [b"s1", b"s2"])
    assert list(backend.scan_iter(_type="string")) == []
    assert backend.rename("s1", "s3") is True
    assert backend.renamenx("s3", "s2") is False
    assert backend.renamenx("s3", "s4") is True
    assert backend.xrange("s4") == dec(backend, [(b"1-0", {b"f": b"v"})])
    assert backend.delete("s2", "s4", "missing") == 2
    assert backend.dbsize() == 0
    backend.xadd("s5", {"f": "v"})
    assert backend.flushdb() is True
    assert backend.dbsize() == 0
    assert backend.flushall() is True


def test_pubsub_calls_without_subscribers(backend: Any) -> None:
    assert backend.publish("ps:none", "m") == 0
    assert backend.spublish("ps:none", "m") == 0
    assert backend.pubsub_channels("ps:*") == []
    assert backend.pubsub_shardchannels("ps:*") == []
    assert backend.pubsub_numsub("ps:a", "ps:b") == dec(backend, [(b"ps:a", 0), (b"ps:b", 0)])
    assert backend.pubsub_shardnumsub("ps:a") == dec(backend, [(b"ps:a", 0)])
    assert backend.pubsub_numpat() == 0


def test_keyspace_errors(backend: Any) -> None:
    assert raises_line(backend, backend.rename, "nope", "other") == "ERR no such key"
    assert raises_line(backend, backend.scan, 0, count=0) == "ERR syntax error"


def test_execute_command_applies_redis_py_callbacks(backend: Any) -> None:
    ex = backend.execute_command
    assert ex("XADD", "s", "1-1", "a", "b") == dec(backend, b"1-1")
    assert ex("xgroup create", "s", "g", "0") is True
    assert ex("XRANGE", "s", "-", "+") == dec(backend, [(b"1-1", {b"a": b"b"})])
    # Split by hand, redis-py finds no callback: the raw RESP2 reply, status replies as bytes.
    assert ex("XGROUP", "CREATE", "s", "g2", "0") == dec(backend, b"OK")
    assert ex("TYPE", "s") == dec(backend, b"stream")
    assert ex("PING") is True
    groups = ex("XINFO", "GROUPS", "s")
    assert groups[0][:2] == dec(backend, [b"name", b"g"])
    assert ex("XINFO GROUPS", "s")[0]["name"] == dec(backend, b"g")
    assert ex("XPENDING", "s", "g") == {"pending": 0, "min": None, "max": None, "consumers": []}
    assert ex("SCAN", 0) == (0, dec(backend, [b"s"]))
    # redis-py's per-call options: a reply left undecoded, an error replaced by a value.
    assert ex("ECHO", "x", NEVER_DECODE=True) == b"x"
    assert ex("XINFO GROUPS", "missing", EMPTY_RESPONSE=[]) == []
    with pytest.raises(errors_of(backend)):
        ex("XINFO GROUPS", "missing")
    assert ex("XLEN", "s", keys=["s"]) == 1


# --- entries: XADD, XRANGE, XREVRANGE, XLEN, XDEL -------------------------------------------------


def test_xadd_auto_and_explicit_ids(backend: Any) -> None:
    first = backend.xadd("s", {"a": 1, b"b": b"2", "c": 3.5})
    assert ID_RE.match(first if decoding(backend) else first.decode())
    assert backend.xadd("s", {"x": "y"}, id="99999999999999-5") == dec(backend, b"99999999999999-5")
    assert backend.xadd("s", {"x": "y"}, id="99999999999999-*") == dec(backend, b"99999999999999-6")
    assert backend.xlen("s") == 3
    entries = backend.xrange("s", count=1)
    assert entries == [(first, dec(backend, {b"a": b"1", b"b": b"2", b"c": b"3.5"}))]


def test_xadd_nomkstream(backend: Any) -> None:
    assert backend.xadd("s", {"a": "b"}, nomkstream=True) is None
    assert backend.exists("s") == 0
    backend.xadd("s", {"a": "b"}, id="1-0")
    assert backend.xadd("s", {"a": "c"}, id="2-0", nomkstream=True) == dec(backend, b"2-0")


def test_xrange_bounds_and_count(backend: Any) -> None:
    fill(backend, "s", 5)
    assert [e[0] for e in backend.xrange("s", "2", "4")] == dec(backend, [b"2-0", b"3-0", b"4-0"])
    assert [e[0] for e in backend.xrange("s", "(2-0", "+", count=2)] == dec(
        backend, [b"3-0", b"4-0"]
    )
    assert backend.xrange("s", "6", "+") == []
    assert backend.xrange("missing") == []
    assert backend.xrange("s", "1", "1") == [(dec(backend, b"1-0"), dec(backend, {b"n": b"1"}))]


def test_xrevrange_with_count(backend: Any) -> None:
    fill(backend, "s", 5)
    assert backend.xrevrange("s", count=2) == dec(
        backend, [(b"5-0", {b"n": b"5"}), (b"4-0", {b"n": b"4"})]
    )
    assert [e[0] for e in backend.xrevrange("s", "3", "(1")] == dec(backend, [b"3-0", b"2-0"])
    assert backend.xrevrange("missing", count=3) == []


def test_xdel(backend: Any) -> None:
    fill(backend, "s", 4)
    assert backend.xdel("s", "2-0", "3-0", "9-0") == 2
    assert backend.xdel("s", "2-0") == 0
    assert backend.xdel("missing", "1-0") == 0
    assert [e[0] for e in backend.xrange("s")] == dec(backend, [b"1-0", b"4-0"])
    info = backend.xinfo_stream("s")
    assert info["length"] == 2
    assert info["max-deleted-entry-id"] == dec(backend, b"3-0")
    assert info["entries-added"] == 4


def test_binary_and_unicode_payloads(backend: Any) -> None:
    backend.xadd("s", {"ключ": "значение", "emoji": "😀"}, id="1-0")
    [(sid, fields)] = backend.xrange("s")
    assert sid == dec(backend, b"1-0")
    if decoding(backend):
        assert fields == {"ключ": "значение", "emoji": "😀"}
    else:
        assert fields == {"ключ".encode(): "значение".encode(), b"emoji": "😀".encode()}
        backend.xadd("s", {b"\xff\x00": b"\x80"}, id="2-0")
        assert backend.xrange("s", "2") == [(b"2-0", {b"\xff\x00": b"\x80"})]


# --- trimming ------------------------------------------------------------------------------------


def test_xtrim_maxlen_exact_and_approximate(backend: Any) -> None:
    fill(backend, "s", 250)
    # Approximate trimming removes whole radix-tree nodes only (100 entries each by default).
    assert backend.xtrim("s", maxlen=120) == 100
    assert backend.xlen("s") == 150
    assert backend.xtrim("s", maxlen=149) == 0
    assert backend.xtrim("s", maxlen=120, approximate=False) == 30
    assert backend.xlen("s") == 120
    assert backend.xrange("s", count=1)[0][0] == dec(backend, b"131-0")
    assert backend.xtrim("missing", maxlen=0, approximate=False) == 0


def test_xtrim_minid_exact_and_approximate(backend: Any) -> None:
    fill(backend, "s", 250)
    assert backend.xtrim("s", minid="150", approximate=True) == 100
    assert backend.xtrim("s", minid="150", approximate=False) == 49
    assert backend.xrange("s", count=1)[0][0] == dec(backend, b"150-0")
    assert backend.xtrim("s", minid="1000", approximate=False) == 101
    assert backend.xlen("s") == 0


def test_xtrim_approximate_limit(backend: Any) -> None:
    fill(backend, "s", 350)
    assert backend.xtrim("s", maxlen=0, approximate=True, limit=200) == 200
    assert backend.xlen("s") == 150


def test_xadd_with_trimming(backend: Any) -> None:
    for i in range(1, 11):
        backend.xadd("s", {"n": i}, id=f"{i}-0", maxlen=3, approximate=False)
    assert [e[0] for e in backend.xrange("s")] == dec(backend, [b"8-0", b"9-0", b"10-0"])
    backend.xadd("s", {"n": 11}, id="11-0", minid="10", approximate=False)
    assert [e[0] for e in backend.xrange("s")] == dec(backend, [b"10-0", b"11-0"])
    for i in range(12, 120):
        backend.xadd("s", {"n": i}, id=f"{i}-0", maxlen=5)  # approximate by default
    # Only whole nodes go: the node holding 10-0..100-0 is dropped once 101-0 opens a new one.
    assert backend.xlen("s") == 19
    assert backend.xrange("s", count=1)[0][0] == dec(backend, b"101-0")
    info = backend.xinfo_stream("s")
    assert info["entries-added"] == 119
    assert info["length"] == backend.xlen("s")


# --- consumer groups -----------------------------------------------------------------------------


def test_producer_consumer_flow(backend: Any) -> None:
    assert backend.xgroup_create("jobs", "workers", id="$", mkstream=True) is True
    ids = [backend.xadd("jobs", {"job": n}, id=f"{n}-0") for n in range(1, 6)]
    got_a = backend.xreadgroup("workers", "alice", {"jobs": ">"}, count=2)
    got_b = backend.xreadgroup("workers", "bob", {"jobs": ">"})
    assert got_a == dec(backend, [[b"jobs", [(b"1-0", {b"job": b"1"}), (b"2-0", {b"job": b"2"})]]])
    assert [e[0] for e in got_b[0][1]] == ids[2:]
    assert backend.xreadgroup("workers", "bob", {"jobs": ">"}) == []

    summary = backend.xpending("jobs", "workers")
    assert summary == {
        "pending": 5,
        "min": ids[0],
        "max": ids[4],
        "consumers": [
            {"name": dec(backend, b"alice"), "pending": 2},
            {"name": dec(backend, b"bob"), "pending": 3},
        ],
    }
    assert backend.xack("jobs", "workers", ids[0], ids[2], "99-0") == 2
    assert backend.xack("jobs", "workers", ids[0]) == 0
    assert backend.xpending("jobs", "workers")["pending"] == 3
    # The consumer's own history: what it was given and has not acknowledged.
    history = backend.xreadgroup("workers", "bob", {"jobs": "0"})
    assert [e[0] for e in history[0][1]] == [ids[3], ids[4]]
    assert backend.xack("jobs", "workers", *ids) == 3
    assert backend.xpending("jobs", "workers") == {
        "pending": 0, "min": None, "max": None, "consumers": []
    }


def test_xreadgroup_noack_and_history_of_deleted_entry(backend: Any) -> None:
    backend.xgroup_create("s", "g", id="0", mkstream=True)
    fill(backend, "s", 3)
    assert len(backend.xreadgroup("g", "c", {"s": ">"}, count=1, noack=True)[0][1]) == 1
    assert backend.xpending("s", "g")["pending"] == 0
    backend.xreadgroup("g", "c", {"s": ">"})
    backend.xdel("s", "2-0")
    history = backend.xreadgroup("g", "c", {"s": "0-0"})
    assert history == dec(backend, [[b"s", [(b"2-0", {}), (b"3-0", {b"n": b"3"})]]])
    assert backend.xreadgroup("g", "c", {"s": "3-0"}) == dec(backend, [[b"s", []]])


def test_xreadgroup_multiple_streams(backend: Any) -> None:
    for key in ("a", "b"):
        backend.xgroup_create(key, "g", id="0", mkstream=True)
    fill(backend, "a", 2)
    got = backend.xreadgroup("g", "c", {"a": ">", "b": ">"})
    assert got == dec(backend, [[b"a", [(b"1-0", {b"n": b"1"}), (b"2-0", {b"n": b"2"})]]])
    fill(backend, "b", 1, start=7)
    got = backend.xreadgroup("g", "c", {"a": ">", "b": ">"}, block=50)
    assert got == dec(backend, [[b"b", [(b"7-0", {b"n": b"7"})]]])


def test_xread_multiple_streams(backend: Any) -> None:
    fill(backend, "a", 3)
    fill(backend, "b", 2, start=10)
    got = backend.xread({"a": "1-0", "b": 0, "missing": "0-0"}, count=1)
    assert got == dec(
        backend, [[b"a", [(b"2-0", {b"n": b"2"})]], [b"b", [(b"10-0", {b"n": b"10"})]]]
    )
    assert backend.xread({"a": "3-0", "b": "11"}) == []
    assert backend.xread({"a": "$"}, block=20) == []
    assert backend.xread({"a": "0"})[0][1][-1] == (dec(backend, b"3-0"), dec(backend, {b"n": b"3"}))


def blocked_clients(backend: Any) -> int:
    info = backend.execute_command("INFO", "clients")
    if isinstance(info, dict):  # (redis-py parses INFO; the engine's facade gives its text)
        return int(info["blocked_clients"])
    text = info.decode() if isinstance(info, bytes) else info
    return int(text.split("blocked_clients:", 1)[1].split()[0])


def add_once_blocked(backend: Any, fields: dict[str, Any], **kwargs: Any) -> None:
    """XADD as soon as a reader is blocked (not after a fixed sleep: on a busy machine the
    reader may not have blocked yet, and a `$` read would then wait past the entry)."""
    deadline = time.monotonic() + 30
    while not blocked_clients(backend) and time.monotonic() < deadline:
        time.sleep(0.005)
    backend.xadd("s", fields, **kwargs)


def test_blocking_reads_are_woken_by_xadd(backend: Any) -> None:
    backend.xgroup_create("s", "g", id="$", mkstream=True)
    producer = threading.Thread(target=add_once_blocked, args=(backend, {"k": "v"}),
                                kwargs={"id": "5-0"})
    producer.start()
    try:
        got = backend.xreadgroup("g", "c", {"s": ">"}, block=5000)
    finally:
        producer.join()
    assert got == dec(backend, [[b"s", [(b"5-0", {b"k": b"v"})]]])
    producer = threading.Thread(target=add_once_blocked, args=(backend, {"k": 2}))
    producer.start()
    try:
        got = backend.xread({"s": "$"}, block=5000)
    finally:
        producer.join()
    assert got[0][0] == dec(backend, b"s") and got[0][1][0][1] == dec(backend, {b"k": b"2"})
    assert len(backend.xreadgroup("g", "c", {"s": ">"})[0][1]) == 1
    assert backend.xreadgroup("g", "c", {"s": ">"}, block=10) == []  # timed out: nil


def test_xpending_range(backend: Any) -> None:
    backend.xgroup_create("s", "g", id="0", mkstream=True)
    fill(backend, "s", 4)
    backend.xreadgroup("g", "c1", {"s": ">"}, count=3)
    backend.xreadgroup("g", "c2", {"s": ">"})
    rows = backend.xpending_range("s", "g", "-", "+", 10)
    assert [r["message_id"] for r in rows] == dec(backend, [b"1-0", b"2-0", b"3-0", b"4-0"])
    assert [r["consumer"] for r in rows] == dec(backend, [b"c1", b"c1", b"c1", b"c2"])
    assert all(set(r) == {"message_id", "consumer", "time_since_delivered", "times_delivered"}
               for r in rows)
    assert all(r["times_delivered"] == 1 and r["time_since_delivered"] >= 0 for r in rows)
    only_c2 = backend.xpending_range("s", "g", "-", "+", 10, consumername="c2")
    assert [r["message_id"] for r in only_c2] == dec(backend, [b"4-0"])
    assert len(backend.xpending_range("s", "g", "2-0", "3-0", 1)) == 1
    assert backend.xpending_range("s", "g", "-", "+", 10, idle=3_600_000) == []
    assert backend.xpending_range("s", "g", "-", "+", 10, consumername="nobody") == []
    # No range at all: redis-py falls back to the summary form.
    assert backend.xpending_range("s", "g", None, None, None)["pending"] == 4


def test_xclaim(backend: Any) -> None:
    backend.xgroup_create("s", "g", id="0", mkstream=True)
    fill(backend, "s", 3)
    backend.xreadgroup("g", "alice", {"s": ">"})
    claimed = backend.xclaim("s", "g", "bob", 0, ["1-0", "2-0", "9-0"])
    assert claimed == dec(backend, [(b"1-0", {b"n": b"1"}), (b"2-0", {b"n": b"2"})])
    assert backend.xclaim("s", "g", "carol", 0, ("3-0",), justid=True) == dec(backend, [b"3-0"])
    rows = {r["message_id"]: r for r in backend.xpending_range("s", "g", "-", "+", 10)}
    assert rows[dec(backend, b"1-0")]["consumer"] == dec(backend, b"bob")
    assert rows[dec(backend, b"1-0")]["times_delivered"] == 2
    assert rows[dec(backend, b"3-0")]["consumer"] == dec(backend, b"carol")
    assert rows[dec(backend, b"3-0")]["times_delivered"] == 1  # JUSTID does not count
    # A long min-idle-time claims nothing; RETRYCOUNT and IDLE set the delivery data.
    assert backend.xclaim("s", "g", "dave", 3_600_000, ["1-0"]) == []
    backend.xclaim("s", "g", "dave", 0, ["1-0"], idle=5000, retrycount=7, justid=True)
    row = backend.xpending_range("s", "g", "1-0", "1-0", 1)[0]
    assert row["consumer"] == dec(backend, b"dave")
    assert row["times_delivered"] == 7 and row["time_since_delivered"] >= 5000
    # FORCE creates a PEL entry for an entry nobody was given.
    backend.xadd("s", {"n": 4}, id="4-0")
    assert backend.xclaim("s", "g", "erin", 0, ["4-0"], justid=True) == []
    assert backend.xclaim("s", "g", "erin", 0, ["4-0"], force=True, justid=True) == dec(
        backend, [b"4-0"]
    )
    backend.xadd("s", {"n": 5}, id="5-0")
    assert backend.xclaim("s", "g", "erin", 0, ["5-0"], force=True) == dec(
        backend, [(b"5-0", {b"n": b"5"})]
    )
    # A FORCE-created PEL entry starts at one delivery; without JUSTID the claim counts too.
    rows = backend.xpending_range("s", "g", "4-0", "5-0", 10)
    assert [(r["message_id"], r["times_delivered"]) for r in rows] == dec(
        backend, [(b"4-0", 1), (b"5-0", 2)]
    )


def test_xautoclaim(backend: Any) -> None:
    backend.xgroup_create("s", "g", id="0", mkstream=True)
    fill(backend, "s", 5)
    backend.xreadgroup("g", "alice", {"s": ">"})
    got = backend.xautoclaim("s", "g", "bob", 0, start_id="0-0", count=2)
    assert got == dec(backend, [b"3-0", [(b"1-0", {b"n": b"1"}), (b"2-0", {b"n": b"2"})], []])
    # JUSTID: redis-py keeps only the list of claimed IDs.
    assert backend.xautoclaim("s", "g", "carol", 0, start_id="3-0", count=2, justid=True) == dec(
        backend, [b"3-0", b"4-0"]
    )
    backend.xdel("s", "5-0")
    got = backend.xautoclaim("s", "g", "bob", 0, start_id="5-0")
    assert got == dec(backend, [b"0-0", [], [b"5-0"]])
    assert backend.xautoclaim("s", "g", "bob", 3_600_000) == dec(backend, [b"0-0", [], []])
    consumers = {c["name"]: c["pending"] for c in backend.xinfo_consumers("s", "g")}
    assert consumers == dec(backend, {b"alice": 0, b"bob": 2, b"carol": 2})


def test_xgroup_management(backend: Any) -> None:
    fill(backend, "s", 3)
    assert backend.xgroup_create("s", "g", id="0") is True
    assert backend.xgroup_createconsumer("s", "g", "c1") == 1
    assert backend.xgroup_createconsumer("s", "g", "c1") == 0
    backend.xreadgroup("g", "c2", {"s": ">"}, count=2)
    assert backend.xgroup_delconsumer("s", "g", "c2") == 2
    assert backend.xgroup_delconsumer("s", "g", "nobody") == 0
    assert backend.xgroup_setid("s", "g", "1-0") is True
    got = backend.xreadgroup("g", "c1", {"s": ">"})
    assert [e[0] for e in got[0][1]] == dec(backend, [b"2-0", b"3-0"])
    assert backend.xgroup_setid("s", "g", "0", entries_read=0) is True
    assert backend.xinfo_groups("s")[0]["entries-read"] == 0
    assert backend.xgroup_destroy("s", "g") is True
    assert backend.xgroup_destroy("s", "g") is False
    assert backend.xinfo_groups("s") == []


def test_xgroup_create_entries_read_and_lag(backend: Any) -> None:
    fill(backend, "s", 5)
    backend.xgroup_create("s", "g", id="2-0", entries_read=2)
    backend.xgroup_create("s", "fresh", id="0")
    groups = {g["name"]: g for g in backend.xinfo_groups("s")}
    g = groups[dec(backend, b"g")]
    assert (g["entries-read"], g["lag"]) == (2, 3)
    fresh = groups[dec(backend, b"fresh")]
    assert (fresh["entries-read"], fresh["lag"]) == (None, 5)
    backend.xreadgroup("g", "c", {"s": ">"}, count=1)
    g = backend.xinfo_groups("s")[1]
    assert (g["name"], g["entries-read"], g["lag"]) == (dec(backend, b"g"), 3, 2)


# --- introspection -------------------------------------------------------------------------------


def test_xinfo_stream(backend: Any) -> None:
    fill(backend, "s", 3)
    backend.xgroup_create("s", "g", id="0")
    info = backend.xinfo_stream("s")
    assert all(type(k) is str for k in info)
    assert info["length"] == 3
    assert info["last-generated-id"] == dec(backend, b"3-0")
    assert info["max-deleted-entry-id"] == dec(backend, b"0-0")
    assert info["entries-added"] == 3
    assert info["recorded-first-entry-id"] == dec(backend, b"1-0")
    assert info["groups"] == 1
    assert info["radix-tree-keys"] == 1
    assert info["first-entry"] == dec(backend, (b"1-0", {b"n": b"1"}))
    assert info["last-entry"] == dec(backend, (b"3-0", {b"n": b"3"}))
    backend.xtrim("s", maxlen=0, approximate=False)
    empty = backend.xinfo_stream("s")
    assert empty["first-entry"] is None and empty["last-entry"] is None
    assert empty["recorded-first-entry-id"] == dec(backend, b"0-0")
    assert empty["length"] == 0 and empty["last-generated-id"] == dec(backend, b"3-0")


def test_xinfo_stream_full(backend: Any) -> None:
    fill(backend, "s", 3)
    backend.xgroup_create("s", "g", id="0")
    backend.xgroup_create("s", "idle", id="$")
    backend.xreadgroup("g", "c", {"s": ">"}, count=2)
    full = backend.xinfo_stream("s", full=True)
    assert full["length"] == 3
    assert full["entries"] == dec(
        backend, {b"1-0": {b"n": b"1"}, b"2-0": {b"n": b"2"}, b"3-0": {b"n": b"3"}}
    )
    groups = {g["name"]: g for g in full["groups"]}
    g = groups[dec(backend, b"g")]
    assert g["last-delivered-id"] == dec(backend, b"2-0")
    assert (g["entries-read"], g["lag"], g["pel-count"]) == (2, 1, 2)
    assert [p[0] for p in g["pending"]] == dec(backend, [b"1-0", b"2-0"])
    assert [(p[1], p[3]) for p in g["pending"]] == dec(backend, [(b"c", 1), (b"c", 1)])
    assert isinstance(g["pending"][0], list)
    [consumer] = g["consumers"]
    assert consumer["name"] == dec(backend, b"c")
    assert consumer["pel-count"] == 2
    assert [p[0] for p in consumer["pending"]] == dec(backend, [b"1-0", b"2-0"])
    assert type(consumer["seen-time"]) is int
    assert ("active-time" in consumer) is is_engine(backend)  # 7.2+
    assert groups[dec(backend, b"idle")]["consumers"] == []
    assert groups[dec(backend, b"idle")]["pending"] == []
    backend.xadd("lonely", {"a": "b"}, id="1-0")
    lonely = backend.xinfo_stream("lonely", full=True)
    assert lonely["groups"] == [] and lonely["entries"] == dec(backend, {b"1-0": {b"a": b"b"}})


def test_xinfo_groups_and_consumers(backend: Any) -> None:
    fill(backend, "s", 4)
    backend.xgroup_create("s", "g", id="0")
    backend.xreadgroup("g", "c1", {"s": ">"}, count=3)
    backend.xgroup_createconsumer("s", "g", "c0")
    [group] = backend.xinfo_groups("s")
    assert {k: group[k] for k in ("name", "consumers", "pending", "last-delivered-id",
                                  "entries-read", "lag")} == {
        "name": dec(backend, b"g"), "consumers": 2, "pending": 3,
        "last-delivered-id": dec(backend, b"3-0"), "entries-read": 3, "lag": 1,
    }
    consumers = backend.xinfo_consumers("s", "g")
    assert [(c["name"], c["pending"]) for c in consumers] == dec(
        backend, [(b"c0", 0), (b"c1", 3)]
    )
    assert all(type(c["idle"]) is int and c["idle"] >= 0 for c in consumers)
    assert ("inactive" in consumers[0]) is is_engine(backend)  # 7.2+
    if is_engine(backend):
        assert consumers[0]["inactive"] == -1  # never read
        assert consumers[1]["inactive"] >= 0


# --- errors --------------------------------------------------------------------------------------


def test_server_errors_match(backend: Any) -> None:
    fill(backend, "s", 2)
    backend.xgroup_create("s", "g", id="0")
    assert raises_line(backend, backend.xreadgroup, "nope", "c", {"s": ">"}) == (
        "NOGROUP No such key 's' or consumer group 'nope' in XREADGROUP with GROUP option"
    )
    assert raises_line(backend, backend.xreadgroup, "g", "c", {"missing": ">"}) == (
        "NOGROUP No such key 'missing' or consumer group 'g' in XREADGROUP with GROUP option"
    )
    assert raises_line(backend, backend.xgroup_create, "s", "g") == (
        "BUSYGROUP Consumer Group name already exists"
    )
    assert raises_line(backend, backend.xgroup_create, "missing", "g") == (
        "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may "
        "want to use the MKSTREAM option to create an empty stream automatically."
    )
    assert raises_line(backend, backend.xadd, "s", {"a": "b"}, id="1-0") == (
        "ERR The ID specified in XADD is equal or smaller than the target stream top item"
    )
    assert raises_line(backend, backend.xadd, "s", {"a": "b"}, id="0-0") == (
        "ERR The ID specified in XADD must be greater than 0-0"
    )
    assert raises_line(backend, backend.xrange, "s", "bad") == (
        "ERR Invalid stream ID specified as stream command argument"
    )
    assert raises_line(backend, backend.xinfo_stream, "missing") == "ERR no such key"
    assert raises_line(backend, backend.xinfo_consumers, "s", "nope") == (
        "NOGROUP No such consumer group 'nope' for key name 's'"
    )
    assert raises_line(backend, backend.xpending, "s", "nope") == (
        "NOGROUP No such key 's' or consumer group 'nope'"
    )
    assert raises_line(backend, backend.xclaim, "s", "nope", "c", 0, ["1-0"]) == (
        "NOGROUP No such key 's' or consumer group 'nope'"
    )
    assert raises_line(backend, backend.xautoclaim, "s", "g", "c", 0, count=0) == (
        "ERR COUNT must be > 0"
    )
    assert raises_line(backend, backend.xtrim, "s", maxlen=1, limit=-1) == (
        "ERR The LIMIT argument must be >= 0."
    )
    assert raises_line(backend, backend.xgroup_setid, "s", "nope", "0") == (
        "NOGROUP No such consumer group 'nope' for key name 's'"
    )
    assert raises_line(backend, backend.execute_command, "XFOO", "x") == (
        "ERR unknown command 'XFOO', with args beginning with: 'x' "
    )


def test_client_side_data_errors_match(backend: Any) -> None:
    expected = data_errors_of(backend)
    cases = [
        (lambda: backend.xadd("s", {}), "XADD fields must be a non-empty dict"),
        (lambda: backend.xadd("s", {"a": 1}, maxlen=1, minid="1"),
         "Only one of ```maxlen``` or ```minid``` may be specified"),
        (lambda: backend.xadd("s", {"a": 1}, maxlen=-1), "XADD maxlen must be non-negative integer"),
        (lambda: backend.xadd("s", {"a": 1}, ref_policy="NOPE"),
         "XADD ref_policy must be one of: KEEPREF, DELREF, ACKED"),
        (lambda: backend.xadd("s", {"a": True}),
         "Invalid input of type: 'bool'. Convert to a bytes, string, int or float first."),
        (lambda: backend.xadd("s", {"a": None}),
         "Invalid input of type: 'NoneType'. Convert to a bytes, string, int or float first."),
        (lambda: backend.xrange("s", count=0), "XRANGE count must be a positive integer"),
        (lambda: backend.xrevrange("s", count=-1), "XREVRANGE count must be a positive integer"),
        (lambda: backend.xread({}), "XREAD streams must be a non empty dict"),
        (lambda: backend.xread({"s": 0}, block=-1), "XREAD block must be a non-negative integer"),
        (lambda: backend.xreadgroup("g", "c", {"s": ">"}, count=0),
         "XREADGROUP count must be a positive integer"),
        (lambda: backend.xreadgroup("g", "c", {"s": ">"}, claim_min_idle_time=-1),
         "XREADGROUP claim_min_idle_time must be a non-negative integer"),
        (lambda: backend.xtrim("s"), "One of ``maxlen`` or ``minid`` must be specified"),
        (lambda: backend.xtrim("s", maxlen=1, minid="1"),
         "Only one of ``maxlen`` or ``minid`` may be specified"),
        (lambda: backend.xclaim("s", "g", "c", -1, ["1-0"]),
         "XCLAIM min_idle_time must be a non negative integer"),
        (lambda: backend.xclaim("s", "g", "c", 0, []),
         "XCLAIM message_ids must be a non empty list or tuple of message IDs to claim"),
        (lambda: backend.xautoclaim("s", "g", "c", -1),
         "XAUTOCLAIM min_idle_time must be a nonnegative integer"),
        (lambda: backend.xautoclaim("s", "g", "c", 0, count=-1),
         "XPENDING count must be a integer >= 0"),
        (lambda: backend.xpending_range("s", "g", "-", None, 3),
         "XPENDING must be provided with min, max and count parameters, or none of them."),
        (lambda: backend.xpending_range("s", "g", None, None, None, consumername="c"),
         "if XPENDING is provided with idle time or consumername, it must be provided "
         "with min, max and count parameters"),
        (lambda: backend.xackdel("s", "g"), "XACKDEL requires at least one message ID"),
        (lambda: backend.xdelex("s", "1-0", ref_policy="X"),
         "XDELEX ref_policy must be one of: KEEPREF, DELREF, ACKED"),
    ]
    for call, message in cases:
        with pytest.raises(expected) as info:
            call()
        assert str(info.value) == message
    assert backend.exists("s") == 0


# --- Redis 8.2+ / 8.4+ (engine only) ---------------------------------------------------------------


def test_engine_only_xackdel(engine_backend: RedisAPI) -> None:
    backend = engine_backend
    fill(backend, "s", 4)
    backend.xgroup_create("s", "g1", id="0")
    backend.xgroup_create("s", "g2", id="0")
    backend.xreadgroup("g1", "c", {"s": ">"})
    backend.xreadgroup("g2", "c", {"s": ">"}, count=2)
    # KEEPREF (default): acked in g1 and deleted; g2 keeps its reference to 1-0.
    assert backend.xackdel("s", "g1", "1-0", "9-0") == [1, -1]
    assert backend.xpending("s", "g2")["pending"] == 2
    # ACKED: acknowledged in g1 but kept, as g2 has 2-0 pending and has not read 3-0 yet.
    assert backend.xackdel("s", "g1", "2-0", "3-0", ref_policy="ACKED") == [2, 2]
    assert [e[0] for e in backend.xrange("s")] == dec(backend, [b"2-0", b"3-0", b"4-0"])
    assert backend.xpending("s", "g1")["min"] == dec(backend, b"4-0")
    # DELREF: deleted, and g2's reference to it goes too.
    backend.xreadgroup("g2", "c", {"s": ">"})
    assert backend.xackdel("s", "g1", "4-0", ref_policy="DELREF") == [1]
    assert [r["message_id"] for r in backend.xpending_range("s", "g2", "-", "+", 10)] == dec(
        backend, [b"1-0", b"2-0", b"3-0"]
    )
    assert backend.xackdel("missing", "g1", "1-0", "2-0") == [-1, -1]


def test_engine_only_xdelex(engine_backend: RedisAPI) -> None:
    backend = engine_backend
    fill(backend, "s", 4)
    backend.xgroup_create("s", "g", id="0")
    backend.xreadgroup("g", "c", {"s": ">"}, count=2)
    assert backend.xdelex("s", "1-0", "9-0") == [1, -1]
    assert backend.xpending("s", "g")["pending"] == 2  # KEEPREF leaves the PEL alone
    assert backend.xdelex("s", "2-0", "3-0", ref_policy="ACKED") == [2, 2]  # 3-0 not yet read
    backend.xack("s", "g", "2-0")
    backend.xreadgroup("g", "c", {"s": ">"})
    backend.xack("s", "g", "3-0")
    assert backend.xdelex("s", "2-0", "3-0", ref_policy="ACKED") == [1, 1]
    assert backend.xdelex("s", "4-0", ref_policy="DELREF") == [1]
    assert [r["message_id"] for r in backend.xpending_range("s", "g", "-", "+", 10)] == dec(
        backend, [b"1-0"]
    )
    assert backend.xdelex("missing", "1-0") == [-1]


def test_engine_only_trimming_ref_policy(engine_backend: RedisAPI) -> None:
    backend = engine_backend
    fill(backend, "s", 5)
    backend.xgroup_create("s", "g", id="0")
    backend.xreadgroup("g", "c", {"s": ">"}, count=3)
    backend.xack("s", "g", "1-0", "2-0")
    # ACKED trims only what every group has read and acknowledged.
    assert backend.xtrim("s", maxlen=0, approximate=False, ref_policy="ACKED") == 2
    assert [e[0] for e in backend.xrange("s")] == dec(backend, [b"3-0", b"4-0", b"5-0"])
    # DELREF drops the trimmed entries' PEL references.
    backend.xadd("s", {"n": 6}, id="6-0", maxlen=2, approximate=False, ref_policy="DELREF")
    assert [e[0] for e in backend.xrange("s")] == dec(backend, [b"5-0", b"6-0"])
    assert backend.xpending("s", "g")["pending"] == 0
    # KEEPREF (the default) leaves them dangling.
    backend.xreadgroup("g", "c", {"s": ">"})
    backend.xtrim("s", maxlen=1, approximate=False, ref_policy="KEEPREF")
    assert backend.xpending("s", "g")["pending"] == 2


def test_engine_only_xreadgroup_claim_min_idle_time(engine_backend: RedisAPI) -> None:
    backend = engine_backend
    fill(backend, "s", 3)
    backend.xgroup_create("s", "g", id="0")
    backend.xreadgroup("g", "alice", {"s": ">"}, count=2)
    # CLAIM 0: idle pending entries first (id, fields, idle ms, times delivered before), then
    # new entries with 0, 0.
    got = backend.xreadgroup("g", "bob", {"s": ">"}, claim_min_idle_time=0)
    [[key, entries]] = got
    assert key == dec(backend, b"s")
    assert [(e[0], e[1], e[3]) for e in entries] == dec(
        backend, [(b"1-0", {b"n": b"1"}, 1), (b"2-0", {b"n": b"2"}, 1), (b"3-0", {b"n": b"3"}, 0)]
    )
    assert all(len(e) == 4 and type(e[2]) is int and e[2] >= 0 for e in entries)
    assert entries[2][2] == 0
    owners = {r["message_id"]: r["consumer"] for r in
              backend.xpending_range("s", "g", "-", "+", 10)}
    assert set(owners.values()) == {dec(backend, b"bob")}
    # A long min-idle-time claims nothing, and nothing new is left.
    assert backend.xreadgroup("g", "carol", {"s": ">"}, claim_min_idle_time=3_600_000) == []
    # Without CLAIM the entries keep redis-py's 2-tuple shape.
    backend.xadd("s", {"n": 4}, id="4-0")
    assert backend.xreadgroup("g", "carol", {"s": ">"}) == dec(
        backend, [[b"s", [(b"4-0", {b"n": b"4"})]]]
    )


# --- the argv each method sends (no server needed) -------------------------------------------------


class _Sent(Exception):
    pass


ARGV_CALLS: list[tuple[str, tuple, dict]] = [
    ("xadd", ("s", {"a": 1, b"b": 2.5}), {}),
    ("xadd", ("s", {"a": "b"}), {"id": "5-*", "maxlen": 10, "limit": 100}),
    ("xadd", ("s", {"a": "b"}), {"minid": "3-0", "approximate": False, "nomkstream": True}),
    ("xadd", ("s", {"a": "b"}), {"maxlen": 0, "ref_policy": "ACKED"}),
    ("xlen", ("s",), {}),
    ("xrange", ("s",), {}),
    ("xrange", ("s", "1", "(9"), {"count": 3}),
    ("xrevrange", ("s", "+", "-"), {"count": 1}),
    ("xdel", ("s", "1-0", b"2-0"), {}),
    ("xdelex", ("s", "1-0", "2-0"), {"ref_policy": "DELREF"}),
    ("xtrim", ("s",), {"maxlen": 5}),
    ("xtrim", ("s",), {"minid": "5-0", "approximate": False, "limit": 9, "ref_policy": "ACKED"}),
    ("xread", ({"a": 0, "b": "$"},), {"count": 2, "block": 100}),
    ("xreadgroup", ("g", "c", {"a": ">", "b": "0"}), {"count": 5, "block": 0, "noack": True,
                                                      "claim_min_idle_time": 1000}),
    ("xgroup_create", ("s", "g"), {}),
    ("xgroup_create", ("s", "g", "0"), {"mkstream": True, "entries_read": 3}),
    ("xgroup_setid", ("s", "g", "5-0"), {"entries_read": 5}),
    ("xgroup_destroy", ("s", "g"), {}),
    ("xgroup_createconsumer", ("s", "g", "c"), {}),
    ("xgroup_delconsumer", ("s", "g", "c"), {}),
    ("xack", ("s", "g", "1-0", "2-0"), {}),
    ("xackdel", ("s", "g", "1-0"), {"ref_policy": "ACKED"}),
    ("xpending", ("s", "g"), {}),
    ("xpending_range", ("s", "g", "-", "+", 10), {"consumername": "c", "idle": 500}),
    ("xclaim", ("s", "g", "c", 100, ["1-0", "2-0"]), {"idle": 5, "time": 6, "retrycount": 7,
                                                      "force": True, "justid": True}),
    ("xautoclaim", ("s", "g", "c", 100), {"start_id": "1-0", "count": 10, "justid": True}),
    ("xinfo_stream", ("s",), {"full": True}),
    ("xinfo_groups", ("s",), {}),
    ("xinfo_consumers", ("s", "g"), {}),
    ("delete", ("a", "b"), {}),
    ("exists", ("a",), {}),
    ("type", ("a",), {}),
    ("keys", ("s*",), {}),
    ("scan", (7,), {"match": "s*", "count": 50, "_type": "stream"}),
    ("dbsize", (), {}),
    ("flushdb", (), {"asynchronous": True}),
    ("flushall", (), {}),
    ("ping", (), {}),
    ("echo", ("hi",), {}),
    ("time", (), {}),
    ("rename", ("a", "b"), {}),
    ("renamenx", ("a", "b"), {}),
    ("publish", ("c", "m"), {}),
    ("spublish", ("c", "m"), {}),
    ("pubsub_channels", (), {}),
    ("pubsub_channels", ("a*",), {}),
    ("pubsub_shardchannels", (), {}),
    ("pubsub_numsub", ("a", "b"), {}),
    ("pubsub_shardnumsub", ("a",), {}),
    ("pubsub_numpat", (), {}),
]


def _redis_py_argv(method: str, args: tuple, kwargs: dict) -> list[bytes]:
    client = redis.Redis(protocol=2)  # never connects: execute_command is intercepted
    sent: list[tuple] = []

    def intercept(*argv: Any, **options: Any) -> Any:
        sent.append(argv)
        raise _Sent

    client.execute_command = intercept  # type: ignore[method-assign]
    with pytest.raises(_Sent):
        getattr(client, method)(*args, **kwargs)
    [argv] = sent
    if isinstance(argv[0], str):  # the connection splits "XGROUP CREATE" into two arguments
        argv = (*argv[0].encode().split(), *argv[1:])
    encoder = client.get_encoder()
    return [bytes(encoder.encode(a)) for a in argv]


def _engine_argv(method: str, args: tuple, kwargs: dict) -> list[bytes]:
    sent: list[tuple] = []

    class Intercept:
        def execute(self, *argv: Any) -> Any:
            sent.append(argv)
            raise _Sent

    with pytest.raises(_Sent):
        getattr(RedisAPI(Intercept()), method)(*args, **kwargs)
    [argv] = sent
    return [a if isinstance(a, bytes) else str(a).encode() if isinstance(a, (str, int)) else
            repr(a).encode() for a in argv]


@pytest.mark.parametrize(("method", "args", "kwargs"), ARGV_CALLS,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(ARGV_CALLS)])
def test_argv_matches_redis_py(method: str, args: tuple, kwargs: dict) -> None:
    assert _engine_argv(method, args, kwargs) == _redis_py_argv(method, args, kwargs)
